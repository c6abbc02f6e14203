#include "cel/strings_lib.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "re2/re2.h"

namespace qm::cel::strings {
namespace {

// ---------------------------------------------------------------------------------------------
// UTF-8, decoded the way Go's unicode/utf8 package does it: a byte that does not start a
// well-formed sequence (overlong forms, surrogates and values above U+10FFFF included) decodes
// to U+FFFD with a width of one byte. cel-go inherits this through []rune(s).

constexpr char32_t kRuneError = 0xFFFD;

struct Decoded {
  char32_t rune;
  size_t width;
};

Decoded DecodeRune(std::string_view s) {
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
Decoded DecodeLastRune(std::string_view s) {
  if (s.empty()) return {kRuneError, 0};
  const size_t end = s.size();
  if (static_cast<unsigned char>(s[end - 1]) < 0x80) {
    return {static_cast<unsigned char>(s[end - 1]), 1};
  }
  const size_t lim = end >= 4 ? end - 4 : 0;
  size_t start = end - 1;
  while (start > lim) {
    --start;
    if ((static_cast<unsigned char>(s[start]) & 0xC0) != 0x80) break;  // a rune start
  }
  const Decoded d = DecodeRune(s.substr(start));
  if (start + d.width != end) return {kRuneError, 1};
  return d;
}

void AppendRune(std::string& out, char32_t r) {
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

std::vector<char32_t> ToRunes(std::string_view s) {
  std::vector<char32_t> runes;
  runes.reserve(s.size());
  while (!s.empty()) {
    const Decoded d = DecodeRune(s);
    runes.push_back(d.rune);
    s.remove_prefix(d.width);
  }
  return runes;
}

std::string FromRunes(const char32_t* begin, const char32_t* end) {
  std::string out;
  out.reserve(static_cast<size_t>(end - begin));
  for (const char32_t* p = begin; p != end; ++p) AppendRune(out, *p);
  return out;
}

absl::Status IndexOutOfRange(int64_t index) {
  return absl::InvalidArgumentError(absl::StrCat("index out of range: ", index));
}

// Go's strings.Count: non-overlapping occurrences; an empty `sep` occurs RuneCount(s)+1 times.
int64_t CountOccurrences(std::string_view s, std::string_view sep) {
  if (sep.empty()) return Size(s) + 1;
  int64_t count = 0;
  for (size_t pos = s.find(sep); pos != std::string_view::npos; pos = s.find(sep, pos)) {
    ++count;
    pos += sep.size();
  }
  return count;
}

// Go's unicode.IsSpace.
bool IsSpace(char32_t r) {
  switch (r) {
    case '\t':
    case '\n':
    case '\v':
    case '\f':
    case '\r':
    case ' ':
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return r >= 0x2000 && r <= 0x200A;
  }
}

// ---------------------------------------------------------------------------------------------
// Go's strconv.Quote, used by format() for strings inside lists and maps (Go's %q verb).

// Approximates Go's strconv.IsPrint (Unicode categories L, M, N, P, S plus U+0020). Exact for
// Latin-1; above it, the non-printable ranges below are the space separators, the format
// characters (Cf), private use, surrogates, noncharacters and the large unassigned planes.
// Unassigned code points scattered inside assigned blocks are treated as printable.
bool IsPrint(char32_t r) {
  if (r < 0x100) return (r >= 0x20 && r < 0x7F) || (r >= 0xA1 && r != 0xAD);
  struct Range {
    char32_t lo, hi;
  };
  static constexpr Range kNotPrint[] = {
      {0x0600, 0x0605},    {0x061C, 0x061C},   {0x06DD, 0x06DD},   {0x070F, 0x070F},
      {0x0890, 0x0891},    {0x08E2, 0x08E2},   {0x1680, 0x1680},   {0x180E, 0x180E},
      {0x2000, 0x200F},    {0x2028, 0x202F},   {0x205F, 0x2064},   {0x2066, 0x206F},
      {0x3000, 0x3000},    {0xD800, 0xF8FF},   {0xFDD0, 0xFDEF},   {0xFEFF, 0xFEFF},
      {0xFFF0, 0xFFFB},    {0xFFFE, 0xFFFF},   {0x110BD, 0x110BD}, {0x110CD, 0x110CD},
      {0x13430, 0x1343F},  {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0x323B0, 0xE00FF},
      {0xE01F0, 0x10FFFF},
  };
  for (const Range& range : kNotPrint) {
    if (r >= range.lo && r <= range.hi) return false;
  }
  return (r & 0xFFFE) != 0xFFFE;  // U+nFFFE and U+nFFFF are noncharacters in every plane
}
// The C-style escape of a control character as Go's strconv.Quote writes it, or nullptr.
const char* ControlEscape(uint32_t rune) {
  switch (rune) {
    case '\a':
      return "\\a";
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    case '\v':
      return "\\v";
    default:
      return nullptr;
  }
}

std::string GoQuote(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  while (!s.empty()) {
    const Decoded d = DecodeRune(s);
    if (d.width == 1 && d.rune == kRuneError) {
      const auto b = static_cast<unsigned char>(s[0]);
      out += "\\x";
      out.push_back(kHex[b >> 4]);
      out.push_back(kHex[b & 0xF]);
    } else if (d.rune == '"' || d.rune == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(d.rune));
    } else if (IsPrint(d.rune)) {
      out.append(s.substr(0, d.width));
    } else {
      if (const char* esc = ControlEscape(d.rune)) {
        out += esc;
      } else if (d.rune < ' ' || d.rune == 0x7F) {
        out += "\\x";
        out.push_back(kHex[d.rune >> 4]);
        out.push_back(kHex[d.rune & 0xF]);
      } else {
        const bool wide = d.rune >= 0x10000;
        out += wide ? "\\U" : "\\u";
        for (int shift = wide ? 28 : 12; shift >= 0; shift -= 4) {
          out.push_back(kHex[(d.rune >> shift) & 0xF]);
        }
      }
    }
    s.remove_prefix(d.width);
  }
  out.push_back('"');
  return out;
}

// ---------------------------------------------------------------------------------------------
// Number rendering for format().

bool IsValidUtf8(std::string_view s) {
  while (!s.empty()) {
    const Decoded d = DecodeRune(s);
    if (d.rune == kRuneError && d.width == 1) return false;
    s.remove_prefix(d.width);
  }
  return true;
}

// printf into a std::string; only used with numeric conversions.
template <typename... Args>
std::string Printf(const char* format, Args... args) {
  const int size = std::snprintf(nullptr, 0, format, args...);
  if (size <= 0) return "";
  std::string out(static_cast<size_t>(size) + 1, '\0');
  std::snprintf(out.data(), out.size(), format, args...);
  out.resize(static_cast<size_t>(size));
  return out;
}

// Go's strconv.FormatFloat(v, 'g', -1, 64): the shortest digits that round-trip, in %e form when
// the decimal exponent is < -4 or >= 6 (Go decides with precision 6 when printing the shortest
// form), otherwise in %f form.
std::string GoShortestDouble(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(result.ptr - buf));  // "-d.ddde+XX"
  std::string out;
  if (!sci.empty() && sci[0] == '-') {
    out.push_back('-');
    sci.remove_prefix(1);
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e)) {
    if (c != '.') digits.push_back(c);
  }
  int exp = 0;
  const std::string_view exp_text = sci.substr(e + 1);
  std::from_chars(exp_text.data() + (exp_text[0] == '+' ? 1 : 0), exp_text.data() + exp_text.size(),
                  exp);
  const int nd = static_cast<int>(digits.size());
  if (exp < -4 || exp >= 6) {
    out.push_back(digits[0]);
    if (nd > 1) {
      out.push_back('.');
      out.append(digits, 1, std::string::npos);
    }
    out.push_back('e');
    out.push_back(exp < 0 ? '-' : '+');
    const int abs_exp = std::abs(exp);
    if (abs_exp < 10) out.push_back('0');
    absl::StrAppend(&out, abs_exp);
    return out;
  }
  const int dp = exp + 1;  // digits before the decimal point
  if (dp > 0) {
    for (int i = 0; i < dp; ++i) out.push_back(i < nd ? digits[i] : '0');
  } else {
    out.push_back('0');
  }
  const int frac = std::max(nd - dp, 0);
  if (frac > 0) {
    out.push_back('.');
    for (int i = 0; i < frac; ++i) {
      const int j = dp + i;
      out.push_back(j >= 0 && j < nd ? digits[j] : '0');
    }
  }
  return out;
}

// Go's fmt "%.6f" (used for doubles inside lists and maps).
std::string GoFixed6(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return Printf("%.6f", v);
}

// golang.org/x/text/message's "%.<precision>f" for en_US: correctly rounded digits, integer part
// grouped by three with ',', a '-' only for values below zero (so -0.0 prints as 0).
std::string LocalizedFixed(double v, int precision) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "∞" : "-∞";
  const std::string plain = Printf("%.*f", precision, std::fabs(v));
  const size_t dot = std::min(plain.find('.'), plain.size());
  std::string out = v < 0 ? "-" : "";
  for (size_t i = 0; i < dot; ++i) {
    out.push_back(plain[i]);
    const size_t remaining = dot - i - 1;
    if (remaining > 0 && remaining % 3 == 0) out.push_back(',');
  }
  out.append(plain, dot, std::string::npos);
  return out;
}

