// hvd-gpu-bench: hvd::allreduce on device buffers beside a plain ncclAllReduce loop, one rank,
// in one run (the ratio is the overhead hvd adds to NCCL: stream ordering, completion polling,
// the watchdog's bookkeeping). Sizes 64 KiB .. 1 GiB (float32 sum), in-place, each timed over
// N iterations after W warm-ups; the table has time per call and algbw (busbw is 0 at np 1).
// Every hvd result is checked once per size; exits 1 on a wrong element, 77 without a GPU.
//
//   hvd-gpu-bench [-b MIN] [-e MAX] [-n ITERS] [-w WARMUP]   (sizes in bytes, K/M/G suffixes)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "../../bench/size_parse.h"
#include "gpu/cuda_api.h"
#include "gpu/loader.h"
#include "gpu/nccl_api.h"
#include "hvd/hvd.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

int main(int argc, char** argv) {
  size_t minBytes = 64 << 10, maxBytes = size_t{1} << 30;
  int iters = 20, warmup = 5;
  const char* usage = "usage: hvd-gpu-bench [-b MIN] [-e MAX] [-n ITERS] [-w WARMUP]\n";
  if (argc % 2 == 0) {
    std::fprintf(stderr, "%s", usage);
    return 2;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    bool ok = true;
    if (a == "-b") {
      ok = hvd_bench_parse_size(argv[i + 1], &minBytes) == 0;
    } else if (a == "-e") {
      ok = hvd_bench_parse_size(argv[i + 1], &maxBytes) == 0;
    } else if (a == "-n") {
      iters = std::atoi(argv[i + 1]);
    } else if (a == "-w") {
      warmup = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "hvd-gpu-bench: unknown option '%s'\n%s", a.c_str(), usage);
      return 2;
    }
    if (!ok) {
      std::fprintf(stderr, "hvd-gpu-bench: %s '%s' is not a size (e.g. 64K, 256M, 1G)\n", a.c_str(),
                   argv[i + 1]);
      return 2;
    }
  }
  // Sizes grow by 4 from MIN: MIN must be a positive number of float32 elements.
  if (minBytes < 4 || minBytes % 4 != 0 || maxBytes < minBytes || iters < 1 || warmup < 0) {
    std::fprintf(stderr,
                 "hvd-gpu-bench: need 4 <= MIN <= MAX with MIN a multiple of 4 bytes, ITERS >= 1 "
                 "and WARMUP >= 0\n");
    return 2;
  }
  std::string why;
  auto cuda = hvd::gpu::loadCuda(hvd::gpu::kDefaultCudaLibrary, &why);
  if (cuda == nullptr || cuda->deviceCount() == 0) {
    std::printf("SKIP: no GPU visible (%s)\n", cuda == nullptr ? why.c_str() : "no CUDA device");
    return 77;
  }
  auto nccl = hvd::gpu::loadNccl(hvd::gpu::ncclLibraryFromEnv(), &why);
  if (nccl == nullptr) {
    std::fprintf(stderr, "hvd-gpu-bench: NCCL cannot be loaded: %s\n", why.c_str());
    return 1;
  }
  for (const char* kv : {"HVD_RANK=0", "HVD_SIZE=1", "HVD_LOCAL_RANK=0", "HVD_LOCAL_SIZE=1",
                         "HVD_CROSS_RANK=0", "HVD_CROSS_SIZE=1", "HVD_JOB_ID=gpu-bench"}) {
    ::putenv(const_cast<char*>(kv));
  }
  try {
    hvd::init();
    cuda->setDevice(0);
    // The peer: one communicator of one rank and a stream, then nothing but ncclAllReduce.
    hvd::gpu::NcclUniqueId id;
    hvd::gpu::NcclComm comm = nullptr;
    if (nccl->getUniqueId(&id) != hvd::gpu::NcclResult::kSuccess ||
        nccl->commInitRank(&comm, 1, id, 0, true) != hvd::gpu::NcclResult::kSuccess) {
      std::fprintf(stderr, "hvd-gpu-bench: ncclCommInitRank failed\n");
      return 1;
    }
    hvd::gpu::CudaStreamHandle stream = cuda->createStream();
    void* buf = cuda->allocDevice(maxBytes);
    std::vector<float> host(maxBytes / 4);
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 1000);
    std::printf("# hvd-gpu-bench: float32 sum, in place, np 1, %d iterations after %d warm-ups\n",
                iters, warmup);
    std::printf("# %12s %12s %12s %10s %12s %10s %8s %7s\n", "size (B)", "count", "hvd (us)",
                "algbw", "nccl (us)", "algbw", "hvd/nccl", "#wrong");
    int failed = 0;
    for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= 4) {
      const size_t count = bytes / 4;
      cuda->copyAsync(buf, host.data(), bytes, nullptr);
      cuda->synchronizeStream(nullptr);
      hvd::allreduce(buf, buf, count, hvd::DataType::kFloat32, {hvd::ReduceOp::kSum});
      std::vector<float> back(count);
      cuda->copyAsync(back.data(), buf, bytes, nullptr);
      cuda->synchronizeStream(nullptr);
      size_t wrong = 0;
      for (size_t i = 0; i < count; ++i) wrong += back[i] != host[i];  // np 1: sum is the input
      failed |= wrong != 0;
      for (int i = 0; i < warmup; ++i) {
        hvd::allreduce(buf, buf, count, hvd::DataType::kFloat32, {hvd::ReduceOp::kSum});
      }
      auto t0 = Clock::now();
      for (int i = 0; i < iters; ++i) {
        hvd::allreduce(buf, buf, count, hvd::DataType::kFloat32, {hvd::ReduceOp::kSum});
      }
      const double hvdSeconds = seconds(Clock::now() - t0) / iters;
      for (int i = 0; i < warmup; ++i) {
        nccl->allReduce(buf, buf, count, hvd::DataType::kFloat32, hvd::ReduceOp::kSum, comm,
                        stream);
      }
      cuda->synchronizeStream(stream);
      t0 = Clock::now();
      for (int i = 0; i < iters; ++i) {
        // Each call waits for its result, as hvd's blocking allreduce does.
        nccl->allReduce(buf, buf, count, hvd::DataType::kFloat32, hvd::ReduceOp::kSum, comm,
                        stream);
        cuda->synchronizeStream(stream);
      }
      const double ncclSeconds = seconds(Clock::now() - t0) / iters;
      std::printf("  %12zu %12zu %12.1f %10.2f %12.1f %10.2f %8.2f %7zu\n", bytes, count,
                  hvdSeconds * 1e6, bytes / hvdSeconds / 1e9, ncclSeconds * 1e6,
                  bytes / ncclSeconds / 1e9, hvdSeconds / ncclSeconds, wrong);
    }
    cuda->freeDevice(buf);
    cuda->destroyStream(stream);
    nccl->commDestroy(comm);
    std::printf("# device buffers ran on %s\n", hvd::deviceBackend().c_str());
    hvd::shutdown();
    return failed;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hvd-gpu-bench: %s\n", e.what());
    return 1;
  }
}
