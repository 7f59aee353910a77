#include "contract/names.h"

#include <arpa/inet.h>

#include <cctype>
#include <string>

namespace hvd::contract {
namespace {

bool isAlpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
bool isDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

constexpr size_t kMaxLabel = 63;
constexpr size_t kMaxName = 253;

bool allDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!isDigit(c)) return false;
  }
  return true;
}

bool parses(int family, std::string_view text) {
  unsigned char buffer[sizeof(struct in6_addr)];
  return ::inet_pton(family, std::string(text).c_str(), buffer) == 1;
}

std::string ipv6Problem(std::string_view addr) {
  std::string_view bare = addr;
  if (const size_t percent = addr.find('%'); percent != std::string_view::npos) {
    bare = addr.substr(0, percent);
    const std::string_view zone = addr.substr(percent + 1);
    if (zone.empty()) return "has an empty zone id after '%'";
    for (char c : zone) {
      if (!isAlpha(c) && !isDigit(c) && c != '.' && c != '-' && c != '_') {
        return std::string("has the character '") + c + "' in its zone id";
      }
    }
  }
  if (parses(AF_INET6, bare) || (bare == addr && parses(AF_INET, bare))) return {};
  return "has '" + std::string(addr) + "' in brackets, which is not an IPv6 address";
}

}  // namespace

bool isEnvName(std::string_view name) {
  if (name.empty() || isDigit(name.front())) return false;
  for (char c : name) {
    if (!isAlpha(c) && !isDigit(c) && c != '_') return false;
  }
  return true;
}

bool isSecretEnvName(std::string_view name) {
  std::string u(name);
  for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const auto endsWith = [&](std::string_view suffix) {
    return u.size() >= suffix.size() &&
           std::string_view(u).substr(u.size() - suffix.size()) == suffix;
  };
  static constexpr std::string_view kWords[] = {"SECRET", "PASSWORD",   "PASSWD", "PASSPHRASE",
                                                "TOKEN",  "CREDENTIAL", "PRIVATE"};
  for (std::string_view w : kWords) {
    if (u.find(w) != std::string::npos) return true;
  }
  static constexpr std::string_view kSuffixes[] = {"_KEY", "_KEYS", "APIKEY",      "_PASS",
                                                   "_PWD", "_AUTH", "AUTH_CONFIG", "_COOKIE"};
  for (std::string_view s : kSuffixes) {
    if (endsWith(s)) return true;
  }
  static constexpr std::string_view kExact[] = {"KEY", "KRB5CCNAME", "KRB5_KTNAME"};
  for (std::string_view e : kExact) {
    if (u == e) return true;
  }
  return false;
}

std::string hostNameProblem(std::string_view host, bool bracketed) {
  if (host.empty()) return "has an empty host name";
  if (bracketed) return ipv6Problem(host);
  std::string_view name = host;
  if (name.back() == '.') name.remove_suffix(1);  // a fully qualified name, "node1.example."
  if (name.size() > kMaxName) {
    return "has a host name of " + std::to_string(name.size()) + " characters (at most " +
           std::to_string(kMaxName) + ")";
  }
  std::string_view last;
  for (size_t start = 0;;) {
    const size_t dot = name.find('.', start);
    const std::string_view label =
        name.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    const std::string quotedLabel = "'" + std::string(label) + "'";
    if (label.empty()) return "has an empty label (two dots, or a leading dot) in its host name";
    if (label.size() > kMaxLabel) {
      return "has a label of " + std::to_string(label.size()) + " characters (at most " +
             std::to_string(kMaxLabel) + ")";
    }
    for (char c : label) {
      if (!isAlpha(c) && !isDigit(c) && c != '-' && c != '_') {
        return std::string("has the character '") + c +
               "' in its host name (host names use letters, digits, '.', '-' and '_')";
      }
    }
    if (label.front() == '-') return "has a label " + quotedLabel + " that starts with '-'";
    if (label.back() == '-') return "has a label " + quotedLabel + " that ends with '-'";
    last = label;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (allDigits(last) && !parses(AF_INET, name)) {
    return "is neither a host name nor an IPv4 address of four numbers 0-255";
  }
  return {};
}

}  // namespace hvd::contract