// golang.org/x/text/message's "%<width>e" for en_US: 7 significant digits, then
// U+202F × U+202F 10 and the exponent in superscript digits (at least two), e.g.
// "1.052033 × 10⁰³". cel-go builds "%<precision>e", so the precision arrives here as a field
// width: the result is left-padded with spaces to `width` code points. `width` 0 means none.
std::string LocalizedScientific(double v, int width) {
  static constexpr const char* kSuperscript[] = {"⁰", "¹", "²", "³", "⁴", "⁵", "⁶", "⁷", "⁸", "⁹"};
  std::string body;
  if (std::isnan(v)) {
    body = "NaN";
  } else if (std::isinf(v)) {
    body = v > 0 ? "∞" : "-∞";
  } else {
    const std::string plain = Printf("%.6e", std::fabs(v));  // "d.dddddde+XX"
    const size_t e = plain.find('e');
    int exp = 0;
    const char* exp_begin = plain.data() + e + 1;
    if (*exp_begin == '+') ++exp_begin;
    std::from_chars(exp_begin, plain.data() + plain.size(), exp);
    if (v < 0) body.push_back('-');
    body.append(plain, 0, e);
    body += "\u202f×\u202f10";
    if (exp < 0) body += "⁻";
    const std::string exp_digits = absl::StrCat(std::abs(exp));
    if (exp_digits.size() < 2) body += kSuperscript[0];
    for (char c : exp_digits) body += kSuperscript[c - '0'];
  }
  const int64_t runes = Size(body);
  if (width > runes) body.insert(0, static_cast<size_t>(width - runes), ' ');
  return body;
}

