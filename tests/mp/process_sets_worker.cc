// hvd-process-sets-worker: a real libhvd process using process sets through the public API
// (hvd/process_sets.hpp, hvd/engine.hpp), for the multi-process tests.
//   concurrent  np 4, HVD_PROCESS_SETS="0,1;2,3;1,3;0,1,2,3": one thread per set this rank is in
//               (the global set too) runs every op kind with exact values, all at once; then
//               the refusals of a set this rank is not in
//   mismatch    np 4, HVD_PROCESS_SETS="1,3": ranks 1 and 3 submit 'm' with different shapes
//   die         np 4, HVD_PROCESS_SETS="0,1;2,3": rank 3 exits after its first op in {2,3};
//               rank 2's next op in {2,3} fails, {0,1} goes on, then the job's op fails
//   dynamic     np 4, HVD_DYNAMIC_PROCESS_SETS=1: sets added and removed while others are busy,
//               and every refusal (duplicate, disagreement, removed set, static mode)
//   late        np 4, HVD_PROCESS_SETS="0,1;2,3", HVD_START_TIMEOUT=2: ranks 1 and 3 first use
//               their set 4 s after init, ranks 0 and 2 at once; every op completes exactly
//               (the sets connected inside init, not on their first op)
// Prints "process-sets <mode> ok=1 rank=R" when every check passed. Exit codes: 0 success,
// 1 wrong values or a missing refusal, 10 PeerError, 11 TimeoutError, 12 other hvd::Error.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "hvd/engine.hpp"
#include "hvd/hvd.hpp"
#include "hvd/process_sets.hpp"
#include "worker_exit.h"

namespace {

using hvd::test::exitCodeFor;

std::atomic<int> failures{0};

void fail(const std::string& what) {
  std::fprintf(stderr, "rank %d: %s\n", hvd::rank(), what.c_str());
  ++failures;
}

void expectEq(double got, double want, const std::string& what) {
  if (std::fabs(got - want) > 1e-5 * std::max(1.0, std::fabs(want))) {
    fail(what + ": got " + std::to_string(got) + ", want " + std::to_string(want));
  }
}

// Runs `submit` and expects InvalidArgumentError whose message contains `part`.
void expectRefused(const std::function<void()>& submit, const std::string& part,
                   const std::string& what) {
  try {
    submit();
  } catch (const hvd::InvalidArgumentError& e) {
    if (std::string(e.what()).find(part) == std::string::npos) {
      fail(what + ": refused with '" + e.what() + "', expected it to mention '" + part + "'");
    }
    return;
  }
  fail(what + ": not refused (expected an error mentioning '" + part + "')");
}

int indexIn(const std::vector<int>& members, int rank) {
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] == rank) return static_cast<int>(i);
  }
  return -1;
}

