// The engine's timeline (runtime/src/engine/timeline.h): the file is strict JSON (checked by a
// small RFC 8259 parser below, which also rejects invalid UTF-8) after every flush, at
// destruction and after a SIGKILL; each tensor is a row with its metadata once; B/E events pair
// per tensor with non-decreasing timestamps; hostile tensor names cannot break the file; the
// drop path keeps memory bounded and says how much it dropped. Then the dynamic timeline
// (hvd::startTimeline / stopTimeline) through the engine and the public API: nothing before a
// start, the ops in between by name, a complete file once stop returns, a second start to
// another file, cycle marks only when asked, the epoch key, errors, and swaps while ops are in
// flight or submitted from other threads.
#include "engine/timeline.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/chrome_trace.h"
#include "common/test_support.h"
#include "engine_support.h"
#include "hvd/engine.hpp"
#include "hvd/error.hpp"
#include "hvd/hvd.hpp"

namespace hvd::engine {
namespace {

using test::checkTrace;
using test::countEvents;
using test::Json;
using test::JsonParser;
using test::parseTrace;
using test::readFile;
using test::Trace;
using TempDir = test::TempDir;

// One op's phases as the engine records them, with the fusion copies nested in the collective.
void recordOp(Timeline& tl, const std::string& tensor) {
  tl.begin(tensor, "NEGOTIATE_ALLREDUCE");
  tl.end(tensor);
  tl.begin(tensor, "QUEUE");
  tl.end(tensor);
  tl.begin(tensor, "ALLREDUCE");
  tl.begin(tensor, "MEMCPY_IN_FUSION_BUFFER");
  tl.end(tensor);
  tl.instant(tensor, "CACHE_HIT");
  tl.begin(tensor, "MEMCPY_OUT_FUSION_BUFFER");
  tl.end(tensor);
  tl.end(tensor);
}

// ---- Tests ----

// The checker itself: it must reject what a JSON parser rejects, or the tests below prove
// nothing.
TEST(TimelineJsonChecker, AcceptsValidAndRejectsInvalidDocuments) {
  const std::vector<std::string> valid = {"[]", " [ {} , {\"a\":[1,-2.5e3,true,false,null]} ]\n",
                                          "[\"\\u00e9\\ud83d\\ude00\\/\"]", "[\"\xc3\xa9\"]"};
  for (const auto& text : valid) {
    EXPECT_NO_THROW(JsonParser(text).parseDocument()) << text;
  }
  const std::vector<std::string> invalid = {"",
                                            "[",
                                            "[{}",
                                            "[{},]",
                                            "[{}]]",
                                            "[{}] []",
                                            "[\"a\nb\"]",
                                            "[\"\\x41\"]",
                                            "[\"\xff\"]",
                                            "[\"\xc0\x80\"]",
                                            "[\"\xed\xa0\x80\"]",
                                            "[01]",
                                            "[1.]",
                                            "[\"\\ud800\"]",
                                            "{\"a\" 1}",
                                            "[\"unterminated]",
                                            std::string("[\"\0\"]", 5)};
  for (const auto& text : invalid) {
    EXPECT_THROW(JsonParser(text).parseDocument(), std::runtime_error) << text;
  }
}

TEST(Timeline, ValidJsonRightAfterConstruction) {
  TempDir dir;
  const std::string path = dir.file("trace.json");
  Timeline tl(path, 3);
  const Trace t = checkTrace(path);
  ASSERT_EQ(t.rows.count(0), 1u);
  bool named = false;
  for (const Json& e : t.doc.array) {
    const Json* args = e.find("args");
    if (e.str("name") == "process_name" && args != nullptr &&
        args->str("name").find("rank 3") != std::string::npos) {
      named = true;
    }
  }
  EXPECT_TRUE(named) << "the rank labels the trace";
}

TEST(Timeline, NestedPhasesOnSeveralTensorsFromFourThreads) {
  TempDir dir;
  const std::string path = dir.file("trace.json");
  constexpr int kThreads = 4;
  constexpr int kTensors = 5;
  constexpr int kSteps = 40;
  {
    Timeline tl(path, 0);
    std::vector<std::thread> threads;
    for (int th = 0; th < kThreads; ++th) {
      threads.emplace_back([&tl, th] {
        for (int step = 0; step < kSteps; ++step) {
          for (int k = 0; k < kTensors; ++k) {
            recordOp(tl, "layer" + std::to_string(th) + "." + std::to_string(k) + ".weight");
          }
          if (step == kSteps / 2) std::this_thread::sleep_for(Timeline::kFlushInterval);
        }
      });
    }
    for (auto& t : threads) t.join();
  }  // the destructor writes everything
  const Trace t = checkTrace(path);
  EXPECT_EQ(t.dropped, 0u);
  EXPECT_EQ(t.pidOf.size(), static_cast<size_t>(kThreads * kTensors));
  for (int th = 0; th < kThreads; ++th) {
    for (int k = 0; k < kTensors; ++k) {
      const std::string name = "layer" + std::to_string(th) + "." + std::to_string(k) + ".weight";
      EXPECT_EQ(countEvents(t, name, "B"), 5 * kSteps) << name;
      EXPECT_EQ(countEvents(t, name, "E"), 5 * kSteps) << name;
      EXPECT_EQ(countEvents(t, name, "i", "CACHE_HIT"), kSteps) << name;
      for (const char* phase : {"NEGOTIATE_ALLREDUCE", "QUEUE", "ALLREDUCE",
                                "MEMCPY_IN_FUSION_BUFFER", "MEMCPY_OUT_FUSION_BUFFER"}) {
        EXPECT_EQ(countEvents(t, name, "B", phase), kSteps) << name << " " << phase;
        EXPECT_EQ(countEvents(t, name, "E", phase), kSteps) << name << " " << phase;
      }
    }
  }
}

TEST(Timeline, FlushInTheMiddleLeavesAValidFileWithTheEventsSoFar) {
  TempDir dir;
  const std::string path = dir.file("trace.json");
  Timeline tl(path, 1);
  for (int i = 0; i < 3; ++i) recordOp(tl, "first");
  tl.flush();
  {
    const Trace t = checkTrace(path);
    EXPECT_EQ(countEvents(t, "first", "B"), 15);
    EXPECT_EQ(countEvents(t, "first", "E"), 15);
    EXPECT_EQ(t.pidOf.count("second"), 0u);
  }
  recordOp(tl, "second");
  tl.begin("third", "ALLREDUCE");  // still open at the flush: a B without its E yet
  tl.flush();
  tl.flush();  // nothing new: still valid
  const std::string text = readFile(path);
  ASSERT_NO_THROW(JsonParser(text).parseDocument()) << text;
  EXPECT_NE(text.find("\"second\""), std::string::npos);
  EXPECT_NE(text.find("\"third\""), std::string::npos);
  tl.end("third");
  tl.end("third");    // no open phase: ignored
  tl.end("unknown");  // never begun: ignored
  tl.flush();
  const Trace t = checkTrace(path);
  EXPECT_EQ(countEvents(t, "first", "B"), 15);
  EXPECT_EQ(countEvents(t, "second", "B"), 5);
  EXPECT_EQ(countEvents(t, "third", "B"), 1);
  EXPECT_EQ(countEvents(t, "third", "E"), 1);
  EXPECT_EQ(t.pidOf.count("unknown"), 0u);
}

TEST(Timeline, PeriodicWritesWithoutFlush) {
  TempDir dir;
  const std::string path = dir.file("trace.json");
  Timeline tl(path, 0);
  recordOp(tl, "periodic");
  // The writer writes on its own within a few intervals.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (readFile(path).find("\"periodic\"") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const Trace t = checkTrace(path);
  EXPECT_EQ(countEvents(t, "periodic", "B"), 5);
}

TEST(Timeline, HostileTensorNamesKeepTheFileValid) {
  TempDir dir;
  const std::string path = dir.file("trace.json");
  // Names that are valid UTF-8 come back exactly; invalid bytes are replaced, but still give
  // distinct rows.
  const std::vector<std::string> exact = {
      "quote\"d",
      "back\\slash",
      "new\nline\r\ttab",
      std::string("ctl\x01\x1f\x7f", 6),
      std::string("nul\0byte", 8),
      "\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",  // été € 😀
      "</script>\u2028",
      "",
  };
  const std::vector<std::string> invalid = {
      "bad\xff",
      "\xc0\x80overlong",
      "trunc\xe2\x82",
      "\xed\xa0\x80surrogate",
      "\xf4\x90\x80\x80toolarge",
      "\x80\x80lone continuation",
      "mix\"\\\xfe\n",
  };
  {
    Timeline tl(path, 0);
    for (const auto& name : exact) {
      tl.begin(name, "ALLREDUCE");
      tl.instant(name, "what \"is\" \\ this\n\xff");
      tl.end(name);
    }
    tl.flush();
    for (const auto& name : invalid) {
      tl.begin(name, "odd\xc3");
      tl.end(name);
    }
  }
  const Trace t = checkTrace(path);
  for (const auto& name : exact) {
    EXPECT_EQ(countEvents(t, name, "B", "ALLREDUCE"), 1) << name;
    EXPECT_EQ(countEvents(t, name, "E", "ALLREDUCE"), 1) << name;
    EXPECT_EQ(countEvents(t, name, "i"), 1) << name;
  }
  EXPECT_EQ(t.pidOf.size(), exact.size() + invalid.size());
  EXPECT_EQ(t.pidOf.count("bad\\xff"), 1u);
}

TEST(Timeline, UnwritablePathThrowsBackendErrorNamingIt) {
  TempDir dir;
  const std::string missing = dir.file("no-such-dir") + "/trace.json";
  try {
    Timeline tl(missing, 0);
    FAIL() << "no error for " << missing;
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos)
        << e.what();
  }
  const std::string directory = dir.file("");
  EXPECT_THROW(Timeline(directory, 0), BackendError);
}

TEST(Timeline, DropsWhenTheWriterFallsBehindAndSaysHowMany) {
  TempDir dir;
  const std::string path = dir.file("trace.json");
  constexpr int kOps = 20000;
  {
    Timeline tl(path, 0, 16);
    for (int i = 0; i < kOps; ++i) {
      tl.begin("burst", "ALLREDUCE");
      tl.begin("burst", "MEMCPY_IN_FUSION_BUFFER");
      tl.end("burst");
      tl.end("burst");
    }
  }
  const Trace t = checkTrace(path);  // pairs still match
  const int written = countEvents(t, "burst", "B") + countEvents(t, "burst", "E");
  EXPECT_GT(t.dropped, 0u);
  EXPECT_EQ(written + static_cast<int>(t.dropped), 4 * kOps);
}

TEST(Timeline, SigkilledChildLeavesAValidFileWithTheFlushedEvents) {
  TempDir dir;
  const std::string path = dir.file("trace.json");
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    try {
      Timeline tl(path, 2);
      for (int i = 0; i < 10; ++i) recordOp(tl, "flushed.tensor");
      tl.begin("flushed.open", "ALLREDUCE");
      tl.flush();
      const char byte = 1;
      if (::write(ready[1], &byte, 1) != 1) ::_exit(3);
      // More events that the periodic writer may or may not write before the kill.
      for (int i = 0; i < 3; ++i) recordOp(tl, "late.tensor");
      for (;;) ::pause();
    } catch (...) {
      ::_exit(2);
    }
  }
  ::close(ready[1]);
  char byte = 0;
  const ssize_t n = ::read(ready[0], &byte, 1);
  ::close(ready[0]);
  ASSERT_EQ(n, 1) << "the child did not flush";
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);

  // The phase open at the kill has no E: check the rest by hand rather than with checkTrace.
  const Json doc = parseTrace(path);
  int begins = 0;
  int ends = 0;
  int openBegins = 0;
  int flushedPid = -1;
  int openPid = -1;
  for (const Json& e : doc.array) {
    const Json* args = e.find("args");
    if (e.str("name") == "process_name" && args != nullptr) {
      if (args->str("name") == "flushed.tensor") flushedPid = static_cast<int>(e.num("pid"));
      if (args->str("name") == "flushed.open") openPid = static_cast<int>(e.num("pid"));
    }
  }
  ASSERT_GT(flushedPid, 0);
  ASSERT_GT(openPid, 0);
  for (const Json& e : doc.array) {
    const int pid = static_cast<int>(e.num("pid"));
    if (pid == flushedPid && e.str("ph") == "B") ++begins;
    if (pid == flushedPid && e.str("ph") == "E") ++ends;
    if (pid == openPid && e.str("ph") == "B") ++openBegins;
  }
  EXPECT_EQ(begins, 50);
  EXPECT_EQ(ends, 50);
  EXPECT_EQ(openBegins, 1);
}