// Go's fmt %b/%o/%x/%X of an integer: the magnitude in `base`, with '-' for negative values.
std::string IntegerInBase(uint64_t magnitude, bool negative, int base, bool upper) {
  char buf[80];
  auto result = std::to_chars(buf, buf + sizeof(buf), magnitude, base);
  std::string digits(buf, result.ptr);
  if (upper) {
    for (char& c : digits) {
      if (c >= 'a' && c <= 'f') c = static_cast<char>(c - 'a' + 'A');
    }
  }
  return negative ? "-" + digits : digits;
}

uint64_t Magnitude(int64_t v) {
  return v < 0 ? ~static_cast<uint64_t>(v) + 1 : static_cast<uint64_t>(v);
}

std::string HexOfBytes(std::string_view bytes, bool upper) {
  const char* digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 0xF]);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// format() clauses (cel-go ext/formatting.go, stringFormatter).

using Kind = FormatArg::Kind;

absl::Status ClauseError(const std::string& message) { return absl::InvalidArgumentError(message); }

absl::Status StringClauseError(const FormatArg& arg) {
  return ClauseError(
      "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, "
      "types, durations, and timestamps, was given " +
      arg.TypeName());
}

absl::StatusOr<std::string> BytesAsString(const FormatArg& arg) {
  if (!IsValidUtf8(arg.text)) {
    return ClauseError(
        "could not convert argument \"invalid UTF-8 in bytes, cannot convert to string\" to "
        "string");
  }
  return arg.text;
}

absl::StatusOr<std::string> FormatStringClause(const FormatArg& arg);

// A list element or map value: cel-go's clauseForType followed by quoteForCEL.
absl::StatusOr<std::string> FormatNested(const FormatArg& arg) {
  switch (arg.kind) {
    case Kind::kInt:
      return absl::StrCat(arg.int_value);
    case Kind::kUint:
      return absl::StrCat(arg.uint_value);
    case Kind::kString:
      return GoQuote(arg.text);
    case Kind::kBytes: {
      auto text = BytesAsString(arg);
      if (!text.ok()) return text.status();
      return "b" + GoQuote(*text);
    }
    case Kind::kDouble: {
      const std::string text = GoFixed6(arg.double_value);
      return std::isfinite(arg.double_value) ? text : GoQuote(text);
    }
    case Kind::kTimestamp:
      return "timestamp(" + GoQuote(arg.text) + ")";
    case Kind::kDuration:
      return "duration(" + GoQuote(arg.text) + ")";
    case Kind::kNull:
    case Kind::kBool:
    case Kind::kType:
    case Kind::kList:
    case Kind::kMap:
    case Kind::kOther:
      return FormatStringClause(arg);
  }
  return StringClauseError(arg);
}

absl::StatusOr<std::string> FormatList(const FormatArg& arg) {
  std::string out = "[";
  for (size_t i = 0; i < arg.elements.size(); ++i) {
    if (i > 0) out += ", ";
    auto element = FormatNested(arg.elements[i]);
    if (!element.ok()) return element.status();
    out += *element;
  }
  out += "]";
  return out;
}

