#pragma once

// What strings_lib.cc and strings_format.cc (format()) share; included by nothing else.

#include <cstddef>
#include <string>
#include <string_view>

namespace qm::cel::strings::internal {

// ---------------------------------------------------------------------------------------------
// UTF-8, decoded the way Go's unicode/utf8 package does it: a byte that does not start a
// well-formed sequence (overlong forms, surrogates and values above U+10FFFF included) decodes
// to U+FFFD with a width of one byte. cel-go inherits this through []rune(s).

constexpr char32_t kRuneError = 0xFFFD;

struct Decoded {
  char32_t rune;
  size_t width;
};

inline Decoded DecodeRune(std::string_view s) {
  if (s.empty()) return {kRuneError, 0};
  const auto b0 = static_cast<unsigned char>(s[0]);
  if (b0 < 0x80) return {b0, 1};
  size_t width = 0;
  char32_t rune = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // accepted range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    width = 2;
    rune = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    width = 3;
    rune = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    width = 4;
    rune = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;  // no overlong forms
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {kRuneError, 1};
  }
  if (s.size() < width) return {kRuneError, 1};
  for (size_t i = 1; i < width; ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < (i == 1 ? lo : 0x80) || b > (i == 1 ? hi : 0xBF)) return {kRuneError, 1};
    rune = (rune << 6) | (b & 0x3F);
  }
  return {rune, width};
}

// Go's utf8.DecodeLastRuneInString.

inline void AppendRune(std::string& out, char32_t r) {
  if (r > 0x10FFFF || (r >= 0xD800 && r <= 0xDFFF)) r = kRuneError;
  if (r < 0x80) {
    out.push_back(static_cast<char>(r));
  } else if (r < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (r >> 6)));
    out.push_back(static_cast<char>(0x80 | (r & 0x3F)));
  } else if (r < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (r >> 12)));
    out.push_back(static_cast<char>(0x80 | ((r >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (r & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (r >> 18)));
    out.push_back(static_cast<char>(0x80 | ((r >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((r >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (r & 0x3F)));
  }
}

// Go's strconv.Quote (the %q verb): the string in double quotes with Go's escapes.
std::string GoQuote(std::string_view s);

}  // namespace qm::cel::strings::internal
