#include "agent/elastic/discovery.h"

#include <cctype>
#include <map>

#include "contract/host_spec.h"
#include "contract/names.h"
#include "hvd/error.hpp"

namespace hvd::agent::elastic {
namespace {

constexpr char kLineHint[] = "expected HOST or HOST:SLOTS per line, e.g. node1:4";

bool isSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && isSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && isSpace(s.back())) s.remove_suffix(1);
  return s;
}

// One line of the output, for errors: "line 3: 'node1:x'".
struct Line {
  int number;
  std::string_view text;
};

// `problem` completes "'<line>' ...", as contract::hostNameProblem's answers do.
[[noreturn]] void fail(const Line& line, const std::string& problem) {
  throw InvalidArgumentError("line " + std::to_string(line.number) + ": '" +
                             std::string(line.text) + "' " + problem + " (" + kLineHint + ")");
}

// Digits only: a sign, a fraction or trailing text is a broken script, not a slot count to
// half-read.
int parseSlots(const Line& line, std::string_view digits) {
  digits = trim(digits);
  if (digits.empty()) fail(line, "has no slot count after ':'");
  long long value = 0;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) {
      fail(line, "has a slot count '" + std::string(digits) + "' that is not a whole number >= 0");
    }
    value = value * 10 + (c - '0');
    if (value > contract::kMaxSlotsPerHost) {
      fail(line, "has " + std::string(digits) + " slots, above the limit of " +
                     std::to_string(contract::kMaxSlotsPerHost) + " per host");
    }
  }
  return static_cast<int>(value);
}

DiscoveredHost parseLine(const Line& line, int defaultSlots) {
  std::string_view host;
  std::string_view slotsText;
  bool hasSlots = false;
  bool bracketed = false;
  if (line.text.front() == '[') {
    const size_t close = line.text.find(']');
    if (close == std::string_view::npos) fail(line, "has no closing ']' after its IPv6 address");
    host = line.text.substr(1, close - 1);
    bracketed = true;
    const std::string_view rest = trim(line.text.substr(close + 1));
    if (!rest.empty()) {
      if (rest.front() != ':') fail(line, "has unexpected text after ']'");
      slotsText = rest.substr(1);
      hasSlots = true;
    }
  } else {
    const size_t colon = line.text.find(':');
    if (colon != std::string_view::npos &&
        line.text.find(':', colon + 1) != std::string_view::npos) {
      fail(line, "has more than one ':'; write an IPv6 address in brackets, e.g. [fe80::1]:4");
    }
    host = trim(line.text.substr(0, colon));
    if (colon != std::string_view::npos) {
      slotsText = line.text.substr(colon + 1);
      hasSlots = true;
    }
  }
  if (host.empty()) fail(line, "has an empty host name");
  if (!bracketed && host.find_first_of("[]") != std::string_view::npos) {
    fail(line, "has a stray bracket; write IPv6 as [ADDR]:SLOTS");
  }
  const std::string problem = contract::hostNameProblem(host, bracketed);
  if (!problem.empty()) fail(line, problem);
  return DiscoveredHost{std::string(host), hasSlots ? parseSlots(line, slotsText) : defaultSlots};
}

}  // namespace

std::string hostKey(std::string_view host) {
  std::string key(host);
  for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return key;
}

std::vector<DiscoveredHost> parseDiscoveryOutput(const std::string& text, int defaultSlots) {
  if (defaultSlots < 1) {
    throw InvalidArgumentError("default slots per discovered host is " +
                               std::to_string(defaultSlots) + "; expected at least 1");
  }
  struct Seen {
    int slots;
    int lineNumber;
  };
  std::map<std::string, Seen> seen;
  std::vector<DiscoveredHost> hosts;
  size_t start = 0;
  for (int number = 1; start <= text.size(); ++number) {
    const size_t newline = text.find('\n', start);
    const size_t end = newline == std::string::npos ? text.size() : newline;
    const Line line{number, trim(std::string_view(text).substr(start, end - start))};
    start = end + 1;
    if (line.text.empty()) continue;

    DiscoveredHost host = parseLine(line, defaultSlots);
    const auto [it, inserted] = seen.emplace(hostKey(host.host), Seen{host.slots, number});
    if (!inserted) {
      if (it->second.slots == host.slots) continue;  // the same fact twice, as Horovod's set
      fail(line, "gives host '" + host.host + "' " + std::to_string(host.slots) +
                     " slots, but line " + std::to_string(it->second.lineNumber) + " gave it " +
                     std::to_string(it->second.slots));
    }
    if (host.slots > 0) hosts.push_back(std::move(host));
  }
  return hosts;
}

FixedHosts::FixedHosts(std::vector<DiscoveredHost> hosts) : hosts_(std::move(hosts)) {
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < hosts_.size(); ++i) {
    const DiscoveredHost& h = hosts_[i];
    if (h.slots < 1) {
      throw InvalidArgumentError("fixed host '" + h.host + "' has " + std::to_string(h.slots) +
                                 " slots; expected at least 1");
    }
    if (!seen.emplace(hostKey(h.host), i).second) {
      throw InvalidArgumentError("fixed host '" + h.host +
                                 "' is listed twice; expected each host once");
    }
  }
}

}  // namespace hvd::agent::elastic
