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
#include "cel/strings_internal.h"
#include "re2/re2.h"

namespace qm::cel::strings {

using namespace internal;  // NOLINT(google-build-using-namespace)

namespace {

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

std::string internal::GoQuote(std::string_view s) {
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
