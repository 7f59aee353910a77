// hvd-bench: nccl-tests style benchmark of hvd's collectives.
//
//   hvd-local-run -np 4 -- hvd-bench --coll allreduce -b 8 -e 64M -f 2 -n 20 -w 5 -c 1 -d float
//
// For each size from -b to -e (multiplied by -f) it times the collective out-of-place and then
// in-place: a barrier, -w warm-up calls, a barrier, -n timed calls; the time is the average per
// call, max over ranks. algbw = size / time, busbw = algbw x the collective's bus factor
// (allreduce 2(n-1)/n; allgather, reducescatter, alltoall (n-1)/n; broadcast 1), as in
// nccl-tests. `size` is the total buffer size, as nccl-tests counts it:
//
//   allreduce      send = recv = size
//   allgather      send = size / n, recv = size          (in-place: send is the rank's slot)
//   reducescatter  send = size, recv = size / n          (in-place: recv is the rank's chunk)
//   broadcast      one buffer of size (out-of-place and in-place are the same call, run twice)
//   alltoall       send = recv = size, size / n to each peer (no in-place: N/A columns)
//
// Counts are rounded down so that every rank gets the same whole number of elements; sizes
// that round to zero elements are skipped. With -c 1 every mode is then checked outside the
// timed loop on one more call: inputs are exact by construction (element i of rank r is
// (i*7 + r*13 + salt) % 17, with a salt that changes on every check; 1 + that % 2 for prod), the
// output is poisoned beforehand, and every element is compared bit for bit with the result
// computed locally the way the runtime rounds it. #wrong is the number of wrong elements,
// summed over ranks.
//
// Every buffer is allocated and touched once, at the largest size, before the size loop.
// Only rank 0 prints. Exit status: 0 when every element was right, 1 when some were wrong,
// 2 for a usage error, 3 when hvd (or the process) failed.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_options.h"
#include "bench_patterns.h"
#include "engine_bench.h"
#include "hvd/error.hpp"
#include "hvd/hvd.hpp"
#include "hvd/process_sets.hpp"
#include "hvd/types.hpp"

namespace hvd::bench {
namespace {

// Only rank 0 prints. Before hvd::init() the rank comes from the environment the launcher set.
bool g_quiet = false;

// nccl-tests' short type names, for the table.
const char* typeColumn(hvd::DataType t) {
  switch (t) {
    case hvd::DataType::kFloat32:
      return "float";
    case hvd::DataType::kFloat64:
      return "double";
    case hvd::DataType::kFloat16:
      return "half";
    case hvd::DataType::kBFloat16:
      return "bfloat16";
    case hvd::DataType::kInt8:
      return "int8";
    case hvd::DataType::kUInt8:
      return "uint8";
    case hvd::DataType::kInt16:
      return "int16";
    case hvd::DataType::kInt32:
      return "int32";
    case hvd::DataType::kInt64:
      return "int64";
  }
  return "?";
}

const char* opColumn(hvd::ReduceOp op) {
  switch (op) {
    case hvd::ReduceOp::kSum:
      return "sum";
    case hvd::ReduceOp::kAverage:
      return "avg";
    case hvd::ReduceOp::kMin:
      return "min";
    case hvd::ReduceOp::kMax:
      return "max";
    case hvd::ReduceOp::kProduct:
      return "prod";
    case hvd::ReduceOp::kAdasum:
      return "adasum";
  }
  return "?";
}

// --- sizes ------------------------------------------------------------------------------------

// One row: the total size and the element counts of the collective's buffers.
struct Row {
  size_t bytes = 0;      // total buffer size (the size column)
  size_t count = 0;      // total elements (the count column)
  size_t perRank = 0;    // per-rank block (allgather send, reducescatter recv, alltoall per peer)
  size_t sendBytes = 0;  // buffer sizes this row needs
  size_t recvBytes = 0;
};

std::vector<Row> plan(const Options& o, int n) {
  std::vector<Row> rows;
  const size_t es = hvd::dataTypeSize(o.type);
  const size_t un = static_cast<size_t>(n);
  for (size_t bytes = o.minBytes;;) {
    Row row;
    switch (o.coll) {
      case Coll::kAllreduce:
      case Coll::kBroadcast:
        row.count = bytes / es;
        row.perRank = row.count;
        row.sendBytes = o.coll == Coll::kBroadcast ? 0 : row.count * es;
        row.recvBytes = row.count * es;
        break;
      case Coll::kAllgather:
        row.perRank = bytes / es / un;
        row.count = row.perRank * un;
        row.sendBytes = row.perRank * es;
        row.recvBytes = row.count * es;
        break;
      case Coll::kReducescatter:
        row.perRank = bytes / es / un;
        row.count = row.perRank * un;
        row.sendBytes = row.count * es;
        row.recvBytes = row.count * es;  // the in-place run reduces within the recv buffer
        break;
      case Coll::kAlltoall:
        row.perRank = bytes / es / un;
        row.count = row.perRank * un;
        row.sendBytes = row.count * es;
        row.recvBytes = row.count * es;
        break;
    }
    row.bytes = row.count * es;
    if (row.count > 0) rows.push_back(row);
    if (bytes > o.maxBytes / o.factor) break;  // the next size would pass -e (or overflow)
    bytes *= o.factor;
  }
  return rows;
}

uint8_t* allocTouched(size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, std::max<size_t>(bytes, 1)) != 0) return nullptr;
  std::memset(p, 0, std::max<size_t>(bytes, 1));  // fault in every page before timing
  return static_cast<uint8_t*>(p);
}