absl::StatusOr<std::string> FormatMap(const FormatArg& arg) {
  std::vector<std::pair<std::string, std::string>> pairs;
  pairs.reserve(arg.entries.size());
  for (const FormatArg::MapEntry& entry : arg.entries) {
    std::string key;
    switch (entry.key.kind) {
      case Kind::kString:
        key = GoQuote(entry.key.text);
        break;
      case Kind::kBool:
        key = entry.key.bool_value ? "true" : "false";
        break;
      case Kind::kInt:
        key = absl::StrCat(entry.key.int_value);
        break;
      case Kind::kUint:
        key = absl::StrCat(entry.key.uint_value);
        break;
      default:
        return ClauseError("no formatting function for map key of type " + entry.key.TypeName());
    }
    auto value = FormatNested(entry.value);
    if (!value.ok()) return value.status();
    pairs.emplace_back(std::move(key), *std::move(value));
  }
  std::stable_sort(pairs.begin(), pairs.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string out = "{";
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (i > 0) out += ", ";
    absl::StrAppend(&out, pairs[i].first, ":", pairs[i].second);
  }
  out += "}";
  return out;
}

// %s (cel-go's FormatString).
absl::StatusOr<std::string> FormatStringClause(const FormatArg& arg) {
  switch (arg.kind) {
    case Kind::kList:
      return FormatList(arg);
    case Kind::kMap:
      return FormatMap(arg);
    case Kind::kInt:
      return absl::StrCat(arg.int_value);
    case Kind::kUint:
      return absl::StrCat(arg.uint_value);
    case Kind::kDouble:
      return GoShortestDouble(arg.double_value);
    case Kind::kBool:
      return std::string(arg.bool_value ? "true" : "false");
    case Kind::kBytes:
      return BytesAsString(arg);
    case Kind::kString:
    case Kind::kType:
    case Kind::kTimestamp:
    case Kind::kDuration:
      return arg.text;
    case Kind::kNull:
      return std::string("null");
    case Kind::kOther:
      break;
  }
  return StringClauseError(arg);
}

absl::StatusOr<std::string> FormatDecimalClause(const FormatArg& arg) {
  if (arg.kind == Kind::kInt) return absl::StrCat(arg.int_value);
  if (arg.kind == Kind::kUint) return absl::StrCat(arg.uint_value);
  return ClauseError("decimal clause can only be used on integers, was given " + arg.TypeName());
}