// ---- The dynamic timeline (engine and API) ----

using enginetest::Cluster;

// One float32 sum allreduce named `name` on every rank of `cluster`.
void allreduceEverywhere(Cluster& cluster, const std::string& name) {
  cluster.run([&](int rank, Engine& engine) {
    float x[4] = {1, 2, 3, static_cast<float>(rank)};
    engine.allreduce(name, x, x, {4}, DataType::kFloat32, {ReduceOp::kSum}).wait();
  });
}

// Blocks until `engine` has started `n` more cycles (each rank's engine cycles on its own
// thread, in step with the others).
void waitCycles(Engine& engine, uint64_t n) {
  const uint64_t from = engine.stats().cycles;
  while (engine.stats().cycles < from + n)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// The CYCLE_START markers of a trace; each must be a global instant on the timeline's row.
int cycleMarks(const Trace& t) {
  int n = 0;
  for (const Json& e : t.doc.array) {
    if (e.str("name") != "CYCLE_START") continue;
    EXPECT_EQ(e.str("ph"), "i");
    EXPECT_EQ(e.str("s"), "g");
    EXPECT_EQ(e.num("pid"), 0);
    ++n;
  }
  return n;
}

// The phases an allreduce leaves on its row when it ran while the timeline was written.
void expectRan(const Trace& t, const std::string& name) {
  EXPECT_EQ(countEvents(t, name, "B", "NEGOTIATE_ALLREDUCE"), 1) << name;
  EXPECT_EQ(countEvents(t, name, "E", "NEGOTIATE_ALLREDUCE"), 1) << name;
  EXPECT_EQ(countEvents(t, name, "B", "ALLREDUCE"), 1) << name;
  EXPECT_EQ(countEvents(t, name, "E", "ALLREDUCE"), 1) << name;
}

TEST(DynamicTimeline, NothingUntilStartThenTheOpsByNameAndACompleteFileOnStop) {
  TempDir dir;
  const std::string path = dir.file("dynamic.json");
  const std::string other = dir.file("rank1.json");
  Cluster cluster(2);  // no HVD_TIMELINE: what HVD_TIMELINE=DYNAMIC configures
  allreduceEverywhere(cluster, "before.start");
  EXPECT_FALSE(std::filesystem::exists(path));
  cluster.engine(0).startTimeline(path, false);
  cluster.engine(1).startTimeline(other, false);  // rank 0 alone writes
  ASSERT_TRUE(std::filesystem::exists(path));
  allreduceEverywhere(cluster, "between.a");
  allreduceEverywhere(cluster, "between.b");
  cluster.engine(1).stopTimeline();
  cluster.engine(0).stopTimeline();
  const std::string atStop = readFile(path);
  const Trace t = checkTrace(path);  // complete as soon as stop returned
  expectRan(t, "between.a");
  expectRan(t, "between.b");
  EXPECT_EQ(t.pidOf.count("before.start"), 0u);
  EXPECT_EQ(t.pidOf.size(), 2u);
  allreduceEverywhere(cluster, "after.stop");
  cluster.engine(0).stopTimeline();  // none runs: a no-op
  EXPECT_EQ(readFile(path), atStop) << "nothing is written after stop";
  EXPECT_FALSE(std::filesystem::exists(other));
}

TEST(DynamicTimeline, ASecondStartWritesAnotherFileAndCompletesTheFirst) {
  TempDir dir;
  const std::string first = dir.file("first.json");
  const std::string second = dir.file("second.json");
  Cluster cluster(2);
  cluster.engine(0).startTimeline(first, false);
  allreduceEverywhere(cluster, "op.first");
  cluster.engine(0).startTimeline(second, false);  // replaces the first, no stop between
  const std::string firstText = readFile(first);
  const Trace a = checkTrace(first);
  expectRan(a, "op.first");
  allreduceEverywhere(cluster, "op.second");
  // The file being written again: Horovod keeps appending to it rather than truncating.
  cluster.engine(0).startTimeline(second, false);
  allreduceEverywhere(cluster, "op.third");
  cluster.engine(0).stopTimeline();
  const Trace b = checkTrace(second);
  expectRan(b, "op.second");
  expectRan(b, "op.third");
  EXPECT_EQ(b.pidOf.count("op.first"), 0u);
  EXPECT_EQ(readFile(first), firstText) << "the first file is left alone once replaced";
}

TEST(DynamicTimeline, ConfiguredTimelineIsStoppedAndReplacedTheSameWay) {
  TempDir dir;
  EngineOptions options;
  options.timelinePath = dir.file("configured.json");  // HVD_TIMELINE=path
  Cluster cluster(2, options);
  allreduceEverywhere(cluster, "op.configured");
  cluster.engine(0).stopTimeline();
  expectRan(checkTrace(options.timelinePath), "op.configured");
  const std::string later = dir.file("later.json");
  cluster.engine(0).startTimeline(later, false);
  allreduceEverywhere(cluster, "op.later");
  cluster.engine(0).stopTimeline();
  const Trace t = checkTrace(later);
  expectRan(t, "op.later");
  EXPECT_EQ(t.pidOf.count("op.configured"), 0u);
}

TEST(DynamicTimeline, CycleMarksOnlyWhenAsked) {
  TempDir dir;
  const std::string plain = dir.file("plain.json");
  const std::string marked = dir.file("marked.json");
  Cluster cluster(2);
  cluster.engine(0).startTimeline(plain, false);
  for (int i = 0; i < 3; ++i) allreduceEverywhere(cluster, "plain." + std::to_string(i));
  cluster.engine(0).stopTimeline();
  EXPECT_EQ(cycleMarks(checkTrace(plain)), 0);
  cluster.engine(0).startTimeline(marked, true);
  for (int i = 0; i < 3; ++i) allreduceEverywhere(cluster, "marked." + std::to_string(i));
  waitCycles(cluster.engine(0), 20);  // idle cycles: no marks
  cluster.engine(0).stopTimeline();
  // One mark per cycle that ran ops: each op waited for its own, so at least three, and idle
  // cycles add none.
  const int marks = cycleMarks(checkTrace(marked));
  EXPECT_GE(marks, 3);
  EXPECT_LE(marks, 6);

  // HVD_TIMELINE_MARK_CYCLES=1 with HVD_TIMELINE=path.
  EngineOptions options;
  options.timelinePath = dir.file("env.json");
  options.timelineMarkCycles = true;
  {
    Cluster configured(2, options);
    allreduceEverywhere(configured, "env.op");
  }
  EXPECT_GE(cycleMarks(checkTrace(options.timelinePath)), 1);
}

TEST(DynamicTimeline, TheTraceCarriesItsStartTimeSinceTheEpoch) {
  TempDir dir;
  const std::string path = dir.file("epoch.json");
  auto micros = [] {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  Cluster cluster(1);
  const int64_t before = micros();
  cluster.engine(0).startTimeline(path, false);
  const int64_t after = micros();
  cluster.engine(0).stopTimeline();
  const Trace t = checkTrace(path);
  int found = 0;
  for (const Json& e : t.doc.array) {
    const Json* args = e.find("args");
    if (e.str("ph") != "M" || e.num("pid") != 0 || args == nullptr) continue;
    if (args->find("start_time_since_epoch_in_micros") == nullptr) continue;
    ++found;
    EXPECT_EQ(e.str("name"), "process_name");
    const double start = args->num("start_time_since_epoch_in_micros");
    EXPECT_GE(start, static_cast<double>(before));
    EXPECT_LE(start, static_cast<double>(after));
  }
  EXPECT_EQ(found, 1);
}

TEST(DynamicTimeline, EmptyOrUnwritablePathIsAnErrorAndTheRunningTimelineGoesOn) {
  TempDir dir;
  const std::string path = dir.file("running.json");
  const std::string unwritable = dir.file("no-such-dir") + "/trace.json";
  Cluster cluster(2);
  cluster.engine(0).startTimeline(path, false);
  for (int r = 0; r < 2; ++r) {
    try {
      cluster.engine(r).startTimeline("", false);
      ADD_FAILURE() << "rank " << r << ": no error for an empty path";
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("path is empty"), std::string::npos) << e.what();
    }
  }
  try {
    cluster.engine(0).startTimeline(unwritable, false);
    ADD_FAILURE() << "no error for " << unwritable;
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find(unwritable), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(cluster.engine(1).startTimeline(unwritable, false));  // rank 1 opens nothing
  allreduceEverywhere(cluster, "op.still.recorded");
  cluster.engine(0).stopTimeline();
  expectRan(checkTrace(path), "op.still.recorded");
}

TEST(DynamicTimeline, StartAndStopWithOpsInFlightKeepPhasesPaired) {
  TempDir dir;
  const std::string path = dir.file("inflight.json");
  float x0[2] = {1, 2};
  float x1[2] = {3, 4};
  Cluster cluster(2);
  // Rank 0 has submitted, rank 1 not yet: the op is negotiating when the timeline starts.
  Handle a0 = cluster.engine(0).allreduce("at.start", x0, x0, {2}, DataType::kFloat32, {});
  waitCycles(cluster.engine(0), 3);
  cluster.engine(0).startTimeline(path, false);
  Handle a1 = cluster.engine(1).allreduce("at.start", x1, x1, {2}, DataType::kFloat32, {});
  ASSERT_TRUE(a0.waitFor(std::chrono::seconds(60)));
  ASSERT_TRUE(a1.waitFor(std::chrono::seconds(60)));
  EXPECT_EQ(x0[0], 2.0f);  // the op itself is undisturbed: the average of 1 and 3
  // And one negotiating when it stops.
  Handle b0 = cluster.engine(0).allreduce("at.stop", x0, x0, {2}, DataType::kFloat32, {});
  waitCycles(cluster.engine(0), 3);
  cluster.engine(0).stopTimeline();
  const Trace t = checkTrace(path);  // every B has its E
  expectRan(t, "at.start");
  EXPECT_EQ(countEvents(t, "at.stop", "B", "NEGOTIATE_ALLREDUCE"), 1);
  EXPECT_EQ(countEvents(t, "at.stop", "E", "NEGOTIATE_ALLREDUCE"), 1);
  EXPECT_EQ(countEvents(t, "at.stop", "B", "ALLREDUCE"), 0);
  Handle b1 = cluster.engine(1).allreduce("at.stop", x1, x1, {2}, DataType::kFloat32, {});
  ASSERT_TRUE(b0.waitFor(std::chrono::seconds(60)));
  ASSERT_TRUE(b1.waitFor(std::chrono::seconds(60)));
}

TEST(DynamicTimeline, StartAndStopFromOtherThreadsWhileEveryRankSubmits) {
  TempDir dir;
  constexpr int kFiles = 8;
  constexpr int kOps = 150;
  Cluster cluster(2);
  std::atomic<bool> done{false};
  std::vector<std::thread> togglers;
  for (int r = 0; r < 2; ++r) {
    togglers.emplace_back([&, r] {
      for (int k = 0; k < kFiles; ++k) {
        cluster.engine(r).startTimeline(dir.file("busy" + std::to_string(k) + ".json"), k % 2);
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
        if (k % 3 == 0) cluster.engine(r).stopTimeline();
      }
      cluster.engine(r).stopTimeline();
      while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  }
  cluster.run([&](int rank, Engine& engine) {
    for (int i = 0; i < kOps; ++i) {
      float x[8] = {1, 2, 3, 4, 5, 6, 7, static_cast<float>(rank)};
      engine.allreduce("busy." + std::to_string(i), x, x, {8}, DataType::kFloat32, {ReduceOp::kSum})
          .wait();
      EXPECT_EQ(x[7], 1.0f);  // 0 + 1
    }
  });
  done = true;
  for (auto& t : togglers) t.join();
  for (int k = 0; k < kFiles; ++k) {
    const Trace t = checkTrace(dir.file("busy" + std::to_string(k) + ".json"));
    for (const auto& [name, pid] : t.pidOf) {
      EXPECT_EQ(name.rfind("busy.", 0), 0u) << name;
    }
  }
}

// The public functions over a one-rank runtime.
class DynamicTimelineApi : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"HVD_RANK", "HVD_LOCAL_RANK", "HVD_CROSS_RANK"}) setenv(name, "0", 1);
    for (const char* name : {"HVD_SIZE", "HVD_LOCAL_SIZE", "HVD_CROSS_SIZE"}) setenv(name, "1", 1);
    setenv("HVD_JOB_ID", "timeline-test", 1);
    setenv("HVD_TIMELINE", "DYNAMIC", 1);
  }
  void TearDown() override {
    hvd::shutdown();
    unsetenv("HVD_TIMELINE");
  }
};

