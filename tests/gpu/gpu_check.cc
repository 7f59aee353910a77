// hvd-gpu-check: libhvd's collectives on CUDA device buffers, checked value by value.
//
//   hvd-gpu-check                    one rank: every collective, dtype and op over NCCL
//   hvd-gpu-check --np 2 --backend host
//                                    two ranks sharing the one GPU, staged through host memory
//                                    (NCCL refuses two ranks on one GPU); this process is their
//                                    launcher: a store server, N forked ranks, a deadline
//
// Inputs are small integers (exact in every dtype), so results compare bit for bit; averages
// of float types within float16's/bfloat16's rounding of the exact value. Device memory comes
// from hvd's own CUDA driver loader (no CUDA link at all, like libhvd). Prints one line per
// collective and exits 0 when every value is right, 1 on a wrong value or an error, and 77 (a
// skip, for ctest) when no GPU is visible, saying why.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/element.h"
#include "gpu/cuda_api.h"
#include "hvd/hvd.hpp"
#include "store/tcp_store_server.h"

namespace {

using hvd::DataType;
using hvd::ReduceOp;

constexpr int kSkip = 77;

struct Checker {
  hvd::gpu::CudaApi& cuda;
  int rank = 0;
  int size = 1;
  long cases = 0;
  long failures = 0;

  void* device(size_t bytes) {
    void* p = cuda.allocDevice(bytes > 0 ? bytes : 1);
    return p;
  }
  void upload(void* dst, const std::vector<uint8_t>& src) {
    cuda.copyAsync(dst, src.data(), src.size(), nullptr);
    cuda.synchronizeStream(nullptr);
  }
  std::vector<uint8_t> download(const void* src, size_t bytes) {
    std::vector<uint8_t> out(bytes);
    cuda.copyAsync(out.data(), src, bytes, nullptr);
    cuda.synchronizeStream(nullptr);
    return out;
  }
  void expect(bool ok, const std::string& what) {
    ++cases;
    if (!ok) {
      ++failures;
      if (failures <= 20) std::fprintf(stderr, "rank %d: WRONG %s\n", rank, what.c_str());
    }
  }
};

bool isFloat(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kFloat32 ||
         t == DataType::kFloat64;
}

// Element i of rank r's input: 1..3, so that products over two ranks stay within int8.
double inputValue(int r, size_t i) { return static_cast<double>((i + r) % 3 + 1); }

std::vector<uint8_t> hostInput(DataType type, int rank, size_t count) {
  std::vector<uint8_t> v(count * hvd::dataTypeSize(type));
  for (size_t i = 0; i < count; ++i) hvd::storeElement(type, v.data(), i, inputValue(rank, i));
  return v;
}

double reduced(ReduceOp op, int size, size_t i) {
  double acc = inputValue(0, i);
  for (int r = 1; r < size; ++r) {
    const double v = inputValue(r, i);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        acc += v;
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, v);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, v);
        break;
      case ReduceOp::kProduct:
        acc *= v;
        break;
    }
  }
  return op == ReduceOp::kAverage ? acc / size : acc;
}

bool close(DataType type, double got, double want) {
  if (type == DataType::kFloat16) return std::fabs(got - want) <= std::fabs(want) * 1e-3;
  if (type == DataType::kBFloat16) return std::fabs(got - want) <= std::fabs(want) * 8e-3;
  return std::fabs(got - want) <= std::fabs(want) * 1e-6;
}

void checkAllreduce(Checker& c) {
  const DataType types[] = {DataType::kInt8,    DataType::kUInt8,   DataType::kInt32,
                            DataType::kInt64,   DataType::kFloat16, DataType::kBFloat16,
                            DataType::kFloat32, DataType::kFloat64};
  const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                          ReduceOp::kProduct};
  for (DataType type : types) {
    for (ReduceOp op : ops) {
      if (op == ReduceOp::kAverage && !isFloat(type)) continue;
      for (size_t count : {size_t{1}, size_t{1023}, size_t{(1 << 20) + 3}}) {
        for (bool inPlace : {false, true}) {
          const size_t bytes = count * hvd::dataTypeSize(type);
          void* in = c.device(bytes);
          void* out = inPlace ? in : c.device(bytes);
          c.upload(in, hostInput(type, c.rank, count));
          hvd::allreduce(in, out, count, type, {op});
          const auto got = c.download(out, bytes);
          size_t wrong = 0;
          for (size_t i = 0; i < count; ++i) {
            const double want = reduced(op, c.size, i);
            const double g = hvd::loadElement(type, got.data(), i);
            if (op == ReduceOp::kAverage ? !close(type, g, want) : g != want) ++wrong;
          }
          c.expect(wrong == 0, std::string("allreduce ") + hvd::dataTypeName(type) + " " +
                                   hvd::reduceOpName(op) + " count " + std::to_string(count) +
                                   (inPlace ? " in place" : "") + ": " + std::to_string(wrong) +
                                   " wrong");
          c.cuda.freeDevice(in);
          if (!inPlace) c.cuda.freeDevice(out);
        }
      }
    }
  }
}

