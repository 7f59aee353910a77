#include "launcher/option_values.h"

#include <strings.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>

#include "agent/common/cli_checks.h"

namespace hvd::launcher {

namespace {

using agent::common::inQuotes;

struct SignalName {
  const char* name;
  int number;
};
constexpr SignalName kSignals[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"ALRM", SIGALRM},
};

// parseDuration's forms; a zero duration is accepted only with `allowZero`.
std::optional<double> parseDurationText(const std::string& text, bool allowZero) {
  if (text.empty()) return std::nullopt;
  const auto number = [](const std::string& t, double* out) {
    if (t.empty() || t.find_first_not_of("0123456789.") != std::string::npos) return false;
    char* end = nullptr;
    *out = std::strtod(t.c_str(), &end);
    return end == t.c_str() + t.size();
  };
  double value = 0;
  if (text.find(':') == std::string::npos) {
    double unit = 1;
    std::string digits = text;
    switch (text.back()) {
      case 's':
        digits.pop_back();
        break;
      case 'm':
        unit = 60, digits.pop_back();
        break;
      case 'h':
        unit = 3600, digits.pop_back();
        break;
      case 'd':
        unit = 86400, digits.pop_back();
        break;
      default:
        break;
    }
    if (!number(digits, &value)) return std::nullopt;
    value *= unit;
    // Hundreds of digits overflow to infinity: not a duration anyone means.
    if (!std::isfinite(value) || value < 0 || (value == 0 && !allowZero)) return std::nullopt;
    return value;
  }
  // [D-]HH:MM:SS or MM:SS
  std::string rest = text;
  double days = 0;
  if (const size_t dash = rest.find('-'); dash != std::string::npos) {
    if (!number(rest.substr(0, dash), &days)) return std::nullopt;
    rest = rest.substr(dash + 1);
  }
  std::vector<double> parts;
  size_t start = 0;
  for (;;) {
    const size_t colon = rest.find(':', start);
    double part = 0;
    if (!number(rest.substr(start, colon - start), &part)) return std::nullopt;
    parts.push_back(part);
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (parts.size() > 3 || (parts.size() < 3 && days > 0)) return std::nullopt;
  for (double p : parts) value = value * 60 + p;
  value += days * 86400;
  if (!std::isfinite(value) || value < 0 || (value == 0 && !allowZero)) return std::nullopt;
  return value;
}

}  // namespace

std::optional<double> parseDuration(const std::string& text) {
  return parseDurationText(text, /*allowZero=*/false);
}

std::optional<double> parseDurationOrZero(const std::string& text) {
  return parseDurationText(text, /*allowZero=*/true);
}

std::optional<std::vector<int>> parseExitCodeList(const std::string& text, std::string* problem) {
  const auto refuse = [problem](const std::string& why) -> std::optional<std::vector<int>> {
    if (problem != nullptr) {
      *problem = why + " (expected exit codes 0 to 255, separated by commas, e.g. 2,3)";
    }
    return std::nullopt;
  };
  std::vector<int> codes;
  size_t start = 0;
  for (int position = 1;; ++position) {
    const size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    const size_t first = item.find_first_not_of(" \t");
    item = first == std::string::npos
               ? ""
               : item.substr(first, item.find_last_not_of(" \t") - first + 1);
    if (item.empty()) {
      return refuse(text.find_first_not_of(" \t,") == std::string::npos
                        ? std::string("no exit code given")
                        : "an empty entry at position " + std::to_string(position));
    }
    if (item.size() > 3 || item.find_first_not_of("0123456789") != std::string::npos ||
        std::atoi(item.c_str()) > 255) {
      return refuse(inQuotes(item) + " is not an exit code");
    }
    const int code = std::atoi(item.c_str());
    if (std::find(codes.begin(), codes.end(), code) == codes.end()) codes.push_back(code);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return codes;
}

std::optional<std::pair<int, int>> parseRankRange(const std::string& text) {
  const auto rank = [](const std::string& t) -> std::optional<int> {
    if (t.empty() || t.size() > 7 || t.find_first_not_of("0123456789") != std::string::npos) {
      return std::nullopt;
    }
    return std::atoi(t.c_str());
  };
  const size_t dash = text.find('-');
  if (dash == std::string::npos) {
    const std::optional<int> r = rank(text);
    if (!r) return std::nullopt;
    return std::make_pair(*r, *r);
  }
  const std::optional<int> first = rank(text.substr(0, dash));
  const std::optional<int> last = rank(text.substr(dash + 1));
  if (!first || !last || *last < *first) return std::nullopt;
  return std::make_pair(*first, *last);
}

std::optional<agent::node::GpuBind> parseGpuBind(const std::string& name) {
  if (name == "none") return agent::node::GpuBind::kNone;
  if (name == "visible") return agent::node::GpuBind::kVisible;
  return std::nullopt;
}

std::optional<int> parseSignal(const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (name.size() > 2) return std::nullopt;
    int n = std::atoi(name.c_str());
    return n >= 1 && n < NSIG ? std::optional<int>(n) : std::nullopt;
  }
  std::string bare = name;
  if (bare.size() > 3 && strncasecmp(bare.c_str(), "SIG", 3) == 0) bare = bare.substr(3);
  for (const SignalName& s : kSignals) {
    if (strcasecmp(bare.c_str(), s.name) == 0) return s.number;
  }
  return std::nullopt;
}

std::optional<std::string> parseLogLevel(const std::string& name) {
  // Horovod's word first, then the ranks' (spdlog's) name for it.
  static const std::pair<const char*, const char*> kLevels[] = {
      {"trace", "trace"}, {"debug", "debug"}, {"info", "info"},      {"warning", "warn"},
      {"warn", "warn"},   {"error", "error"}, {"fatal", "critical"}, {"off", "off"},
  };
  for (const auto& [word, level] : kLevels) {
    if (strcasecmp(name.c_str(), word) == 0) return std::string(level);
  }
  return std::nullopt;
}

}  // namespace hvd::launcher