// The double behind %f and %e: a double, or one of the strings cel-go converts.
std::optional<double> FloatOperand(const FormatArg& arg) {
  if (arg.kind == Kind::kDouble) return arg.double_value;
  if (arg.kind == Kind::kString) {
    if (arg.text == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (arg.text == "Infinity") return std::numeric_limits<double>::infinity();
    if (arg.text == "-Infinity") return -std::numeric_limits<double>::infinity();
  }
  return std::nullopt;
}

absl::StatusOr<std::string> FormatFixedClause(const FormatArg& arg, int precision) {
  const std::optional<double> v = FloatOperand(arg);
  if (!v) {
    return ClauseError("fixed-point clause can only be used on doubles, was given " +
                       arg.TypeName());
  }
  return LocalizedFixed(*v, precision);
}

absl::StatusOr<std::string> FormatScientificClause(const FormatArg& arg, int width) {
  const std::optional<double> v = FloatOperand(arg);
  if (!v) {
    return ClauseError("scientific clause can only be used on doubles, was given " +
                       arg.TypeName());
  }
  return LocalizedScientific(*v, width);
}

absl::StatusOr<std::string> FormatBinaryClause(const FormatArg& arg) {
  switch (arg.kind) {
    case Kind::kInt:
      return IntegerInBase(Magnitude(arg.int_value), arg.int_value < 0, 2, false);
    case Kind::kUint:
      return IntegerInBase(arg.uint_value, false, 2, false);
    case Kind::kBool:
      return std::string(arg.bool_value ? "1" : "0");
    default:
      return ClauseError("only integers and bools can be formatted as binary, was given " +
                         arg.TypeName());
  }
}

absl::StatusOr<std::string> FormatHexClause(const FormatArg& arg, bool upper) {
  switch (arg.kind) {
    case Kind::kString:
    case Kind::kBytes:
      return HexOfBytes(arg.text, upper);
    case Kind::kInt:
      return IntegerInBase(Magnitude(arg.int_value), arg.int_value < 0, 16, upper);
    case Kind::kUint:
      return IntegerInBase(arg.uint_value, false, 16, upper);
    default:
      return ClauseError(
          "only integers, byte buffers, and strings can be formatted as hex, was given " +
          arg.TypeName());
  }
}

absl::StatusOr<std::string> FormatOctalClause(const FormatArg& arg) {
  if (arg.kind == Kind::kInt) {
    return IntegerInBase(Magnitude(arg.int_value), arg.int_value < 0, 8, false);
  }
  if (arg.kind == Kind::kUint) return IntegerInBase(arg.uint_value, false, 8, false);
  return ClauseError("octal clause can only be used on integers, was given " + arg.TypeName());
}

// Precisions up to this value behave as in cel-go; larger ones are rejected (see the header).
constexpr int64_t kMaxPrecision = 255;

absl::Status ParseClauseError(const std::string& message) {
  return absl::InvalidArgumentError("could not parse formatting clause: " + message);
}

// ---------------------------------------------------------------------------------------------
// Regular expressions.

// RE2's error codes in the words of Go's regexp/syntax package.
const char* GoRegexErrorCode(RE2::ErrorCode code) {
  switch (code) {
    case RE2::ErrorBadEscape:
      return "invalid escape sequence";
    case RE2::ErrorBadCharClass:
      return "invalid character class";
    case RE2::ErrorBadCharRange:
      return "invalid character class range";
    case RE2::ErrorMissingBracket:
      return "missing closing ]";
    case RE2::ErrorMissingParen:
      return "missing closing )";
    case RE2::ErrorUnexpectedParen:
      return "unexpected )";
    case RE2::ErrorTrailingBackslash:
      return "trailing backslash at end of expression";
    case RE2::ErrorRepeatArgument:
      return "missing argument to repetition operator";
    case RE2::ErrorRepeatSize:
      return "invalid repeat count";
    case RE2::ErrorRepeatOp:
      return "invalid nested repetition operator";
    case RE2::ErrorBadPerlOp:
      return "invalid or unsupported Perl syntax";
    case RE2::ErrorBadUTF8:
      return "invalid UTF-8";
    case RE2::ErrorBadNamedCapture:
      return "invalid named capture";
    case RE2::ErrorPatternTooLarge:
      return "expression too large";
    default:
      return "regexp/syntax: internal error";
  }
}

std::string GoRegexError(std::string_view code, std::string_view expr) {
  return absl::StrCat("error parsing regexp: ", absl::string_view(code.data(), code.size()), ": `",
                      absl::string_view(expr.data(), expr.size()), "`");
}

// Compiles `pattern` with Go's regexp semantics (RE2's default Perl-like syntax is the same
// language). On failure returns Go's error message.
absl::StatusOr<std::unique_ptr<RE2>> CompileRegex(std::string_view pattern) {
  // RE2 accepts \C (any byte); Go rejects it, and so do we.
  for (size_t i = 0; i + 1 < pattern.size(); ++i) {
    if (pattern[i] != '\\') continue;
    if (pattern[i + 1] == 'C')
      return absl::InvalidArgumentError(GoRegexError("invalid escape sequence", "\\C"));
    ++i;  // skip the escaped character
  }
  RE2::Options options;
  options.set_log_errors(false);
  auto re = std::make_unique<RE2>(re2::StringPiece(pattern.data(), pattern.size()), options);
  if (!re->ok()) {
    const std::string& arg = re->error_arg();
    return absl::InvalidArgumentError(
        GoRegexError(GoRegexErrorCode(re->error_code()),
                     re->error_code() == RE2::ErrorPatternTooLarge || arg.empty() ? pattern : arg));
  }
  return re;
}

// The first match of `re` in `s` at or after byte `pos` (context before `pos` still counts for
// ^ and \b). Returns [start, end) byte offsets, or nullopt.
std::optional<std::pair<size_t, size_t>> MatchAt(const RE2& re, std::string_view s, size_t pos) {
  const re2::StringPiece text(s.data(), s.size());
  re2::StringPiece match;
  if (!re.Match(text, pos, s.size(), RE2::UNANCHORED, &match, 1)) return std::nullopt;
  const size_t start = match.data() == nullptr ? pos : static_cast<size_t>(match.data() - s.data());
  return std::make_pair(start, start + match.size());
}

}  // namespace

// ---------------------------------------------------------------------------------------------

int64_t Size(std::string_view s) {
  int64_t count = 0;
  while (!s.empty()) {
    s.remove_prefix(DecodeRune(s).width);
    ++count;
  }
  return count;
}