// One iteration of every op kind on set `id`, checked against values computed from the
// members' job ranks.
void exerciseSet(int id, int iteration) {
  const std::vector<int> members = hvd::processSetRanks(id);
  const int k = static_cast<int>(members.size());
  const int me = hvd::rank();
  const int index = indexIn(members, me);
  const std::string tag = "s" + std::to_string(id) + "." + std::to_string(iteration) + ".";
  const std::string where = "set " + std::to_string(id) + " iteration " + std::to_string(iteration);
  if (hvd::processSetRank(id) != index || hvd::processSetSize(id) != k) {
    fail(where + ": processSetRank/Size disagree with its ranks");
  }

  hvd::OpOptions sum;
  sum.op = hvd::ReduceOp::kSum;
  sum.processSet = id;
  hvd::OpOptions average;
  average.processSet = id;  // average is the default op

  const int n = 1000 + 17 * id;
  std::vector<float> in(n), out(n), avg(n);
  for (int i = 0; i < n; ++i) in[i] = static_cast<float>((me * 3 + i + iteration) % 5);
  auto hSum =
      hvd::allreduceAsync(tag + "sum", in.data(), out.data(), {n}, hvd::DataType::kFloat32, sum);
  auto hAvg = hvd::allreduceAsync(tag + "avg", in.data(), avg.data(), {n}, hvd::DataType::kFloat32,
                                  average);

  // allgather: member j contributes j + 1 rows of 2 values job-rank * 100 + row.
  std::vector<int32_t> mine(2 * (index + 1));
  for (int row = 0; row <= index; ++row) mine[2 * row] = mine[2 * row + 1] = me * 100 + row;
  auto hGather =
      hvd::allgatherAsync(tag + "gather", mine.data(), {index + 1, 2}, hvd::DataType::kInt32, id);

  // broadcast from a member named by job rank.
  const int root = members[iteration % k];
  std::vector<int64_t> bcast(33, me + 1000 * iteration);
  auto hBcast =
      hvd::broadcastAsync(tag + "bcast", bcast.data(), {33}, hvd::DataType::kInt64, root, id);

  // reducescatter over 2k + 1 rows: member 0 gets 3 rows, the others 2.
  const int rows = 2 * k + 1;
  std::vector<int32_t> rsIn(rows);
  for (int row = 0; row < rows; ++row) rsIn[row] = me + row;
  auto hScatter =
      hvd::reducescatterAsync(tag + "scatter", rsIn.data(), {rows}, hvd::DataType::kInt32, sum);

  // alltoall: j + 1 rows to member j, valued job-rank * 1000 + j * 10 + row.
  std::vector<int32_t> a2a;
  std::vector<int64_t> splits;
  for (int j = 0; j < k; ++j) {
    splits.push_back(j + 1);
    for (int row = 0; row <= j; ++row) a2a.push_back(me * 1000 + j * 10 + row);
  }
  auto hA2a = hvd::alltoallAsync(tag + "a2a", a2a.data(), {static_cast<int64_t>(a2a.size())},
                                 splits, hvd::DataType::kInt32, id);
  auto hBarrier = hvd::barrierAsync(id);

  hSum.wait();
  hAvg.wait();
  for (int i = 0; i < n; i += 97) {
    double want = 0;
    for (int m : members) want += (m * 3 + i + iteration) % 5;
    expectEq(out[i], want, where + " allreduce sum [" + std::to_string(i) + "]");
    expectEq(avg[i], want / k, where + " allreduce average [" + std::to_string(i) + "]");
  }
  hGather.wait();
  {
    const auto& bytes = hGather.output();
    const auto* got = reinterpret_cast<const int32_t*>(bytes.data());
    size_t at = 0;
    for (int j = 0; j < k; ++j) {
      for (int row = 0; row <= j; ++row, at += 2) {
        if (at + 1 >= bytes.size() / 4 || got[at] != members[j] * 100 + row) {
          fail(where + " allgather: member " + std::to_string(j) + " row " + std::to_string(row));
          j = k;
          break;
        }
      }
    }
    if (hGather.outputShape() != hvd::Shape{k * (k + 1) / 2, 2}) fail(where + " allgather shape");
  }
  hBcast.wait();
  for (int64_t v : bcast) {
    if (v != root + 1000 * iteration) {
      fail(where + " broadcast from " + std::to_string(root) + ": got " + std::to_string(v));
      break;
    }
  }
  hScatter.wait();
  {
    const int first = index == 0 ? 0 : 3 + 2 * (index - 1);
    const int count = index == 0 ? 3 : 2;
    const auto* got = reinterpret_cast<const int32_t*>(hScatter.output().data());
    if (hScatter.outputShape() != hvd::Shape{count}) fail(where + " reducescatter shape");
    for (int row = 0; row < count && row < static_cast<int>(hScatter.output().size() / 4); ++row) {
      int want = 0;
      for (int m : members) want += m + first + row;
      if (got[row] != want) fail(where + " reducescatter row " + std::to_string(row));
    }
  }
  hA2a.wait();
  {
    const auto* got = reinterpret_cast<const int32_t*>(hA2a.output().data());
    const size_t total = hA2a.output().size() / 4;
    size_t at = 0;
    for (int j = 0; j < k; ++j) {
      for (int row = 0; row <= index; ++row, ++at) {
        if (at >= total || got[at] != members[j] * 1000 + index * 10 + row) {
          fail(where + " alltoall from member " + std::to_string(j));
          j = k;
          break;
        }
      }
    }
    if (hA2a.receivedSplits() != std::vector<int64_t>(k, index + 1)) {
      fail(where + " alltoall received splits");
    }
  }
  hBarrier.wait();
}

