// hvd-adasum-worker: a real libhvd process running Adasum allreduces through the engine
// (hvd/engine.hpp), checked against the reference tree of tests/common/adasum_reference.h.
// Every rank computes every rank's inputs (they are a function of rank, tensor and index), so
// each checks the result on its own. For float16, bfloat16, float32 and float64:
//   orthogonal inputs (their sum, exactly), equal inputs (the vector itself, exactly), norms far
//   apart from rank to rank, all-zero and partly zero tensors, three tensors of a grouped
//   allreduce and three separate allreduces submitted together (each its own vector inside the
//   fused buffer), scale factors, fp16 compression; then the same on process set 1 (from
//   HVD_PROCESS_SETS) when this rank is in it; then the refusals (an integer type, a
//   reducescatter) and an op mismatch, which must fail on every rank naming both ops.
// Prints "adasum ok=1 rank=R" when every check passed. Exit codes: 0 success, 1 a wrong value or
// a missing error, 10 PeerError, 11 TimeoutError, 12 other hvd::Error.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/adasum_reference.h"
#include "hvd/engine.hpp"
#include "hvd/hvd.hpp"
#include "hvd/process_sets.hpp"
#include "worker_exit.h"

namespace {

using hvd::DataType;
using hvd::test::exitCodeFor;

int failures = 0;

void fail(const std::string& what) {
  std::fprintf(stderr, "rank %d: %s\n", hvd::rank(), what.c_str());
  ++failures;
}

// A value in [-1, 1) from (rank, tensor, index, salt): the same on every rank.
double noise(int rank, int tensor, size_t i, int salt) {
  uint64_t z = (static_cast<uint64_t>(rank) << 48) ^ (static_cast<uint64_t>(tensor) << 40) ^
               (static_cast<uint64_t>(salt) << 32) ^ i;
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) / static_cast<double>(1ull << 52) - 1.0;
}

// One Adasum case: tensors of `sizes`, rank r's element i of tensor t is value(r, t, i).
struct Case {
  std::string name;
  std::vector<size_t> sizes;
  std::function<double(int, int, size_t)> value;
  bool grouped = false;
  double prescale = 1.0;
  double postscale = 1.0;
  bool fp16 = false;
  // Exact expectations (orthogonal, equal, zero inputs); else within adasumTolerance.
  bool exact = false;
};

void runCase(const Case& c, DataType type, int set, const std::vector<int>& members) {
  const int me = hvd::rank();
  const size_t elem = hvd::dataTypeSize(type);
  const std::string tag = c.name + "." + hvd::dataTypeName(type) + ".set" + std::to_string(set);
  auto input = [&](int rank, int t) {
    std::vector<double> v(c.sizes[t]);
    for (size_t i = 0; i < v.size(); ++i) v[i] = hvd::test::roundTo(type, c.value(rank, t, i));
    return v;
  };
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<std::string> names;
  for (size_t t = 0; t < c.sizes.size(); ++t) {
    const auto mine = input(me, static_cast<int>(t));
    buffers.emplace_back(mine.size() * elem + 1);
    for (size_t i = 0; i < mine.size(); ++i) hvd::storeElement(type, buffers[t].data(), i, mine[i]);
    names.push_back(tag + ".t" + std::to_string(t));
  }
  hvd::OpOptions o;
  o.op = hvd::ReduceOp::kAdasum;
  o.prescaleFactor = c.prescale;
  o.postscaleFactor = c.postscale;
  o.fp16Compression = c.fp16;
  o.processSet = set;
  std::vector<hvd::Handle> handles;
  if (c.grouped) {
    std::vector<const void*> in;
    std::vector<void*> out;
    std::vector<hvd::Shape> shapes;
    for (size_t t = 0; t < c.sizes.size(); ++t) {
      in.push_back(buffers[t].data());
      out.push_back(buffers[t].data());
      shapes.push_back({static_cast<int64_t>(c.sizes[t])});
    }
    handles.push_back(hvd::groupedAllreduceAsync(names, in, out, shapes, type, o));
  } else {
    for (size_t t = 0; t < c.sizes.size(); ++t) {
      handles.push_back(hvd::allreduceAsync(names[t], buffers[t].data(), buffers[t].data(),
                                            {static_cast<int64_t>(c.sizes[t])}, type, o));
    }
  }
  for (auto& h : handles) h.wait();

  // The reference: each member's input as the engine sends it (scaled, cast to float16 when
  // compressed), the tree over the members in set order, then the postscale.
  const DataType wire = c.fp16 && (type == DataType::kFloat32 || type == DataType::kFloat64)
                            ? DataType::kFloat16
                            : type;
  for (size_t t = 0; t < c.sizes.size(); ++t) {
    std::vector<std::vector<double>> inputs;
    for (int rank : members) {
      auto v = input(rank, static_cast<int>(t));
      for (double& x : v) x = hvd::test::roundTo(wire, x * c.prescale);
      inputs.push_back(v);
    }
    auto want = hvd::test::adasumTreeReference(wire, inputs);
    for (double& x : want) x = hvd::test::roundTo(type, x * c.postscale);
    inputs.push_back(want);
    const double tol = c.exact ? 0.0
                               : hvd::test::adasumTolerance(wire) * c.postscale *
                                     hvd::test::largestMagnitude(inputs);
    for (size_t i = 0; i < c.sizes[t]; ++i) {
      const double got = hvd::loadElement(type, buffers[t].data(), i);
      if (!(std::fabs(got - want[i]) <= tol)) {
        fail(tag + " tensor " + std::to_string(t) + " element " + std::to_string(i) + ": got " +
             std::to_string(got) + ", want " + std::to_string(want[i]));
        break;
      }
    }
  }
}