bool Contains(std::string_view s, std::string_view substr) {
  return s.find(substr) != std::string_view::npos;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

absl::StatusOr<bool> Matches(std::string_view s, std::string_view pattern) {
  auto re = CompileRegex(pattern);
  if (!re.ok()) return re.status();
  return MatchAt(**re, s, 0).has_value();
}

absl::StatusOr<std::string> CharAt(std::string_view s, int64_t index) {
  const std::vector<char32_t> runes = ToRunes(s);
  if (index < 0 || index > static_cast<int64_t>(runes.size())) return IndexOutOfRange(index);
  if (index == static_cast<int64_t>(runes.size())) return std::string();
  std::string out;
  AppendRune(out, runes[static_cast<size_t>(index)]);
  return out;
}

absl::StatusOr<int64_t> IndexOf(std::string_view s, std::string_view substr) {
  return IndexOf(s, substr, 0);
}

absl::StatusOr<int64_t> IndexOf(std::string_view s, std::string_view substr, int64_t offset) {
  if (offset < 0) return IndexOutOfRange(offset);
  const std::vector<char32_t> runes = ToRunes(s);
  const auto n = static_cast<int64_t>(runes.size());
  if (substr.empty()) return std::min(offset, n);
  if (offset >= n) return -1;
  const std::vector<char32_t> needle = ToRunes(substr);
  const auto m = static_cast<int64_t>(needle.size());
  for (int64_t i = offset; i + m <= n; ++i) {
    if (std::equal(needle.begin(), needle.end(), runes.begin() + i)) return i;
  }
  return -1;
}

absl::StatusOr<int64_t> LastIndexOf(std::string_view s, std::string_view substr) {
  const auto n = static_cast<int64_t>(Size(s));
  if (substr.empty()) return n;
  // cel-go compares byte lengths here, before converting to code points.
  if (s.size() < substr.size()) return -1;
  return LastIndexOf(s, substr, n - 1);
}

absl::StatusOr<int64_t> LastIndexOf(std::string_view s, std::string_view substr, int64_t offset) {
  if (offset < 0) return IndexOutOfRange(offset);
  const std::vector<char32_t> runes = ToRunes(s);
  const auto n = static_cast<int64_t>(runes.size());
  if (substr.empty()) return std::min(offset, n);
  if (offset >= n) return -1;
  const std::vector<char32_t> needle = ToRunes(substr);
  const auto m = static_cast<int64_t>(needle.size());
  for (int64_t i = std::min(offset, n - m); i >= 0; --i) {
    if (std::equal(needle.begin(), needle.end(), runes.begin() + i)) return i;
  }
  return -1;
}

std::string LowerAscii(std::string_view s) {
  std::vector<char32_t> runes = ToRunes(s);
  for (char32_t& r : runes) {
    if (r >= 'A' && r <= 'Z') r += 'a' - 'A';
  }
  return FromRunes(runes.data(), runes.data() + runes.size());
}

std::string UpperAscii(std::string_view s) {
  std::vector<char32_t> runes = ToRunes(s);
  for (char32_t& r : runes) {
    if (r >= 'a' && r <= 'z') r -= 'a' - 'A';
  }
  return FromRunes(runes.data(), runes.data() + runes.size());
}

std::string Replace(std::string_view s, std::string_view from, std::string_view to) {
  return Replace(s, from, to, -1);
}

std::string Replace(std::string_view s, std::string_view from, std::string_view to, int64_t limit) {
  if (from == to || limit == 0) return std::string(s);
  const int64_t occurrences = CountOccurrences(s, from);
  if (occurrences == 0) return std::string(s);
  const int64_t n = (limit < 0 || occurrences < limit) ? occurrences : limit;
  std::string out;
  size_t start = 0;
  for (int64_t i = 0; i < n; ++i) {
    size_t j = start;
    if (from.empty()) {
      if (i > 0) j += DecodeRune(s.substr(start)).width;
    } else {
      j = s.find(from, start);
    }
    out.append(s.substr(start, j - start));
    out.append(to);
    start = j + from.size();
  }
  out.append(s.substr(start));
  return out;
}

std::vector<std::string> Split(std::string_view s, std::string_view separator) {
  return Split(s, separator, -1);
}

std::vector<std::string> Split(std::string_view s, std::string_view separator, int64_t limit) {
  std::vector<std::string> parts;
  if (limit == 0) return parts;
  if (separator.empty()) {
    // Go's explode(): one part per code point, invalid bytes one by one; the last part takes the
    // rest.
    const int64_t runes = Size(s);
    const int64_t n = (limit < 0 || limit > runes) ? runes : limit;
    for (int64_t i = 0; i + 1 < n; ++i) {
      const size_t width = DecodeRune(s).width;
      parts.emplace_back(s.substr(0, width));
      s.remove_prefix(width);
    }
    if (n > 0) parts.emplace_back(s);
    return parts;
  }
  int64_t n = limit < 0 ? CountOccurrences(s, separator) + 1 : limit;
  n = std::min(n, static_cast<int64_t>(s.size()) + 1);
  for (int64_t i = 0; i + 1 < n; ++i) {
    const size_t pos = s.find(separator);
    if (pos == std::string_view::npos) break;
    parts.emplace_back(s.substr(0, pos));
    s.remove_prefix(pos + separator.size());
  }
  parts.emplace_back(s);
  return parts;
}

absl::StatusOr<std::string> Substring(std::string_view s, int64_t start) {
  const std::vector<char32_t> runes = ToRunes(s);
  if (start < 0 || start > static_cast<int64_t>(runes.size())) return IndexOutOfRange(start);
  return FromRunes(runes.data() + start, runes.data() + runes.size());
}

absl::StatusOr<std::string> Substring(std::string_view s, int64_t start, int64_t end) {
  if (start > end) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid substring range. start: ", start, ", end: ", end));
  }
  const std::vector<char32_t> runes = ToRunes(s);
  const auto n = static_cast<int64_t>(runes.size());
  if (start < 0 || start > n) return IndexOutOfRange(start);
  if (end < 0 || end > n) return IndexOutOfRange(end);
  return FromRunes(runes.data() + start, runes.data() + end);
}

