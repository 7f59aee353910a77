// hvd-gpu-check: libhvd's collectives on CUDA device buffers, checked value by value.
//
//   hvd-gpu-check                    one rank: every collective, dtype and op over NCCL
//   hvd-gpu-check --np 2 --backend host
//                                    two ranks sharing the one GPU, staged through host memory
//                                    (NCCL refuses two ranks on one GPU); this process is their
//                                    launcher: a store server, N forked ranks, a deadline
//
// Inputs and expected allreduce results are the CPU correctness matrix's (small integers, exact
// in every dtype; averages divided as the runtime divides), compared bit for bit. Device memory
// comes from hvd's own CUDA driver loader (no CUDA link at all, like libhvd). Prints one line per
// collective and exits 0 when every value is right, 1 on a wrong value or an error, and 77 (a
// skip, for ctest) when no GPU is visible, saying why. --host-memory runs the same checks on
// host buffers (no CUDA at all): the checker's own test, which CPU machines run.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "agent/node/worker_env.h"
#include "common/collective_checks.h"
#include "common/element.h"
#include "contract/placement.h"
#include "gpu/cuda_api.h"
#include "hvd/hvd.hpp"
#include "hvd_support/tcp_store_server.h"

extern char** environ;

namespace {

using hvd::DataType;
using hvd::ReduceOp;

constexpr int kSkip = 77;

struct Checker {
  hvd::gpu::CudaApi* cuda;  // null: --host-memory, the checker's own test on CPU machines
  int rank = 0;
  int size = 1;
  long cases = 0;
  long failures = 0;

  void* device(size_t bytes) {
    return cuda != nullptr ? cuda->allocDevice(bytes > 0 ? bytes : 1) : std::malloc(bytes + 1);
  }
  void release(void* p) {
    if (cuda != nullptr) {
      cuda->freeDevice(p);
    } else {
      std::free(p);
    }
  }
  void upload(void* dst, const std::vector<uint8_t>& src) {
    if (cuda == nullptr) {
      std::memcpy(dst, src.data(), src.size());
      return;
    }
    cuda->copyAsync(dst, src.data(), src.size(), nullptr);
    cuda->synchronizeStream(nullptr);
  }
  std::vector<uint8_t> download(const void* src, size_t bytes) {
    std::vector<uint8_t> out(bytes);
    if (cuda == nullptr) {
      std::memcpy(out.data(), src, bytes);
      return out;
    }
    cuda->copyAsync(out.data(), src, bytes, nullptr);
    cuda->synchronizeStream(nullptr);
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

// The inputs and expected results of the CPU correctness matrix (tests/common/
// collective_checks.h), so the device paths are held to the same bits as the CPU ones.
std::vector<uint8_t> allreduceInput(DataType type, ReduceOp op, int rank, size_t count) {
  std::vector<uint8_t> v(count * hvd::dataTypeSize(type));
  for (size_t i = 0; i < count; ++i) {
    hvd::test::storeValue(type, v.data(), i,
                          static_cast<double>(hvd::test::inputValue(type, op, rank, i, 0)));
  }
  return v;
}

void checkAllreduce(Checker& c) {
  // int16 has no NCCL type: under NCCL it takes the host-staged path, held to the same bits.
  const DataType types[] = {DataType::kInt8,     DataType::kUInt8,   DataType::kInt16,
                            DataType::kInt32,    DataType::kInt64,   DataType::kFloat16,
                            DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64};
  const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                          ReduceOp::kProduct};
  for (DataType type : types) {
    for (ReduceOp op : ops) {
      for (size_t count : {size_t{1}, size_t{1023}, size_t{(1 << 20) + 3}}) {
        const size_t elem = hvd::dataTypeSize(type);
        std::vector<uint8_t> want(count * elem);
        for (size_t i = 0; i < count; ++i) {
          hvd::test::storeExpected(type, op, want.data(), i, c.size, 0);
        }
        for (bool inPlace : {false, true}) {
          void* in = c.device(want.size());
          void* out = inPlace ? in : c.device(want.size());
          c.upload(in, allreduceInput(type, op, c.rank, count));
          hvd::allreduce(in, out, count, type, {op});
          const auto got = c.download(out, want.size());
          size_t wrong = 0;
          for (size_t i = 0; i < count; ++i) {
            wrong += std::memcmp(got.data() + i * elem, want.data() + i * elem, elem) != 0;
          }
          c.expect(wrong == 0, std::string("allreduce ") + hvd::dataTypeName(type) + " " +
                                   hvd::reduceOpName(op) + " count " + std::to_string(count) +
                                   (inPlace ? " in place" : "") + ": " + std::to_string(wrong) +
                                   " wrong");
          c.release(in);
          if (!inPlace) c.release(out);
        }
      }
    }
  }
}

// Element i of rank r's input to the other collectives (float32, exact).
double inputValue(int r, size_t i) { return static_cast<double>((i + r) % 3 + 1); }

std::vector<uint8_t> hostInput(DataType type, int rank, size_t count) {
  std::vector<uint8_t> v(count * hvd::dataTypeSize(type));
  for (size_t i = 0; i < count; ++i) hvd::storeElement(type, v.data(), i, inputValue(rank, i));
  return v;
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
    c.release(in);
    c.release(out);
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
    c.release(buf);
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
      double sum = 0;
      for (int r = 0; r < c.size; ++r) sum += inputValue(r, start + i);
      wrong += hvd::loadElement(type, got.data(), i) != sum;
    }
    c.expect(wrong == 0, "reducescatter count " + std::to_string(count) + ": " +
                             std::to_string(wrong) + " wrong");
    c.release(in);
    c.release(out);
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
    c.release(in);
    c.release(out);
  }
}

