// Text inside JSON strings, as the timeline file and `hvdrun doctor --json` write it: whatever
// bytes a caller passes (a tensor name, a host name, an agent's error), the output stays valid
// JSON. Header only, like the rest of hvd_support.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hvd {

// What becomes of a byte that is not part of well-formed UTF-8.
enum class InvalidUtf8 {
  kHexEscape,    // the four visible characters \xHH (JSON "\\xHH"): the byte stays readable
  kReplacement,  // U+FFFD, JSON's and Unicode's replacement character
};

// The length of the well-formed UTF-8 sequence (RFC 3629: no overlong forms, no surrogates,
// nothing above U+10FFFF) that starts at text[i] with a byte >= 0x80, or 0 when there is none.
inline size_t utf8SequenceLength(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  size_t length = 0;
  uint32_t code = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    code = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    code = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    code = lead & 0x07;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  const bool overlong = (length == 3 && code < 0x800) || (length == 4 && code < 0x10000);
  const bool surrogate = code >= 0xD800 && code <= 0xDFFF;
  if (overlong || surrogate || code > 0x10FFFF) return 0;
  return length;
}

// Appends `text` as the contents of a JSON string (without the quotes): well-formed UTF-8 passes
// through; quotes, backslashes and control characters (DEL included) are escaped; other bytes
// as `invalid` says.
inline void appendJsonEscaped(std::string& out, std::string_view text, InvalidUtf8 invalid) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      if (const size_t length = utf8SequenceLength(text, i)) {
        out.append(text.substr(i, length));
        i += length;
        continue;
      }
      if (invalid == InvalidUtf8::kReplacement) {
        out += "\\ufffd";
      } else {
        out += "\\\\x";
        out += kHex[c >> 4];
        out += kHex[c & 0xf];
      }
      ++i;
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20 || c == 0x7F) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xf];
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
}

}  // namespace hvd
