// hvd-local-run: starts N ranks of a program on this machine with the hvd worker environment
// and an embedded store. The small launcher used by tests, benchmarks and demo.sh until hvdrun
// exists. Ranks inherit stdout/stderr. Exit status: 0 when every rank succeeded, otherwise the
// first failing rank's status (exit code, or 128 + signal); 2 for usage errors; 124 on timeout.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "hvd/error.hpp"
#include "tools/local_job.h"

namespace {

constexpr const char* kUsage =
    "usage: hvd-local-run -np N [--timeout SECONDS] [-x NAME=VALUE]... [--] PROGRAM [ARGS...]\n"
    "\n"
    "Starts N ranks of PROGRAM on this machine with the hvd worker environment (HVD_RANK,\n"
    "HVD_SIZE, ..., HVD_STORE_ADDR and a store token) and an embedded rendezvous store.\n"
    "  -np N           number of ranks (>= 1)\n"
    "  --timeout S     kill the job and exit 124 after S seconds (default: none)\n"
    "  -x NAME=VALUE   set an environment variable for every rank\n"
    "When a rank fails, the others get 10 s to fail on their own, then are killed.\n";

int usage(const std::string& message) {
  std::fprintf(stderr, "hvd-local-run: %s\n\n%s", message.c_str(), kUsage);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  hvd::test::LocalJobSpec spec;
  spec.np = 0;
  double timeoutSeconds = 0;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "-np" || arg == "-n" || arg == "--timeout" || arg == "-x") {
      if (i + 1 >= argc) return usage(arg + " needs a value");
      const std::string value = argv[++i];
      if (arg == "-x") {
        const auto eq = value.find('=');
        if (eq == std::string::npos || eq == 0)
          return usage("-x expects NAME=VALUE, got '" + value + "'");
        spec.env.emplace_back(value.substr(0, eq), value.substr(eq + 1));
        continue;
      }
      char* end = nullptr;
      const double number = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0' || number <= 0) {
        return usage(arg + " expects a positive number, got '" + value + "'");
      }
      if (arg == "--timeout") {
        timeoutSeconds = number;
      } else {
        spec.np = static_cast<int>(number);
        if (spec.np != number) return usage("-np expects an integer, got '" + value + "'");
      }
      continue;
    }
    if (!arg.empty() && arg[0] == '-') return usage("unknown option '" + arg + "'");
    break;
  }
  if (spec.np < 1) return usage("-np N is required");
  if (i >= argc) return usage("no program given");
  for (; i < argc; ++i) spec.argv.emplace_back(argv[i]);

  try {
    hvd::test::LocalJob job(spec);
    job.start();
    const auto forever = std::chrono::hours(24 * 365);
    const auto limit =
        timeoutSeconds > 0
            ? std::chrono::milliseconds(static_cast<long long>(timeoutSeconds * 1000))
            : std::chrono::duration_cast<std::chrono::milliseconds>(forever);
    const auto start = std::chrono::steady_clock::now();
    const int failed = job.waitFirstFailure(limit);
    if (failed >= 0) {
      // Give the others a chance to report their own error (peer failure) before killing them.
      if (!job.waitAll(std::chrono::seconds(10))) job.signalAll(SIGKILL);
      job.waitAll(std::chrono::seconds(5));
      const auto& e = job.exits()[failed];
      std::fprintf(stderr, "hvd-local-run: rank %d %s %d\n", failed,
                   e.signal ? "was killed by signal" : "exited with code",
                   e.signal ? e.signal : e.exitCode);
      return e.status();
    }
    bool all = true;
    for (const auto& e : job.exits()) all = all && e.exited;
    if (!all) {
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::fprintf(stderr, "hvd-local-run: timed out after %.0f s; killing the job\n", elapsed);
      job.signalAll(SIGKILL);
      job.waitAll(std::chrono::seconds(5));
      return 124;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hvd-local-run: %s\n", e.what());
    return 1;
  }
}