// The refusals of an op on a set this rank is not in, and of a set that does not exist.
void checkRefusals() {
  const int me = hvd::rank();
  float x = 1;
  for (int id : hvd::processSetIds()) {
    if (hvd::processSetIncluded(id)) continue;
    hvd::OpOptions o;
    o.processSet = id;
    const std::string part =
        "rank " + std::to_string(me) + " is not in process set " + std::to_string(id);
    expectRefused([&] { hvd::allreduceAsync("no", &x, &x, {1}, hvd::DataType::kFloat32, o); }, part,
                  "allreduce on a foreign set");
    expectRefused([&] { hvd::barrierAsync(id); }, part, "barrier on a foreign set");
    expectRefused([&] { hvd::processSetRank(id); }, "is not part of it", "processSetRank");
  }
  hvd::OpOptions missing;
  missing.processSet = 99;
  expectRefused([&] { hvd::allreduceAsync("none", &x, &x, {1}, hvd::DataType::kFloat32, missing); },
                "there is no process set 99", "allreduce on a set that does not exist");
  // A root outside the set.
  const auto ids = hvd::processSetIds();
  for (int id : ids) {
    if (!hvd::processSetIncluded(id) || hvd::processSetSize(id) == hvd::size()) continue;
    int outsider = 0;
    while (hvd::processSetIncluded(id) && indexIn(hvd::processSetRanks(id), outsider) >= 0) {
      ++outsider;
    }
    expectRefused(
        [&] { hvd::broadcastAsync("root", &x, {1}, hvd::DataType::kFloat32, outsider, id); },
        "root rank " + std::to_string(outsider) + " is not in process set", "foreign root");
    break;
  }
}