std::vector<Case> cases(int n) {
  std::vector<Case> all;
  // Rank r owns coordinates r and r + n (and nothing else): everything stays orthogonal.
  all.push_back({"orthogonal", {2 * static_cast<size_t>(n)}, [n](int r, int, size_t i) {
                   return i == static_cast<size_t>(r) || i == static_cast<size_t>(r + n)
                              ? (i < static_cast<size_t>(n) ? r + 1.0 : -0.25 * (r + 2))
                              : 0.0;
                 }});
  all.back().exact = true;
  all.push_back({"equal", {33}, [](int, int, size_t i) { return 2.0 * noise(0, 0, i, 1); }});
  all.back().exact = true;
  all.push_back({"zero", {7, 12}, [](int, int, size_t) { return 0.0; }});
  all.back().exact = true;
  // Norms 1e-2 .. 1e1 by rank, and rank 1's second tensor all zeros.
  all.push_back({"norms", {40, 19}, [](int r, int t, size_t i) {
                   if (r == 1 && t == 1) return 0.0;
                   return std::pow(10.0, r % 4 - 2) * (noise(r, t, i, 2) + 0.3 * noise(0, t, i, 3));
                 }});
  auto mixed = [](int r, int t, size_t i) { return noise(r, t, i, 4) + 0.5 * noise(0, t, i, 5); };
  // Tensors unlike each other (equal on every rank, independent with growing norms, mixed): had
  // the fused buffer been reduced as one vector, every tensor's result would be another.
  auto unlike = [mixed](int r, int t, size_t i) {
    if (t == 0) return noise(0, 0, i, 6);
    if (t == 1) return (r + 1) * noise(r, 1, i, 7);
    return mixed(r, t, i);
  };
  all.push_back({"grouped", {5, 64, 1}, unlike, true});
  all.push_back({"separate", {17, 3, 50}, unlike});
  all.push_back({"scaled", {21}, mixed, false, 0.5, 4.0});
  all.push_back({"fp16", {30}, mixed, false, 1.0, 1.0, true});
  return all;
}

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
  fail(what + ": not refused");
}

int run() {
  hvd::init();
  const int n = hvd::size();
  const int me = hvd::rank();
  std::vector<int> everyone(n);
  for (int r = 0; r < n; ++r) everyone[r] = r;
  const DataType types[] = {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
                            DataType::kFloat64};
  for (DataType type : types) {
    for (const Case& c : cases(n)) {
      if (c.fp16 && type != DataType::kFloat32) continue;
      runCase(c, type, 0, everyone);
    }
  }
  const std::vector<int> sets = hvd::processSetIds();
  if (sets.size() > 1 && hvd::processSetIncluded(sets[1])) {
    const std::vector<int> members = hvd::processSetRanks(sets[1]);
    for (DataType type : {DataType::kFloat32, DataType::kBFloat16}) {
      for (const Case& c : cases(static_cast<int>(members.size()))) {
        if (c.name == "norms" || c.name == "grouped") runCase(c, type, sets[1], members);
      }
    }
  }

  int32_t ints[4] = {1, 2, 3, 4};
  hvd::OpOptions adasum;
  adasum.op = hvd::ReduceOp::kAdasum;
  expectRefused([&] { hvd::allreduceAsync("int", ints, ints, {4}, DataType::kInt32, adasum); },
                "op adasum reduces float16, bfloat16, float32 and float64, not int32",
                "an int32 Adasum");
  float floats[4] = {1, 2, 3, 4};
  expectRefused([&] { hvd::reducescatterAsync("rs", floats, {4}, DataType::kFloat32, adasum); },
                "op adasum applies to allreduce only", "an Adasum reducescatter");
  // Rank 0 asks for a sum where the others ask for Adasum: every rank fails, naming both.
  hvd::OpOptions mixed = adasum;
  if (me == 0) mixed.op = hvd::ReduceOp::kSum;
  try {
    hvd::allreduceAsync("mismatch", floats, floats, {4}, DataType::kFloat32, mixed).wait();
    fail("an op mismatch did not fail");
  } catch (const hvd::Error& e) {
    const std::string what = e.what();
    if (what.find("op") == std::string::npos || what.find("adasum") == std::string::npos ||
        what.find("sum on rank 0") == std::string::npos) {
      fail("the op mismatch error does not name the ops: " + what);
    }
  }
  hvd::barrierAsync().wait();
  std::printf("adasum ok=%d rank=%d\n", failures == 0, me);
  std::fflush(stdout);
  hvd::shutdown();
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const hvd::Error& e) {
    std::fprintf(stderr, "rank error (%s): %s\n", hvd::errorKindName(e.kind()), e.what());
    return exitCodeFor(e);
  }
}