int runRank(hvd::gpu::CudaApi* cuda, const std::string& backend) {
  try {
    hvd::init();
    Checker c{cuda, hvd::rank(), hvd::size()};
    if (cuda != nullptr) cuda->setDevice(0);
    checkAllreduce(c);
    const std::string used = hvd::deviceBackend();
    if (cuda == nullptr && used != "none") {
      std::fprintf(stderr, "rank %d: host memory took a device path ('%s')\n", c.rank,
                   used.c_str());
      return 1;
    }
    if (cuda != nullptr && !backend.empty() &&
        used.rfind(backend == "host" ? "host-staged" : backend, 0) != 0) {
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

// The launcher for --np N: a store server for the job, N ranks with the worker environment
// hvdrun gives (agent/node/worker_env.h, over one host's placement), and a deadline after which
// every rank is killed; ranks also die with this process (a timeout that kills it leaves none).
// Everything is built before fork(): the store server's thread makes allocation after it
// unsafe.
int launch(int np, const std::string& self, const std::vector<std::string>& args) {
  hvd::store::TcpStoreServer server;
  server.start();
  std::random_device random;
  char token[33];
  std::snprintf(token, sizeof(token), "%08x%08x%08x%08x", random(), random(), random(), random());
  server.addJob("gpu-check", token);

  std::vector<std::string> callerEnv;
  for (char** e = environ; *e != nullptr; ++e) callerEnv.emplace_back(*e);
  const hvd::contract::Placement placement =
      hvd::contract::placeRanks({{"localhost", np}}, np, false);
  std::vector<std::vector<std::string>> envs;
  for (int r = 0; r < np; ++r) {
    hvd::agent::node::WorkerEnvInput input;
    input.forwarded = callerEnv;
    input.placement = placement.ranks[r];
    input.size = np;
    input.groupRank = 0;
    input.hostName = "localhost";
    input.jobId = "gpu-check";
    input.storeAddr = server.address();
    input.storeToken = token;
    input.masterAddr = "127.0.0.1";
    input.masterPort = 29500;
    envs.push_back(hvd::agent::node::buildWorkerEnvironment(input));
  }
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(self.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  std::vector<pid_t> pids;
  for (int r = 0; r < np; ++r) {
    std::vector<char*> envp;
    for (std::string& e : envs[r]) envp.push_back(e.data());
    envp.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::execve(self.c_str(), argv.data(), envp.data());
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  // Under scripts/gpu-check.sh's 240 s for the step, so the ranks are killed here first.
  constexpr int kDeadlineSeconds = 200;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kDeadlineSeconds);
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
      std::fprintf(stderr, "hvd-gpu-check: ranks still running after %d s; killing them\n",
                   kDeadlineSeconds);
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
  bool hostMemory = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--np" && i + 1 < argc) {
      np = std::atoi(argv[++i]);
    } else if (a == "--host-memory") {
      hostMemory = true;
    } else if (a == "--backend" && i + 1 < argc) {
      backend = argv[++i];
    } else {
      std::fprintf(stderr, "usage: hvd-gpu-check [--np N] [--backend nccl|host] [--host-memory]\n");
      return 2;
    }
  }
  if (np < 1 || (backend != "" && backend != "nccl" && backend != "host")) {
    std::fprintf(stderr, "hvd-gpu-check: --np must be >= 1 and --backend nccl or host\n");
    return 2;
  }
  std::string why;
  std::unique_ptr<hvd::gpu::CudaApi> cuda;
  if (!hostMemory) cuda = hvd::gpu::loadCuda(hvd::gpu::kDefaultCudaLibrary, &why);
  if (!hostMemory && (cuda == nullptr || cuda->deviceCount() == 0)) {
    std::printf("SKIP: no GPU visible (%s)\n", cuda == nullptr ? why.c_str() : "no CUDA device");
    return kSkip;
  }
  if (!backend.empty()) ::setenv("HVD_GPU_BACKEND", backend.c_str(), 1);
  if (std::getenv("HVD_RANK") == nullptr && np > 1) {
    std::vector<std::string> args;
    if (!backend.empty()) args = {"--backend", backend};
    if (hostMemory) args.push_back("--host-memory");
    return launch(np, "/proc/self/exe", args);
  }
  if (std::getenv("HVD_RANK") == nullptr) {
    for (const char* kv : {"HVD_RANK=0", "HVD_SIZE=1", "HVD_LOCAL_RANK=0", "HVD_LOCAL_SIZE=1",
                           "HVD_CROSS_RANK=0", "HVD_CROSS_SIZE=1", "HVD_JOB_ID=gpu-check"}) {
      ::putenv(const_cast<char*>(kv));
    }
  }
  return runRank(cuda.get(), backend);
}
