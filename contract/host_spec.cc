// Parsing of `-H` lists and hostfiles. Every error quotes the token the user typed and says what
// was expected, because "invalid host spec" alone sends people to the source code.
#include "contract/host_spec.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string_view>

#include "contract/names.h"
#include "hvd/error.hpp"

namespace hvd::contract {
namespace {

constexpr char kListHint[] = "expected HOST or HOST:SLOTS, e.g. node1:4";
constexpr char kFileHint[] = "expected HOST, HOST:SLOTS or HOST slots=N, e.g. node1 slots=4";

// A hostfile is a few lines per node; anything this large is the wrong file (or /dev/zero).
constexpr size_t kMaxHostfileBytes = 16 << 20;

// Where a token came from, so that one parser serves both `-H` and hostfile lines.
struct Where {
  std::string context;  // "-H" or "hosts.txt:3"
  const char* hint;
};

[[noreturn]] void fail(const Where& w, std::string_view token, const std::string& problem) {
  throw InvalidArgumentError(w.context + ": '" + std::string(token) + "' " + problem + " (" +
                             w.hint + ")");
}

bool isSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && isSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && isSpace(s.back())) s.remove_suffix(1);
  return s;
}

// `digits` is the text after `separator` (':' or "slots="). Parsed by hand so that signs, spaces
// and overflow are refused with a precise message instead of being half-accepted by stoi.
int parseSlots(const Where& w, std::string_view token, std::string_view digits,
               const char* separator) {
  if (digits.empty()) fail(w, token, std::string("has no slot count after '") + separator + "'");
  if (digits.front() == '-') {
    fail(w, token, "has a negative slot count '" + std::string(digits) + "'; slots must be >= 1");
  }
  long long value = 0;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) {
      fail(w, token, "has a slot count '" + std::string(digits) + "' that is not a whole number");
    }
    value = value * 10 + (c - '0');
    if (value > kMaxSlotsPerHost) {
      fail(w, token,
           "has " + std::string(digits) + " slots, above the limit of " +
               std::to_string(kMaxSlotsPerHost) + " per host");
    }
  }
  if (value == 0) fail(w, token, "has 0 slots; a host needs at least 1");
  return static_cast<int>(value);
}

// The host part of a token: a host name, an IPv4 address or (bracketed) an IPv6 address, by the
// rules of contract/names.h. Brackets inside a name are a misplaced IPv6 form, said as such.
void checkHost(const Where& w, std::string_view token, std::string_view host, bool bracketed) {
  if (!bracketed && host.find_first_of("[]") != std::string_view::npos) {
    fail(w, token, "has a stray bracket; write IPv6 as [ADDR]:SLOTS");
  }
  const std::string problem = hostNameProblem(host, bracketed);
  if (!problem.empty()) fail(w, token, problem);
}

// Parses one trimmed, non-empty HOST, HOST:SLOTS, [IPV6] or [IPV6]:SLOTS token.
HostSlots parseHostToken(const Where& w, std::string_view token) {
  HostSlots out;
  if (token.front() == '[') {
    const size_t close = token.find(']');
    if (close == std::string_view::npos) {
      fail(w, token, "has no closing ']' after its IPv6 address");
    }
    const std::string_view addr = token.substr(1, close - 1);
    if (addr.empty()) fail(w, token, "has an empty address between '[' and ']'");
    checkHost(w, token, addr, /*bracketed=*/true);
    out.host = std::string(addr);
    const std::string_view rest = token.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') fail(w, token, "has unexpected text after ']'");
      out.slots = parseSlots(w, token, rest.substr(1), ":");
    }
    return out;
  }
  const size_t colon = token.find(':');
  if (colon != std::string_view::npos && token.find(':', colon + 1) != std::string_view::npos) {
    fail(w, token,
         "has more than one ':'; an IPv6 address must be written in brackets, e.g. [fe80::1]:4");
  }
  const std::string_view host = token.substr(0, colon);
  if (host.empty()) fail(w, token, "has no host before ':'");
  checkHost(w, token, host, /*bracketed=*/false);
  out.host = std::string(host);
  if (colon != std::string_view::npos) {
    out.slots = parseSlots(w, token, token.substr(colon + 1), ":");
  }
  return out;
}

