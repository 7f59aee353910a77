// The engine's timeline (runtime/src/engine/timeline.h): the file is strict JSON (checked by a
// small RFC 8259 parser below, which also rejects invalid UTF-8) after every flush, at
// destruction and after a SIGKILL; each tensor is a row with its metadata once; B/E events pair
// per tensor with non-decreasing timestamps; hostile tensor names cannot break the file; the
// drop path keeps memory bounded and says how much it dropped.
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
#include "hvd/error.hpp"

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

}  // namespace
}  // namespace hvd::engine