std::string Trim(std::string_view s) {
  while (!s.empty()) {
    const Decoded d = DecodeRune(s);
    if (!IsSpace(d.rune)) break;
    s.remove_prefix(d.width);
  }
  while (!s.empty()) {
    const Decoded d = DecodeLastRune(s);
    if (!IsSpace(d.rune)) break;
    s.remove_suffix(d.width);
  }
  return std::string(s);
}

std::string Join(absl::Span<const std::string> parts) { return Join(parts, ""); }

std::string Join(absl::Span<const std::string> parts, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out.append(separator);
    out.append(parts[i]);
  }
  return out;
}

std::string Reverse(std::string_view s) {
  std::vector<char32_t> runes = ToRunes(s);
  std::reverse(runes.begin(), runes.end());
  return FromRunes(runes.data(), runes.data() + runes.size());
}

std::string Quote(std::string_view s) {
  std::string out = "\"";
  while (!s.empty()) {
    const Decoded d = DecodeRune(s);
    if (const char* esc = ControlEscape(d.rune)) {
      out += esc;
      s.remove_prefix(d.width);
      continue;
    }
    switch (d.rune) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      default:
        AppendRune(out, d.rune);  // an invalid byte decodes to, and is written as, U+FFFD
    }
    s.remove_prefix(d.width);
  }
  out += "\"";
  return out;
}

// --- FormatArg -----------------------------------------------------------------------------

FormatArg FormatArg::Null() { return FormatArg(); }

FormatArg FormatArg::Bool(bool value) {
  FormatArg arg;
  arg.kind = Kind::kBool;
  arg.bool_value = value;
  return arg;
}

FormatArg FormatArg::Int(int64_t value) {
  FormatArg arg;
  arg.kind = Kind::kInt;
  arg.int_value = value;
  return arg;
}

FormatArg FormatArg::Uint(uint64_t value) {
  FormatArg arg;
  arg.kind = Kind::kUint;
  arg.uint_value = value;
  return arg;
}

FormatArg FormatArg::Double(double value) {
  FormatArg arg;
  arg.kind = Kind::kDouble;
  arg.double_value = value;
  return arg;
}

namespace {
FormatArg TextArg(FormatArg::Kind kind, std::string text) {
  FormatArg arg;
  arg.kind = kind;
  arg.text = std::move(text);
  return arg;
}
}  // namespace

FormatArg FormatArg::String(std::string value) { return TextArg(Kind::kString, std::move(value)); }
FormatArg FormatArg::Bytes(std::string value) { return TextArg(Kind::kBytes, std::move(value)); }
FormatArg FormatArg::Type(std::string name) { return TextArg(Kind::kType, std::move(name)); }
FormatArg FormatArg::Timestamp(std::string text) {
  return TextArg(Kind::kTimestamp, std::move(text));
}
FormatArg FormatArg::Duration(std::string text) {
  return TextArg(Kind::kDuration, std::move(text));
}
FormatArg FormatArg::Other(std::string type_name) {
  return TextArg(Kind::kOther, std::move(type_name));
}

FormatArg FormatArg::List(std::vector<FormatArg> elements) {
  FormatArg arg;
  arg.kind = Kind::kList;
  arg.elements = std::move(elements);
  return arg;
}

FormatArg FormatArg::Map(std::vector<MapEntry> entries) {
  FormatArg arg;
  arg.kind = Kind::kMap;
  arg.entries = std::move(entries);
  return arg;
}