int concurrent() {
  const std::vector<int> ids = hvd::processSetIds();
  // 0,1;2,3;1,3 get 1,2,3; 0,1,2,3 is the global set.
  if (ids != std::vector<int>{0, 1, 2, 3}) fail("process set ids");
  if (hvd::processSetRanks(3) != std::vector<int>{1, 3}) fail("process set 3's ranks");
  std::vector<std::thread> threads;
  for (int id : ids) {
    if (!hvd::processSetIncluded(id)) continue;
    threads.emplace_back([id] {
      try {
        for (int it = 0; it < 6; ++it) exerciseSet(id, it);
      } catch (const hvd::Error& e) {
        fail("set " + std::to_string(id) + ": " + e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  checkRefusals();
  return 0;
}

int mismatch() {
  const int me = hvd::rank();
  if (me == 1 || me == 3) {
    std::vector<float> x(me == 1 ? 3 : 4, 1.0f);
    hvd::OpOptions o;
    o.processSet = 1;
    auto h = hvd::allreduceAsync("m", x.data(), x.data(), {static_cast<int64_t>(x.size())},
                                 hvd::DataType::kFloat32, o);
    expectRefused([&] { h.wait(); }, "shape [3] on rank 1, [4] on rank 3", "shape mismatch");
    expectRefused([&] { h.wait(); }, "process set 1 (ranks 1,3)", "mismatch names the set");
    // The set stays usable.
    std::vector<float> y(5, static_cast<float>(me));
    o.op = hvd::ReduceOp::kSum;
    hvd::allreduceAsync("after", y.data(), y.data(), {5}, hvd::DataType::kFloat32, o).wait();
    expectEq(y[0], 4, "the set after a mismatch");
  }
  hvd::barrierAsync().wait();
  return 0;
}

int die() {
  const int me = hvd::rank();
  const int id = me < 2 ? 1 : 2;
  hvd::OpOptions sum;
  sum.op = hvd::ReduceOp::kSum;
  sum.processSet = id;
  // The job's engine runs before anyone dies (it starts on first use, with every rank).
  hvd::barrierAsync().wait();
  float x = 1;
  hvd::allreduceAsync("first", &x, &x, {1}, hvd::DataType::kFloat32, sum).wait();
  expectEq(x, 2, "the first op of the set");
  if (me == 3) _exit(3);
  if (me == 2) {
    // Its peer in {2,3} is gone: this op fails (peer or timeout), never hangs.
    hvd::allreduceAsync("second", &x, &x, {1}, hvd::DataType::kFloat32, sum).wait();
    fail("the op of a set whose member died completed");
    return 1;
  }
  // {0,1} does not include rank 3: it goes on working.
  for (int it = 0; it < 20; ++it) {
    float y = static_cast<float>(it);
    hvd::allreduceAsync("ok." + std::to_string(it), &y, &y, {1}, hvd::DataType::kFloat32, sum)
        .wait();
    expectEq(y, 2 * it, "set {0,1} after rank 3 died");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::printf("process-sets die set-ok=1 rank=%d\n", me);
  std::fflush(stdout);
  // The job's set includes rank 3: its op fails.
  float z = 1;
  hvd::allreduceAsync("job", &z, &z, {1}, hvd::DataType::kFloat32, {hvd::ReduceOp::kSum}).wait();
  fail("the job's op completed without rank 3");
  return 1;
}

int late() {
  const int me = hvd::rank();
  if (me % 2 == 1) std::this_thread::sleep_for(std::chrono::seconds(4));
  hvd::OpOptions sum;
  sum.op = hvd::ReduceOp::kSum;
  sum.processSet = me < 2 ? 1 : 2;
  float x = static_cast<float>(me + 1);
  hvd::allreduceAsync("late", &x, &x, {1}, hvd::DataType::kFloat32, sum).wait();
  expectEq(x, me < 2 ? 3 : 7, "the op a member submitted late");
  return 0;
}

int dynamic() {
  const int me = hvd::rank();
  if (hvd::processSetIds() != std::vector<int>{0}) fail("a dynamic job starts with the global set");
  const int low = hvd::addProcessSet({1, 0});  // sorted, as Horovod does
  const int high = hvd::addProcessSet({2, 3});
  if (low != 1 || high != 2 || hvd::processSetRanks(low) != std::vector<int>{0, 1}) {
    fail("ids or ranks of the added sets");
  }
  // Busy sets while the job adds and removes others.
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    try {
      // Until every member of the set is done adding and removing: the members agree on when
      // to stop (a MAX of their flags), so each runs the same iterations.
      const int id = me < 2 ? low : high;
      hvd::OpOptions any;
      any.op = hvd::ReduceOp::kMax;
      any.processSet = id;
      for (int it = 0;; ++it) {
        exerciseSet(id, it);
        int32_t done = stop ? 1 : 0;
        hvd::allreduceAsync("stop." + std::to_string(it), &done, &done, {1}, hvd::DataType::kInt32,
                            any)
            .wait();
        if (done == 1) break;
      }
    } catch (const hvd::Error& e) {
      fail(std::string("busy set: ") + e.what());
    }
  });
  for (int round = 0; round < 3; ++round) {
    const int odd = hvd::addProcessSet({1, 3});
    if (hvd::processSetIncluded(odd) != (me == 1 || me == 3)) fail("included()");
    if (hvd::processSetIncluded(odd)) {
      for (int it = 0; it < 3; ++it) exerciseSet(odd, it);
    }
    if (!hvd::removeProcessSet(odd)) fail("remove_process_set returned false");
    float x = 1;
    hvd::OpOptions o;
    o.processSet = odd;
    expectRefused([&] { hvd::allreduceAsync("gone", &x, &x, {1}, hvd::DataType::kFloat32, o); },
                  "there is no process set " + std::to_string(odd), "an op on a removed set");
  }
  stop = true;
  busy.join();
  expectRefused(
      [&] {
        hvd::addProcessSet({0, 1});
      },
      "exists already: process set 1 (ranks 0,1)", "a duplicate set");
  expectRefused(
      [&] {
        hvd::addProcessSet({3, 2, 1, 0});
      },
      "exists already: the global process set", "the global set again");
  expectRefused(
      [&] {
        hvd::addProcessSet(me == 2 ? std::vector<int>{0, 2} : std::vector<int>{0, 3});
      },
      "[0,2] on rank 2", "ranks disagreeing");
  expectRefused(
      [&] {
        hvd::addProcessSet({0, 4});
      },
      "rank 4 is not a rank of this job", "a rank outside the job");
  if (hvd::removeProcessSet(0)) fail("the global set was removed");
  if (hvd::removeProcessSet(77)) fail("a set that does not exist was removed");
  // Ids are not reused: the next set gets a fresh one.
  const int again = hvd::addProcessSet({0, 2});
  if (again != 6) fail("id " + std::to_string(again) + " reused");
  if (hvd::processSetIncluded(again)) exerciseSet(again, 0);
  hvd::barrierAsync().wait();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    hvd::init();
    int status = 1;
    if (mode == "concurrent") {
      status = concurrent();
    } else if (mode == "mismatch") {
      status = mismatch();
    } else if (mode == "die") {
      status = die();
    } else if (mode == "late") {
      status = late();
    } else if (mode == "dynamic") {
      status = dynamic();
    } else if (mode == "static-add") {
      expectRefused([] { hvd::addProcessSet({0}); }, "HVD_DYNAMIC_PROCESS_SETS=1",
                    "adding without dynamic mode");
      status = 0;
    } else {
      std::fprintf(stderr, "unknown mode '%s'\n", mode.c_str());
      return 2;
    }
    if (status == 0 && failures == 0) {
      std::printf("process-sets %s ok=1 rank=%d\n", mode.c_str(), hvd::rank());
    }
    std::fflush(stdout);
    hvd::shutdown();
    return failures > 0 ? 1 : status;
  } catch (const hvd::Error& e) {
    std::fprintf(stderr, "rank error (%s): %s\n",
                 e.kind() == hvd::ErrorKind::kPeer      ? "peer"
                 : e.kind() == hvd::ErrorKind::kTimeout ? "timeout"
                                                        : "other",
                 e.what());
    std::fflush(stderr);
    std::fflush(stdout);
    _exit(failures > 0 ? 1 : exitCodeFor(e));
  }
}
