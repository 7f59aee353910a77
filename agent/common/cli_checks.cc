#include "agent/common/cli_checks.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace hvd::agent::common {
namespace {

bool isBlank(const std::string& text) {
  return text.find_first_not_of(" \t\r\n") == std::string::npos;
}

// A bound as people write it: "0.001", "86400", "1048576", "1e+07".
std::string number(double v) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.7g", v);
  return text;
}

}  // namespace

std::string inQuotes(std::string_view text) { return "'" + std::string(text) + "'"; }

CLI::Validator nonEmpty() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        return isBlank(value) ? inQuotes(value) + " is empty; expected a value" : std::string();
      },
      "NOT EMPTY");
}

std::string finiteRangeProblem(const std::string& text, double min, double max,
                               const std::string& unit) {
  const std::string expected =
      " (expected " + unit + " from " + number(min) + " to " + number(max) + ")";
  if (isBlank(text)) return inQuotes(text) + " is empty" + expected;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return inQuotes(text) + " is not a number" + expected;
  // strtod reads "nan" and "inf" (any case), and overflows "1e999" to infinity: all refused
  // here, as no option means them. An underflow to 0 is harmless.
  if (std::isnan(v)) return inQuotes(text) + " is not a number" + expected;
  if (std::isinf(v)) return inQuotes(text) + " is not finite" + expected;
  if (v < min || v > max) return inQuotes(text) + " is out of range" + expected;
  return {};
}

std::string integerRangeProblem(const std::string& text, long long min, long long max) {
  const std::string expected =
      " (expected a whole number from " + std::to_string(min) + " to " + std::to_string(max) + ")";
  if (isBlank(text)) return inQuotes(text) + " is empty" + expected;
  const size_t digits = text[0] == '-' ? 1 : 0;
  if (text.size() == digits || text.find_first_not_of("0123456789", digits) != std::string::npos) {
    return inQuotes(text) + " is not a whole number" + expected;
  }
  errno = 0;
  const long long v = std::strtoll(text.c_str(), nullptr, 10);
  if (errno == ERANGE || v < min || v > max) return inQuotes(text) + " is out of range" + expected;
  return {};
}

void prefixErrorsWithName(CLI::App* app) {
  app->failure_message([](const CLI::App* a, const CLI::Error& e) {
    return a->get_name() + ": " + CLI::FailureMessage::simple(a, e);
  });
}

CLI::Validator finiteRange(double min, double max, const std::string& unit) {
  return CLI::Validator(
      [=](std::string& value) { return finiteRangeProblem(value, min, max, unit); },
      "NUMBER in [" + number(min) + " - " + number(max) + "]");
}

CLI::Validator integerRange(long long min, long long max) {
  return CLI::Validator([=](std::string& value) { return integerRangeProblem(value, min, max); },
                        "INT in [" + std::to_string(min) + " - " + std::to_string(max) + "]");
}

}  // namespace hvd::agent::common