TEST_F(DynamicTimelineApi, CallsBeforeInitAreInvalidArguments) {
  ASSERT_FALSE(hvd::isInitialized());
  EXPECT_THROW(hvd::startTimeline("/tmp/never.json"), InvalidArgumentError);
  EXPECT_THROW(hvd::stopTimeline(), InvalidArgumentError);
  EXPECT_THROW(hvd::engineStats(), InvalidArgumentError);
}

TEST_F(DynamicTimelineApi, StartBeforeTheFirstAsyncOpAndAgainAfter) {
  TempDir dir;
  const std::string first = dir.file("api-first.json");
  const std::string second = dir.file("api-second.json");
  hvd::init();
  EXPECT_THROW(hvd::startTimeline(""), InvalidArgumentError);
  hvd::stopTimeline();  // none runs
  // The engine has not started (no async op yet), and starting the timeline does not start it.
  hvd::startTimeline(first);
  EXPECT_EQ(hvd::engineStats().cycles, 0u);
  EXPECT_NO_THROW(checkTrace(first));
  float x[3] = {1, 2, 3};
  hvd::allreduceAsync("api.op", x, x, {3}, DataType::kFloat32).wait();
  hvd::stopTimeline();
  expectRan(checkTrace(first), "api.op");
  hvd::startTimeline(second, true);
  hvd::allreduceAsync("api.op2", x, x, {3}, DataType::kFloat32).wait();
  hvd::shutdown();  // without stopTimeline: shutdown completes the file
  const Trace t = checkTrace(second);
  expectRan(t, "api.op2");
  EXPECT_GE(cycleMarks(t), 1);
  EXPECT_EQ(t.pidOf.count("api.op"), 0u);
}

}  // namespace
}  // namespace hvd::engine
