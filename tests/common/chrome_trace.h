// Reading a Chrome trace in tests (the engine's timeline): a strict JSON parser (RFC 8259, which
// also rejects invalid UTF-8 and raw control characters) and checkTrace(), which checks a trace's
// structure — metadata once per row and before its events, B/E pairs per row, non-decreasing
// timestamps per row — and indexes it by tensor. Header-only; failures are gtest failures.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace hvd::test {

// ---- A strict JSON parser (RFC 8259), enough to inspect a trace. ----

struct Json {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> array;
  std::vector<std::pair<std::string, Json>> object;

  const Json* find(const std::string& key) const {
    for (const auto& [k, v] : object) {
      if (k == key) return &v;
    }
    return nullptr;
  }
  std::string str(const std::string& key) const {
    const Json* v = find(key);
    return v != nullptr && v->type == Type::kString ? v->string : std::string();
  }
  double num(const std::string& key) const {
    const Json* v = find(key);
    return v != nullptr && v->type == Type::kNumber ? v->number : -1;
  }
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& text) : s_(text) {}

  // Throws std::runtime_error naming the offset of the first error.
  Json parseDocument() {
    Json v = parseValue(0);
    skipWs();
    if (i_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("invalid JSON at offset " + std::to_string(i_) + ": " + what);
  }
  void skipWs() {
    while (i_ < s_.size() &&
           (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) {
      ++i_;
    }
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void expect(char c) {
    if (peek() != c || i_ >= s_.size()) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  void literal(const char* word) {
    for (const char* p = word; *p != '\0'; ++p) expect(*p);
  }

  Json parseValue(int depth) {
    if (depth > 64) fail("nesting too deep");
    skipWs();
    Json v;
    if (i_ >= s_.size()) fail("unexpected end");
    switch (s_[i_]) {
      case '{':
        v.type = Json::Type::kObject;
        ++i_;
        skipWs();
        if (peek() == '}') {
          ++i_;
          return v;
        }
        for (;;) {
          skipWs();
          std::string key = parseString();
          skipWs();
          expect(':');
          v.object.emplace_back(std::move(key), parseValue(depth + 1));
          skipWs();
          if (peek() == ',') {
            ++i_;
            continue;
          }
          expect('}');
          return v;
        }
      case '[':
        v.type = Json::Type::kArray;
        ++i_;
        skipWs();
        if (peek() == ']') {
          ++i_;
          return v;
        }
        for (;;) {
          v.array.push_back(parseValue(depth + 1));
          skipWs();
          if (peek() == ',') {
            ++i_;
            continue;
          }
          expect(']');
          return v;
        }
      case '"':
        v.type = Json::Type::kString;
        v.string = parseString();
        return v;
      case 't':
        literal("true");
        v.type = Json::Type::kBool;
        v.boolean = true;
        return v;
      case 'f':
        literal("false");
        v.type = Json::Type::kBool;
        return v;
      case 'n':
        literal("null");
        return v;
      default:
        v.type = Json::Type::kNumber;
        v.number = parseNumber();
        return v;
    }
  }

  static bool isDigit(char c) { return c >= '0' && c <= '9'; }

  double parseNumber() {
    const size_t start = i_;
    if (peek() == '-') ++i_;
    if (peek() == '0') {
      ++i_;
    } else if (peek() >= '1' && peek() <= '9') {
      while (isDigit(peek())) ++i_;
    } else {
      fail("bad number");
    }
    if (peek() == '.') {
      ++i_;
      if (!isDigit(peek())) fail("bad fraction");
      while (isDigit(peek())) ++i_;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++i_;
      if (peek() == '+' || peek() == '-') ++i_;
      if (!isDigit(peek())) fail("bad exponent");
      while (isDigit(peek())) ++i_;
    }
    return std::stod(s_.substr(start, i_ - start));
  }

  unsigned hex4() {
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = peek();
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= static_cast<unsigned>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v |= static_cast<unsigned>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v |= static_cast<unsigned>(c - 'A' + 10);
      } else {
        fail("bad \\u escape");
      }
      ++i_;
    }
    return v;
  }

  static void appendUtf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  // One well-formed UTF-8 sequence (RFC 3629) copied to `out`.
  void utf8Sequence(std::string& out) {
    const auto c = static_cast<unsigned char>(s_[i_]);
    size_t len = 0;
    unsigned char lo = 0x80;
    unsigned char hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      fail("invalid UTF-8 lead byte");
    }
    if (i_ + len > s_.size()) fail("truncated UTF-8");
    const auto c1 = static_cast<unsigned char>(s_[i_ + 1]);
    if (c1 < lo || c1 > hi) fail("invalid UTF-8 continuation");
    for (size_t k = 2; k < len; ++k) {
      if ((static_cast<unsigned char>(s_[i_ + k]) & 0xc0) != 0x80) fail("invalid UTF-8");
    }
    out.append(s_, i_, len);
    i_ += len;
  }

  std::string parseString() {
    expect('"');
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) fail("unterminated string");
      const auto c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') {
        ++i_;
        return out;
      }
      if (c < 0x20) fail("raw control character in string");
      if (c >= 0x80) {
        utf8Sequence(out);
        continue;
      }
      ++i_;
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      const char e = peek();
      ++i_;
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xd800 && cp <= 0xdbff) {
            expect('\\');
            expect('u');
            const unsigned lo = hex4();
            if (lo < 0xdc00 || lo > 0xdfff) fail("unpaired surrogate");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          } else if (cp >= 0xdc00 && cp <= 0xdfff) {
            fail("unpaired surrogate");
          }
          appendUtf8(out, cp);
          break;
        }
        default:
          --i_;
          fail("bad escape");
      }
    }
  }

  const std::string& s_;
  size_t i_ = 0;
};

