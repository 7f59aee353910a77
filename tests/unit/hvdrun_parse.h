// hvdrun's command line parsed the way main() does, with what it printed on stderr: shared by
// the tests of the run options and of the job commands.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "launcher/cli.h"

namespace hvd::launcher::cli_test {

struct Parsed {
  std::optional<int> code;
  Options options;
  std::string stderrText;
};

// `args` as main() gets them, program name first.
inline Parsed parse(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  Parsed p;
  ::testing::internal::CaptureStderr();
  p.code = parseCommandLine(static_cast<int>(argv.size()), argv.data(), &p.options);
  p.stderrText = ::testing::internal::GetCapturedStderr();
  return p;
}

}  // namespace hvd::launcher::cli_test