struct Buffer {
  uint8_t* data = nullptr;
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { std::free(data); }
};

// Average microseconds per call on this rank.
double timeCalls(const Options& o, const std::function<void()>& call) {
  hvd::barrier();
  for (int i = 0; i < o.warmup; ++i) call();
  hvd::barrier();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < o.iters; ++i) call();
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / o.iters;
}

double busFactor(Coll c, int n) {
  switch (c) {
    case Coll::kAllreduce:
      return 2.0 * (n - 1) / n;
    case Coll::kAllgather:
    case Coll::kReducescatter:
    case Coll::kAlltoall:
      return static_cast<double>(n - 1) / n;
    case Coll::kBroadcast:
      return 1.0;
  }
  return 1.0;
}

// Time with about 8 significant characters: 2 decimals below 10 ms, fewer above.
void printTime(double us) {
  if (us < 1e4) {
    std::printf(" %8.2f", us);
  } else if (us < 1e5) {
    std::printf(" %8.1f", us);
  } else {
    std::printf(" %8.0f", us);
  }
}

int runBenchmark(const Options& o) {
  const int n = hvd::size();
  const int rank = hvd::rank();
  if (o.coll == Coll::kBroadcast && o.root >= n) {
    throw UsageError{"-r " + std::to_string(o.root) + " is not a rank (np " + std::to_string(n) +
                     ")"};
  }
  const size_t es = hvd::dataTypeSize(o.type);
  const std::vector<Row> rows = plan(o, n);
  size_t sendBytes = 0, recvBytes = 0;
  for (const Row& row : rows) {
    sendBytes = std::max(sendBytes, row.sendBytes);
    recvBytes = std::max(recvBytes, row.recvBytes);
  }
  Buffer sendBuf, recvBuf;
  sendBuf.data = allocTouched(sendBytes);
  recvBuf.data = allocTouched(recvBytes);
  if (!sendBuf.data || !recvBuf.data) {
    throw std::runtime_error("rank " + std::to_string(rank) + ": cannot allocate " +
                             std::to_string(sendBytes) + " + " + std::to_string(recvBytes) +
                             " bytes");
  }
  uint8_t* const send = sendBuf.data;
  uint8_t* const recv = recvBuf.data;
  const bool reduction = reduces(o.coll);
  const bool hasInPlace = o.coll != Coll::kAlltoall;
  const int root = o.coll == Coll::kBroadcast ? o.root : -1;
  const char* opText = reduction ? opColumn(o.op) : "none";

  if (rank == 0) {
    std::printf("# hvd-bench %s: np %d, transport %s, dtype %s, op %s, iters %d, warmup %d\n",
                collName(o.coll), n, hvd::transportDescription().c_str(), hvd::dataTypeName(o.type),
                opText, o.iters, o.warmup);
    std::printf("#\n");
    std::printf(
        "#                                                       out-of-place"
        "                       in-place\n");
    std::printf(
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong\n");
    std::printf(
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
        "     (us)  (GB/s)  (GB/s)\n");
    std::fflush(stdout);
  }

  const double factor = busFactor(o.coll, n);
  int salt = 0;  // changes on every checked call, so a stale result cannot pass
  long long totalWrong = 0;
  double bwSum = 0;
  int bwCount = 0;
  const hvd::AllreduceOptions arOpts{o.op};
  hvd::ReducescatterOptions rsOpts;
  rsOpts.op = o.op;
  const hvd::BroadcastOptions bcOpts{o.root};

  // Warm the job up before the first row, as nccl-tests does: the first collectives after init
  // pay one-off costs (peers still finishing their own start-up, scheduler placement of the
  // ranks) that would otherwise land in the first row's time.
  for (int i = 0; i < 100; ++i) hvd::barrier();
  if (!rows.empty()) {
    const size_t warmCount = rows.back().count;
    for (int i = 0; i < 3 && o.coll == Coll::kAllreduce; ++i) {
      hvd::allreduce(send, recv, warmCount, o.type, arOpts);
    }
  }

  for (const Row& row : rows) {
    const size_t count = row.count;
    const size_t c = row.perRank;
    const std::vector<size_t> counts(n, c);
    double t[2] = {0, 0};
    long long wrong[2] = {0, 0};

    // Out-of-place (m = 0) and in-place (m = 1): the call, how to fill its inputs for a salt,
    // and how to count the wrong elements of its result.
    std::function<void()> call[2];
    std::function<void(int)> prepare[2];
    std::function<long long(int)> verify[2];
    switch (o.coll) {
      case Coll::kAllreduce:
        call[0] = [&] { hvd::allreduce(send, recv, count, o.type, arOpts); };
        call[1] = [&] { hvd::allreduce(recv, recv, count, o.type, arOpts); };
        prepare[0] = [&](int s) {
          fill(send, count, 0, inputPattern(o, rank, s), es);
          poison(recv, count, es);
        };
        prepare[1] = [&](int s) { fill(recv, count, 0, inputPattern(o, rank, s), es); };
        verify[0] = verify[1] = [&](int s) {
          return countWrong(recv, count, 0, reducedPattern(o, n, s), es);
        };
        break;
      case Coll::kReducescatter: {
        uint8_t* const chunk = recv + static_cast<size_t>(rank) * c * es;
        call[0] = [&] { hvd::reducescatter(send, recv, count, o.type, rsOpts); };
        call[1] = [&, chunk] { hvd::reducescatter(recv, chunk, count, o.type, rsOpts); };
        prepare[0] = [&](int s) {
          fill(send, count, 0, inputPattern(o, rank, s), es);
          poison(recv, c, es);
        };
        prepare[1] = [&](int s) { fill(recv, count, 0, inputPattern(o, rank, s), es); };
        verify[0] = [&](int s) {
          return countWrong(recv, c, static_cast<size_t>(rank) * c, reducedPattern(o, n, s), es);
        };
        verify[1] = [&, chunk](int s) {
          return countWrong(chunk, c, static_cast<size_t>(rank) * c, reducedPattern(o, n, s), es);
        };
        break;
      }
      case Coll::kAllgather: {
        uint8_t* const slot = recv + static_cast<size_t>(rank) * c * es;
        call[0] = [&] { hvd::allgather(send, c, recv, counts, o.type); };
        call[1] = [&, slot] { hvd::allgather(slot, c, recv, counts, o.type); };
        prepare[0] = [&](int s) {
          fill(send, c, 0, inputPattern(o, rank, s), es);
          poison(recv, count, es);
        };
        prepare[1] = [&, slot](int s) {
          poison(recv, count, es);
          fill(slot, c, 0, inputPattern(o, rank, s), es);
        };
        verify[0] = verify[1] = [&](int s) {
          long long w = 0;
          for (int p = 0; p < n; ++p) {
            w +=
                countWrong(recv + static_cast<size_t>(p) * c * es, c, 0, inputPattern(o, p, s), es);
          }
          return w;
        };
        break;
      }
      case Coll::kBroadcast:
        // One buffer: both columns run the same call.
        call[0] = call[1] = [&] { hvd::broadcast(recv, count, o.type, bcOpts); };
        prepare[0] = prepare[1] = [&](int s) {
          if (rank == o.root) {
            fill(recv, count, 0, inputPattern(o, o.root, s), es);
          } else {
            poison(recv, count, es);
          }
        };
        verify[0] = verify[1] = [&](int s) {
          return countWrong(recv, count, 0, inputPattern(o, o.root, s), es);
        };
        break;
      case Coll::kAlltoall:
        call[0] = [&] { hvd::alltoall(send, counts, recv, counts, o.type); };
        prepare[0] = [&](int s) {
          fill(send, count, 0, inputPattern(o, rank, s), es);
          poison(recv, count, es);
        };
        verify[0] = [&](int s) {
          long long w = 0;
          for (int p = 0; p < n; ++p) {
            // Rank p's block for this rank starts at index rank * c of p's input.
            w += countWrong(recv + static_cast<size_t>(p) * c * es, c,
                            static_cast<size_t>(rank) * c, inputPattern(o, p, s), es);
          }
          return w;
        };
        break;
    }

    for (int m = 0; m < (hasInPlace ? 2 : 1); ++m) {
      prepare[m](0);
      t[m] = timeCalls(o, call[m]);
      if (o.check) {
        ++salt;
        prepare[m](salt);
        call[m]();
        wrong[m] = verify[m](salt);
      }
    }

    hvd::allreduce(t, t, 2, hvd::DataType::kFloat64, hvd::AllreduceOptions{hvd::ReduceOp::kMax});
    int64_t w64[2] = {wrong[0], wrong[1]};
    hvd::allreduce(w64, w64, 2, hvd::DataType::kInt64, hvd::AllreduceOptions{hvd::ReduceOp::kSum});
    totalWrong += w64[0] + w64[1];

    if (rank == 0) {
      std::printf("%12zu %14zu %9s %7s %7d", row.bytes, count, typeColumn(o.type), opText, root);
      for (int m = 0; m < 2; ++m) {
        if (m == 1 && !hasInPlace) {
          std::printf(" %8s %7s %7s %6s", "N/A", "N/A", "N/A", "N/A");
          continue;
        }
        const double algbw = static_cast<double>(row.bytes) / t[m] / 1e3;  // bytes/us/1e3 = GB/s
        const double busbw = algbw * factor;
        bwSum += busbw;
        ++bwCount;
        printTime(t[m]);
        std::printf(" %7.2f %7.2f", algbw, busbw);
        if (o.check) {
          std::printf(" %6lld", static_cast<long long>(w64[m]));
        } else {
          std::printf(" %6s", "N/A");
        }
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }

  if (rank == 0) {
    std::printf("# Out of bounds values : %lld %s\n", totalWrong, totalWrong ? "FAILED" : "OK");
    std::printf("# Avg bus bandwidth    : %.3f\n", bwCount ? bwSum / bwCount : 0.0);
    std::printf("#\n");
    std::fflush(stdout);
  }
  return totalWrong ? 1 : 0;
}

void shutdownQuietly() {
  try {
    hvd::shutdown();
  } catch (...) {
  }
}

// main() of the tool; every error ends here as an exit status.
int benchMain(int argc, char** argv) {
  const char* envRank = std::getenv("HVD_RANK");
  g_quiet = envRank != nullptr && std::strcmp(envRank, "0") != 0;

  Options o;
  try {
    bool help = false;
    o = parseOptions(argc, argv, &help);
    if (help) {
      if (!g_quiet) printUsage(stdout);
      return 0;
    }
  } catch (const UsageError& e) {
    if (!g_quiet) {
      std::fprintf(stderr, "hvd-bench: %s\n(hvd-bench --help lists the options)\n",
                   e.message.c_str());
    }
    return 2;
  }

  int status = 0;
  try {
    if (o.processSets) {
      hvd::init({}, /*dynamic=*/true);  // the two halves are added once the size is known
    } else {
      hvd::init();
    }
    g_quiet = hvd::rank() != 0;
    status = o.engine ? runEngineBenchmark(o) : runBenchmark(o);
  } catch (const UsageError& e) {
    if (!g_quiet) {
      std::fprintf(stderr, "hvd-bench: %s\n(hvd-bench --help lists the options)\n",
                   e.message.c_str());
    }
    status = 2;
  } catch (const hvd::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "hvd-bench: %s\n", e.what());
    status = 3;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "hvd-bench: %s\n", e.what());
    status = 3;
  }
  shutdownQuietly();
  return status;
}

}  // namespace
}  // namespace hvd::bench

int main(int argc, char** argv) { return hvd::bench::benchMain(argc, argv); }