std::string FormatArg::TypeName() const {
  switch (kind) {
    case Kind::kNull:
      return "null_type";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kUint:
      return "uint";
    case Kind::kDouble:
      return "double";
    case Kind::kString:
      return "string";
    case Kind::kBytes:
      return "bytes";
    case Kind::kList:
      return "list";
    case Kind::kMap:
      return "map";
    case Kind::kType:
      return "type";
    case Kind::kTimestamp:
      return "google.protobuf.Timestamp";
    case Kind::kDuration:
      return "google.protobuf.Duration";
    case Kind::kOther:
      return text;
  }
  return text;
}

// --- Format --------------------------------------------------------------------------------

absl::StatusOr<std::string> Format(std::string_view format, absl::Span<const FormatArg> args) {
  std::string out;
  size_t arg_index = 0;
  size_t i = 0;
  while (i < format.size()) {
    if (format[i] != '%') {
      out.push_back(format[i++]);
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '%') {
      out.push_back('%');
      i += 2;
      continue;
    }
    // cel-go fetches the argument before looking at the clause.
    if (arg_index >= args.size()) {
      return absl::InvalidArgumentError(absl::StrCat("index ", arg_index, " out of range"));
    }
    if (i + 1 >= format.size()) return absl::InvalidArgumentError("unexpected end of string");
    size_t j = i + 1;
    std::optional<int64_t> precision;
    if (format[j] == '.') {
      const size_t digits_begin = ++j;
      while (j < format.size() && format[j] >= '0' && format[j] <= '9') ++j;
      if (j >= format.size()) {
        return ParseClauseError(
            "error while parsing precision: could not find end of precision specifier");
      }
      const std::string_view digits = format.substr(digits_begin, j - digits_begin);
      int64_t value = 0;
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
      if (digits.empty() || ec != std::errc()) {
        return ParseClauseError(absl::StrCat(
            "error while parsing precision: error while converting precision to integer: "
            "strconv.Atoi: parsing ",
            GoQuote(digits), digits.empty() ? ": invalid syntax" : ": value out of range"));
      }
      if (value > kMaxPrecision) {
        return ParseClauseError(absl::StrCat("error while parsing precision: precision ", value,
                                             " exceeds the supported maximum of ", kMaxPrecision));
      }
      precision = value;
    }
    const char verb = format[j++];
    const FormatArg& arg = args[arg_index];
    absl::StatusOr<std::string> clause;
    switch (verb) {
      case 's':
        clause = FormatStringClause(arg);
        break;
      case 'd':
        clause = FormatDecimalClause(arg);
        break;
      case 'f':
        clause = FormatFixedClause(arg, static_cast<int>(precision.value_or(6)));
        break;
      case 'e':
        clause = FormatScientificClause(arg, static_cast<int>(precision.value_or(6)));
        break;
      case 'b':
        clause = FormatBinaryClause(arg);
        break;
      case 'x':
      case 'X':
        clause = FormatHexClause(arg, verb == 'X');
        break;
      case 'o':
        clause = FormatOctalClause(arg);
        break;
      default: {
        // Go prints the offending byte with %c, i.e. as the code point of the same value.
        std::string shown;
        AppendRune(shown, static_cast<unsigned char>(verb));
        return ParseClauseError("unrecognized formatting clause \"" + shown + "\"");
      }
    }
    if (!clause.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("error during formatting: ", clause.status().message()));
    }
    out += *clause;
    i = j;
    ++arg_index;
  }
  return out;
}

// --- Kubernetes library.Regex --------------------------------------------------------------

absl::StatusOr<std::string> Find(std::string_view s, std::string_view pattern) {
  auto re = CompileRegex(pattern);
  if (!re.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("Illegal regex: ", re.status().message()));
  }
  const auto match = MatchAt(**re, s, 0);
  if (!match) return std::string();
  return std::string(s.substr(match->first, match->second - match->first));
}

absl::StatusOr<std::vector<std::string>> FindAll(std::string_view s, std::string_view pattern,
                                                 int64_t limit) {
  auto re = CompileRegex(pattern);
  if (!re.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("Illegal regex: ", re.status().message()));
  }
  // Go's Regexp.allMatches.
  const int64_t n = limit < 0 ? static_cast<int64_t>(s.size()) + 1 : limit;
  std::vector<std::string> result;
  size_t pos = 0;
  std::optional<size_t> prev_match_end;
  while (static_cast<int64_t>(result.size()) < n && pos <= s.size()) {
    const auto match = MatchAt(**re, s, pos);
    if (!match) break;
    bool accept = true;
    if (match->second == pos) {
      // An empty match right after the previous match is not reported.
      if (prev_match_end && match->first == *prev_match_end) accept = false;
      pos += pos < s.size() ? DecodeRune(s.substr(pos)).width : 1;
    } else {
      pos = match->second;
    }
    prev_match_end = match->second;
    if (accept) result.emplace_back(s.substr(match->first, match->second - match->first));
  }
  return result;
}

}  // namespace qm::cel::strings