void checkOthers(Checker& c) {
  const DataType type = DataType::kFloat32;
  const size_t elem = 4;
  // allgather, uneven: rank r contributes 1000 + r elements.
  {
    std::vector<size_t> counts;
    size_t total = 0;
    for (int r = 0; r < c.size; ++r) total += counts.emplace_back(1000 + r);
    void* in = c.device(counts[c.rank] * elem);
    void* out = c.device(total * elem);
    c.upload(in, hostInput(type, c.rank, counts[c.rank]));
    hvd::allgather(in, counts[c.rank], out, counts, type);
    const auto got = c.download(out, total * elem);
    size_t at = 0, wrong = 0;
    for (int r = 0; r < c.size; ++r) {
      for (size_t i = 0; i < counts[r]; ++i, ++at) {
        wrong += hvd::loadElement(type, got.data(), at) != inputValue(r, i);
      }
    }
    c.expect(wrong == 0, "allgather uneven: " + std::to_string(wrong) + " wrong");
    c.cuda.freeDevice(in);
    c.cuda.freeDevice(out);
  }
  // broadcast from every root.
  for (int root = 0; root < c.size; ++root) {
    const size_t count = 4099;
    void* buf = c.device(count * elem);
    c.upload(buf, hostInput(type, c.rank, count));
    hvd::broadcast(buf, count, type, {root});
    const auto got = c.download(buf, count * elem);
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i)
      wrong += hvd::loadElement(type, got.data(), i) != inputValue(root, i);
    c.expect(wrong == 0,
             "broadcast root " + std::to_string(root) + ": " + std::to_string(wrong) + " wrong");
    c.cuda.freeDevice(buf);
  }
  // reducescatter, even and uneven.
  for (size_t count : {size_t{4096}, size_t{4099}}) {
    const size_t mine = hvd::reducescatterCount(count, c.rank, c.size);
    size_t start = 0;
    for (int r = 0; r < c.rank; ++r) start += hvd::reducescatterCount(count, r, c.size);
    void* in = c.device(count * elem);
    void* out = c.device(mine * elem);
    c.upload(in, hostInput(type, c.rank, count));
    hvd::reducescatter(in, out, count, type, {ReduceOp::kSum});
    const auto got = c.download(out, mine * elem);
    size_t wrong = 0;
    for (size_t i = 0; i < mine; ++i) {
      wrong += hvd::loadElement(type, got.data(), i) != reduced(ReduceOp::kSum, c.size, start + i);
    }
    c.expect(wrong == 0, "reducescatter count " + std::to_string(count) + ": " +
                             std::to_string(wrong) + " wrong");
    c.cuda.freeDevice(in);
    c.cuda.freeDevice(out);
  }
  // alltoall: rank r sends p + 1 elements to each rank p, valued r * 100 + p.
  {
    std::vector<size_t> send, recv;
    size_t sendTotal = 0, recvTotal = 0;
    for (int p = 0; p < c.size; ++p) {
      sendTotal += send.emplace_back(p + 1);
      recvTotal += recv.emplace_back(c.rank + 1);
    }
    std::vector<uint8_t> host(sendTotal * elem);
    size_t at = 0;
    for (int p = 0; p < c.size; ++p) {
      for (size_t i = 0; i < send[p]; ++i)
        hvd::storeElement(type, host.data(), at++, c.rank * 100 + p);
    }
    void* in = c.device(sendTotal * elem);
    void* out = c.device(recvTotal * elem);
    c.upload(in, host);
    hvd::alltoall(in, send, out, recv, type);
    const auto got = c.download(out, recvTotal * elem);
    size_t wrong = 0;
    at = 0;
    for (int p = 0; p < c.size; ++p) {
      for (size_t i = 0; i < recv[p]; ++i)
        wrong += hvd::loadElement(type, got.data(), at++) != p * 100 + c.rank;
    }
    c.expect(wrong == 0, "alltoall: " + std::to_string(wrong) + " wrong");
    c.cuda.freeDevice(in);
    c.cuda.freeDevice(out);
  }
}