// ---- Helpers ----

inline std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Parses the trace at `path`; fails the test (with the parser's message) when it is not JSON or
// not an array of objects.
inline Json parseTrace(const std::string& path) {
  const std::string text = readFile(path);
  Json doc;
  try {
    doc = JsonParser(text).parseDocument();
  } catch (const std::exception& e) {
    ADD_FAILURE() << path << ": " << e.what() << "\n--- file tail ---\n"
                  << text.substr(text.size() > 400 ? text.size() - 400 : 0);
    return doc;
  }
  EXPECT_EQ(doc.type, Json::Type::kArray);
  for (const Json& e : doc.array) EXPECT_EQ(e.type, Json::Type::kObject);
  EXPECT_GE(text.size(), 3u);
  EXPECT_EQ(text.substr(text.size() - 3), "\n]\n");
  return doc;
}

// What a trace says about each tensor row.
struct Row {
  int metadata = 0;  // process_name events
  int sortIndex = 0;
  std::vector<const Json*> events;  // B, E and i, in file order
};

struct Trace {
  Json doc;
  std::map<std::string, int> pidOf;  // tensor name -> pid
  std::map<int, Row> rows;           // pid -> row
  uint64_t dropped = 0;              // sum of TIMELINE_DROPPED_EVENTS
};

// Parses and checks the structure: metadata once per row and before its events; B/E pair per
// row (E closes the last open B, with its name); "ts" non-decreasing per row; "tid" 0.
inline Trace checkTrace(const std::string& path) {
  Trace t;
  t.doc = parseTrace(path);
  for (const Json& e : t.doc.array) {
    const std::string ph = e.str("ph");
    const int pid = static_cast<int>(e.num("pid"));
    EXPECT_GE(pid, 0);
    if (ph == "M") {
      const Json* args = e.find("args");
      EXPECT_NE(args, nullptr);
      if (args == nullptr) continue;
      if (e.str("name") == "process_name") {
        Row& row = t.rows[pid];
        EXPECT_TRUE(row.events.empty()) << "metadata after events on pid " << pid;
        ++row.metadata;
        if (pid != 0) {
          EXPECT_EQ(t.pidOf.count(args->str("name")), 0u) << args->str("name");
          t.pidOf[args->str("name")] = pid;
        }
      } else if (e.str("name") == "process_sort_index") {
        ++t.rows[pid].sortIndex;
      }
      continue;
    }
    EXPECT_TRUE(ph == "B" || ph == "E" || ph == "i") << ph;
    EXPECT_EQ(e.num("tid"), 0);
    EXPECT_GE(e.num("ts"), 0);
    EXPECT_EQ(t.rows[pid].metadata, 1) << "event before metadata on pid " << pid;
    if (pid == 0 && e.str("name") == "TIMELINE_DROPPED_EVENTS") {
      const Json* args = e.find("args");
      EXPECT_NE(args, nullptr);
      if (args != nullptr) t.dropped += static_cast<uint64_t>(args->num("dropped"));
      continue;
    }
    t.rows[pid].events.push_back(&e);
  }
  for (const auto& [pid, row] : t.rows) {
    EXPECT_EQ(row.metadata, 1) << "pid " << pid;
    EXPECT_EQ(row.sortIndex, 1) << "pid " << pid;
    std::vector<std::string> open;
    double last = 0;
    for (const Json* e : row.events) {
      const double ts = e->num("ts");
      EXPECT_GE(ts, last) << "pid " << pid << " goes back in time";
      last = ts;
      const std::string ph = e->str("ph");
      if (ph == "B") {
        open.push_back(e->str("name"));
      } else if (ph == "E") {
        EXPECT_FALSE(open.empty()) << "E without B on pid " << pid;
        if (open.empty()) continue;
        EXPECT_EQ(e->str("name"), open.back()) << "pid " << pid;
        open.pop_back();
      }
    }
    EXPECT_TRUE(open.empty()) << open.size() << " unclosed phases on pid " << pid;
  }
  return t;
}

// Events of one kind ("B", "E", "i") on a tensor's row, optionally with one name.
inline int countEvents(const Trace& t, const std::string& tensor, const std::string& ph,
                       const std::string& name = "") {
  auto it = t.pidOf.find(tensor);
  if (it == t.pidOf.end()) return 0;
  int n = 0;
  for (const Json* e : t.rows.at(it->second).events) {
    if (e->str("ph") == ph && (name.empty() || e->str("name") == name)) ++n;
  }
  return n;
}

}  // namespace hvd::test
