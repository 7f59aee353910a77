#include "engine_bench.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_patterns.h"
#include "hvd/engine.hpp"
#include "hvd/hvd.hpp"
#include "hvd/process_sets.hpp"

namespace hvd::bench {
namespace {

struct Group {
  int id = 0;  // process set (0: every rank)
  std::vector<int> ranks;
};

std::string rankRange(const std::vector<int>& ranks) {
  return std::to_string(ranks.front()) + ".." + std::to_string(ranks.back());
}

}  // namespace

int runEngineBenchmark(const Options& o) {
  const int n = hvd::size();
  const int rank = hvd::rank();
  std::vector<Group> groups;
  if (o.processSets) {
    if (n < 2 || n % 2 != 0) {
      throw UsageError{"--process-sets needs an even number of ranks (np " + std::to_string(n) +
                       ")"};
    }
    std::vector<int> lower, upper;
    for (int r = 0; r < n; ++r) (r < n / 2 ? lower : upper).push_back(r);
    groups.push_back({hvd::addProcessSet(lower), lower});
    groups.push_back({hvd::addProcessSet(upper), upper});
  } else {
    std::vector<int> all;
    for (int r = 0; r < n; ++r) all.push_back(r);
    groups.push_back({0, all});
  }
  const size_t mine = o.processSets && rank >= n / 2 ? 1 : 0;
  const Group& group = groups[mine];
  const int k = static_cast<int>(group.ranks.size());
  const int index = rank - group.ranks.front();
  const size_t es = hvd::dataTypeSize(o.type);
  const double factor = 2.0 * (k - 1) / k;

  size_t largest = 0;
  for (size_t bytes = o.minBytes;; bytes *= o.factor) {
    largest = bytes;
    if (bytes > o.maxBytes / o.factor) break;
  }
  std::vector<uint8_t> send(std::max<size_t>(largest, es)), recv(std::max<size_t>(largest, es));

  if (rank == 0) {
    std::printf("# hvd-bench allreduce through the engine: %d ranks", n);
    if (o.processSets) {
      std::printf(", two process sets at once: ranks %s and %s", rankRange(groups[0].ranks).c_str(),
                  rankRange(groups[1].ranks).c_str());
    }
    std::printf("\n#\n# %10s %14s %9s %7s", "size", "count", "type", "redop");
    for (const Group& g : groups) {
      std::printf("  %8s %7s %7s %6s",
                  ("time" + std::string(o.processSets ? "@" : "") +
                   (o.processSets ? rankRange(g.ranks) : ""))
                      .c_str(),
                  "algbw", "busbw", "#wrong");
    }
    std::printf("\n# %10s %14s %9s %7s", "(B)", "(elements)", "", "");
    for (size_t g = 0; g < groups.size(); ++g)
      std::printf("  %8s %7s %7s %6s", "(us)", "(GB/s)", "(GB/s)", "");
    std::printf("\n");
    std::fflush(stdout);
  }

  OpOptions options;
  options.op = o.op;
  options.processSet = group.id;
  long long totalWrong = 0;
  int salt = 0;
  for (size_t bytes = o.minBytes;; bytes *= o.factor) {
    const size_t count = bytes / es;
    if (count > 0) {
      const std::string name = "bench." + std::to_string(count);
      auto call = [&] {
        hvd::allreduceAsync(name, send.data(), recv.data(), {static_cast<int64_t>(count)}, o.type,
                            options)
            .wait();
      };
      fill(send.data(), count, 0, inputPattern(o, index, 0), es);
      hvd::barrierAsync().wait();  // both sets start each size together
      for (int i = 0; i < o.warmup; ++i) call();
      hvd::barrierAsync(group.id).wait();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < o.iters; ++i) call();
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
          o.iters;
      long long wrong = 0;
      if (o.check) {
        ++salt;
        fill(send.data(), count, 0, inputPattern(o, index, salt), es);
        poison(recv.data(), count, es);
        call();
        wrong = countWrong(recv.data(), count, 0, reducedPattern(o, k, salt), es);
      }
      // Every group's slowest rank and wrong elements, to rank 0, over the whole job.
      std::vector<double> times(groups.size(), 0.0);
      std::vector<int64_t> wrongs(groups.size(), 0);
      times[mine] = us;
      wrongs[mine] = wrong;
      OpOptions max;
      max.op = ReduceOp::kMax;
      OpOptions sum;
      sum.op = ReduceOp::kSum;
      auto ht = hvd::allreduceAsync("bench.times", times.data(), times.data(),
                                    {static_cast<int64_t>(times.size())}, DataType::kFloat64, max);
      auto hw = hvd::allreduceAsync("bench.wrong", wrongs.data(), wrongs.data(),
                                    {static_cast<int64_t>(wrongs.size())}, DataType::kInt64, sum);
      ht.wait();
      hw.wait();
      if (rank == 0) {
        std::printf("  %10zu %14zu %9s %7s", count * es, count, dataTypeName(o.type),
                    reduceOpName(o.op));
        for (size_t g = 0; g < groups.size(); ++g) {
          const double algbw = static_cast<double>(count * es) / times[g] / 1e3;
          std::printf("  %8.2f %7.2f %7.2f %6lld", times[g], algbw, algbw * factor,
                      static_cast<long long>(wrongs[g]));
          totalWrong += wrongs[g];
        }
        std::printf("\n");
        std::fflush(stdout);
      }
    }
    if (bytes > o.maxBytes / o.factor) break;
  }
  if (rank == 0) {
    std::printf("# Out of bounds values : %lld %s\n#\n", totalWrong, totalWrong ? "FAILED" : "OK");
    std::fflush(stdout);
  }
  int64_t anyWrong = totalWrong;
  OpOptions sum;
  sum.op = ReduceOp::kSum;
  hvd::allreduceAsync("bench.total", &anyWrong, &anyWrong, {1}, DataType::kInt64, sum).wait();
  return anyWrong ? 1 : 0;
}

}  // namespace hvd::bench