int runRank(hvd::gpu::CudaApi& cuda, const std::string& backend) {
  try {
    hvd::init();
    Checker c{cuda, hvd::rank(), hvd::size()};
    cuda.setDevice(0);
    checkAllreduce(c);
    const std::string used = hvd::deviceBackend();
    if (!backend.empty() && used.rfind(backend == "host" ? "host-staged" : backend, 0) != 0) {
      std::fprintf(stderr, "rank %d: device buffers ran on '%s', not on %s\n", c.rank, used.c_str(),
                   backend.c_str());
      return 1;
    }
    checkOthers(c);
    hvd::barrier();
    std::printf("rank %d/%d on %s: %ld cases, %ld wrong\n", c.rank, c.size, used.c_str(), c.cases,
                c.failures);
    hvd::shutdown();
    return c.failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", hvd::isInitialized() ? hvd::rank() : -1, e.what());
    return 1;
  }
}

// The launcher for --np N: a store server for the job, N forked ranks with the worker
// environment contract, and a deadline after which every rank is killed.
int launch(int np, const std::string& self, const std::vector<std::string>& args) {
  hvd::store::TcpStoreServer server;
  server.start();
  server.addJob("gpu-check", "gpu-check-token");
  std::vector<pid_t> pids;
  for (int r = 0; r < np; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("HVD_RANK", std::to_string(r).c_str(), 1);
      ::setenv("HVD_SIZE", std::to_string(np).c_str(), 1);
      ::setenv("HVD_LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("HVD_LOCAL_SIZE", std::to_string(np).c_str(), 1);
      ::setenv("HVD_CROSS_RANK", "0", 1);
      ::setenv("HVD_CROSS_SIZE", "1", 1);
      ::setenv("HVD_JOB_ID", "gpu-check", 1);
      ::setenv("HVD_STORE_ADDR", server.address().c_str(), 1);
      ::setenv("HVD_STORE_TOKEN", "gpu-check-token", 1);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(self.c_str()));
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(self.c_str(), argv.data());
      std::perror("execv");
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  int result = 0;
  size_t left = pids.size();
  while (left > 0) {
    int status = 0;
    const pid_t done = ::waitpid(-1, &status, WNOHANG);
    if (done > 0) {
      --left;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) result = 1;
      continue;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "hvd-gpu-check: ranks still running after 240 s; killing them\n");
      for (pid_t p : pids) ::kill(p, SIGKILL);
      while (::waitpid(-1, nullptr, 0) > 0) {
      }
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  int np = 1;
  std::string backend;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--np" && i + 1 < argc) {
      np = std::atoi(argv[++i]);
    } else if (a == "--backend" && i + 1 < argc) {
      backend = argv[++i];
    } else {
      std::fprintf(stderr, "usage: hvd-gpu-check [--np N] [--backend nccl|host]\n");
      return 2;
    }
  }
  if (np < 1 || (backend != "" && backend != "nccl" && backend != "host")) {
    std::fprintf(stderr, "hvd-gpu-check: --np must be >= 1 and --backend nccl or host\n");
    return 2;
  }
  std::string why;
  std::unique_ptr<hvd::gpu::CudaApi> cuda = hvd::gpu::loadCuda(hvd::gpu::kDefaultCudaLibrary, &why);
  if (cuda == nullptr || cuda->deviceCount() == 0) {
    std::printf("SKIP: no GPU visible (%s)\n", cuda == nullptr ? why.c_str() : "no CUDA device");
    return kSkip;
  }
  if (!backend.empty()) ::setenv("HVD_GPU_BACKEND", backend.c_str(), 1);
  if (std::getenv("HVD_RANK") == nullptr && np > 1) {
    std::vector<std::string> args;
    if (!backend.empty()) args = {"--backend", backend};
    return launch(np, "/proc/self/exe", args);
  }
  if (std::getenv("HVD_RANK") == nullptr) {
    for (const char* kv : {"HVD_RANK=0", "HVD_SIZE=1", "HVD_LOCAL_RANK=0", "HVD_LOCAL_SIZE=1",
                           "HVD_CROSS_RANK=0", "HVD_CROSS_SIZE=1", "HVD_JOB_ID=gpu-check"}) {
      ::putenv(const_cast<char*>(kv));
    }
  }
  return runRank(*cuda, backend);
}