// Rejects a host listed twice: placement would otherwise give it two sets of local ranks that
// both start at 0. DNS names are case-insensitive, so "Node1" and "node1" are the same host.
class DuplicateCheck {
 public:
  // `origin` says where this entry was written ("'h1:2'" or "line 4") for a later duplicate.
  void add(const Where& w, std::string_view token, const std::string& host,
           const std::string& origin) {
    std::string key = host;
    for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const auto [it, inserted] = seen_.emplace(key, origin);
    if (!inserted) {
      fail(w, token,
           "names host '" + host + "', which appears twice (first as " + it->second +
               "); hvd requires each host once, so give it one entry with its total slots");
    }
  }

 private:
  std::map<std::string, std::string> seen_;
};

}  // namespace

std::vector<HostSlots> parseHostList(const std::string& spec) {
  const Where where{"-H", kListHint};
  if (trim(spec).empty()) fail(where, spec, "is an empty host list");
  std::vector<HostSlots> hosts;
  DuplicateCheck duplicates;
  size_t start = 0;
  for (int position = 1;; ++position) {
    const size_t comma = spec.find(',', start);
    const size_t end = comma == std::string::npos ? spec.size() : comma;
    const std::string_view token = trim(std::string_view(spec).substr(start, end - start));
    if (token.empty()) {
      fail(where, spec, "has an empty entry at position " + std::to_string(position));
    }
    hosts.push_back(parseHostToken(where, token));
    duplicates.add(where, token, hosts.back().host, "'" + std::string(token) + "'");
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return hosts;
}

std::vector<HostSlots> parseHostfileText(const std::string& text, const std::string& name) {
  std::vector<HostSlots> hosts;
  DuplicateCheck duplicates;
  size_t start = 0;
  for (int lineNo = 1; start <= text.size(); ++lineNo) {
    const size_t newline = text.find('\n', start);
    const size_t end = newline == std::string::npos ? text.size() : newline;
    std::string_view line = std::string_view(text).substr(start, end - start);
    start = end + 1;
    const size_t hash = line.find('#');
    if (hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) continue;

    const Where where{name + ":" + std::to_string(lineNo), kFileHint};
    // Fields are separated by whitespace: the host first, then optional `slots=N`.
    std::vector<std::string_view> fields;
    for (size_t i = 0; i < line.size();) {
      while (i < line.size() && isSpace(line[i])) ++i;
      size_t j = i;
      while (j < line.size() && !isSpace(line[j])) ++j;
      if (j > i) fields.push_back(line.substr(i, j - i));
      i = j;
    }
    HostSlots entry = parseHostToken(where, fields[0]);
    for (size_t f = 1; f < fields.size(); ++f) {
      constexpr std::string_view kSlotsKey = "slots=";
      if (fields[f].substr(0, kSlotsKey.size()) != kSlotsKey) {
        fail(where, fields[f], "is not a known field (only slots=N may follow the host)");
      }
      if (entry.slots) fail(where, line, "gives the slot count twice");
      entry.slots = parseSlots(where, fields[f], fields[f].substr(kSlotsKey.size()), "slots=");
    }
    duplicates.add(where, fields[0], entry.host, "line " + std::to_string(lineNo));
    hosts.push_back(std::move(entry));
  }
  if (hosts.empty()) {
    throw InvalidArgumentError("hostfile '" + name + "' lists no hosts (" + kFileHint + ")");
  }
  return hosts;
}

std::vector<HostSlots> parseHostfile(const std::string& path) {
  const auto cannotRead = [&path](int err) {
    return InvalidArgumentError("hostfile '" + path + "' cannot be read: " + std::strerror(err));
  };
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "r"), &std::fclose);
  if (!file) throw cannotRead(errno);
  std::string text;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, file.get())) > 0) {
    text.append(buffer, n);
    if (text.size() > kMaxHostfileBytes) {
      throw InvalidArgumentError("hostfile '" + path + "' is larger than " +
                                 std::to_string(kMaxHostfileBytes >> 20) +
                                 " MiB; is it the right file?");
    }
  }
  // fopen succeeds on a directory; the read then fails with EISDIR.
  if (std::ferror(file.get())) throw cannotRead(errno);
  return parseHostfileText(text, path);
}

}  // namespace hvd::contract
