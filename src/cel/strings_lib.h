#pragma once

// CEL string functions as plain C++ over UTF-8 std::string, for the evaluator to wrap:
//
//   * the CEL standard string functions (size, contains, startsWith, endsWith, matches);
//   * cel-go's ext.Strings library as Kubernetes' base environment configures it
//     (ext.StringsVersion(2): charAt, indexOf, lastIndexOf, lowerAscii, upperAscii, replace,
//     split, substring, trim, join, strings.quote, format), plus reverse() from version 3;
//   * Kubernetes' library.Regex functions find and findAll.
//
// Semantics follow cel-go master (github.com/cel-expr/cel-go ext/strings.go and
// ext/formatting.go, 2026) and Go's strings/strconv/regexp packages that cel-go delegates to.
//
// Positions and sizes are counted in Unicode code points. Error results carry cel-go's message
// text (e.g. "index out of range: 10"); the status code is always InvalidArgument, since CEL
// itself has a single error kind. Nothing here throws, and no function keeps state between
// calls: all functions are thread-safe.
//
// Invalid UTF-8 never crashes or errors (except where noted). As in cel-go, which converts
// strings with Go's []rune(s), every byte that is not part of a well-formed UTF-8 sequence counts
// as one code point, U+FFFD:
//   * functions that build a result from code points (CharAt, Substring, LowerAscii, UpperAscii,
//     Reverse, Quote) write U+FFFD (EF BF BD) for such a byte;
//   * functions that copy or slice bytes (Contains, Replace, Split, Trim, Join, Find, FindAll,
//     Format's %s of a string) keep the bytes unchanged;
//   * IndexOf/LastIndexOf compare code points, so a stray byte in the haystack matches a U+FFFD
//     in the needle.
//
// Regular expressions use RE2, whose syntax is the one Go's regexp package implements. Pattern
// errors are reported in Go's words ("error parsing regexp: missing closing ): `(a`"). Patterns
// are compiled on every call; callers that evaluate the same pattern often should cache above
// this layer.
//
// Version notes: indexOf/lastIndexOf follow cel-go after PR #1052 (2024: an offset past the end
// gives -1, not an error) and PR #1335 (2026-06: an empty needle also rejects a negative offset and
// clamps a large one to the length). cel-go releases before #1335, which Kubernetes 1.34-1.36
// vendor, give 'tacocat'.indexOf('', 30) == 30 and 'tacocat'.indexOf('', -1) == -1.
//
// Deviations from cel-go, all in corner cases:
//   * Format: a precision above 255 is an error here (cel-go truncates it to 8 bits inside
//     golang.org/x/text and prints a mix of the two values).
//   * Quote inside Format (lists and maps): Go's strconv.IsPrint is approximated; unassigned code
//     points outside the ranges listed in strings_lib.cc are treated as printable.
//   * Regex: RE2 (2022-06) rejects Go 1.22's (?<name>...) capture syntax; `\C` is rejected here
//     exactly as Go does.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace qm::cel::strings {

// --- CEL standard functions -----------------------------------------------------------------

// size(string): the number of code points (an invalid byte counts as one).
int64_t Size(std::string_view s);

// string.contains/startsWith/endsWith: byte-wise substring tests (an empty needle always matches).
bool Contains(std::string_view s, std::string_view substr);
bool StartsWith(std::string_view s, std::string_view prefix);
bool EndsWith(std::string_view s, std::string_view suffix);

// string.matches(regex): true if the RE2 pattern matches any part of `s` (partial match, like
// Go's regexp.MatchString; anchor with ^...$ for a full match). Error: the pattern is invalid
// (Go's message, e.g. "error parsing regexp: missing closing ]: `[a`").
absl::StatusOr<bool> Matches(std::string_view s, std::string_view pattern);

// --- ext.Strings ------------------------------------------------------------------------------

// 'hello'.charAt(4) == 'o'; charAt(size) == ''. Error "index out of range: <i>" when index < 0 or
// index > Size(s).
absl::StatusOr<std::string> CharAt(std::string_view s, int64_t index);

// The code point index of the first occurrence of `substr` at or after `offset`, or -1.
// An empty `substr` yields `offset` (clamped to Size(s)); an offset >= Size(s) with a non-empty
// `substr` yields -1. Error "index out of range: <offset>" when offset < 0.
// 'hello mellow'.indexOf('ello', 2) == 7.
absl::StatusOr<int64_t> IndexOf(std::string_view s, std::string_view substr);
absl::StatusOr<int64_t> IndexOf(std::string_view s, std::string_view substr, int64_t offset);

// The code point index of the last occurrence of `substr` that starts at or before `offset`, or
// -1. Without an offset the search covers the whole string and an empty `substr` yields Size(s).
// With an offset: an empty `substr` yields `offset` (clamped to Size(s)); an offset >= Size(s)
// with a non-empty `substr` yields -1 (as cel-go does). Error "index out of range: <offset>" when
// offset < 0. 'hello mellow'.lastIndexOf('ello', 6) == 1.
absl::StatusOr<int64_t> LastIndexOf(std::string_view s, std::string_view substr);
absl::StatusOr<int64_t> LastIndexOf(std::string_view s, std::string_view substr, int64_t offset);

// ASCII-only case mapping; other code points are kept ('TacoCÆt'.lowerAscii() == 'tacocÆt').
std::string LowerAscii(std::string_view s);
std::string UpperAscii(std::string_view s);

// Replaces occurrences of `from` by `to`, left to right, without overlap. `limit` bounds the
// number of replacements: 0 = none, negative = all. An empty `from` matches at the start and after
// every code point ('ab'.replace('', '_') == '_a_b_'). Go's strings.Replace.
std::string Replace(std::string_view s, std::string_view from, std::string_view to);
std::string Replace(std::string_view s, std::string_view from, std::string_view to, int64_t limit);

// Splits around `separator` (Go's strings.SplitN). `limit` bounds the number of parts: 0 gives an
// empty list, 1 the whole string, negative no bound; the last part holds the unsplit rest. An
// empty separator splits into code points (invalid bytes one by one, unchanged); ''.split('')
// is [] while ''.split(',') is [''].
std::vector<std::string> Split(std::string_view s, std::string_view separator);
std::vector<std::string> Split(std::string_view s, std::string_view separator, int64_t limit);

// Code point range [start, end) / [start, Size(s)). Errors: "invalid substring range. start: <s>,
// end: <e>" when start > end (checked first), otherwise "index out of range: <i>" for the first
// of start, end that is < 0 or > Size(s).
absl::StatusOr<std::string> Substring(std::string_view s, int64_t start);
absl::StatusOr<std::string> Substring(std::string_view s, int64_t start, int64_t end);

// Removes leading and trailing Unicode white space (Go's strings.TrimSpace: \t \n \v \f \r, space,
// U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000). Zero-width
// characters such as U+200B and U+FEFF are not white space.
std::string Trim(std::string_view s);

// ['a', 'b'].join() == 'ab'; ['a', 'b'].join('-') == 'a-b'; [].join('-') == ''.
std::string Join(absl::Span<const std::string> parts);
std::string Join(absl::Span<const std::string> parts, std::string_view separator);

// The code points in reverse order ('gums'.reverse() == 'smug'). ext.Strings version 3.
std::string Reverse(std::string_view s);

// strings.quote(s): wraps `s` in double quotes and escapes \a \b \f \n \r \t \v, backslash and
// double quote; every other code point is copied as is. Invalid bytes become U+FFFD.
std::string Quote(std::string_view s);

// One argument of Format(), already converted from a CEL value by the caller.
struct FormatArg {
  enum class Kind {
    kNull,
    kBool,
    kInt,
    kUint,
    kDouble,
    kString,
    kBytes,
    kList,
    kMap,
    kType,       // a CEL type value; `text` is its name ("int", "string", ...)
    kTimestamp,  // `text` is cel-go's string conversion ("2023-02-03T23:31:20Z")
    kDuration,   // `text` is cel-go's string conversion ("6347s")
    kOther,      // any other value (e.g. a Quantity); `text` is its CEL type name
  };
  struct MapEntry;

  static FormatArg Null();
  static FormatArg Bool(bool value);
  static FormatArg Int(int64_t value);
  static FormatArg Uint(uint64_t value);
  static FormatArg Double(double value);
  static FormatArg String(std::string value);
  static FormatArg Bytes(std::string value);
  static FormatArg List(std::vector<FormatArg> elements);
  // Entries in the map's iteration order; Format sorts them by their rendered keys.
  static FormatArg Map(std::vector<MapEntry> entries);
  static FormatArg Type(std::string name);
  static FormatArg Timestamp(std::string text);
  static FormatArg Duration(std::string text);
  static FormatArg Other(std::string type_name);

  // The CEL type name used in error messages ("int", "null_type", "google.protobuf.Duration").
  std::string TypeName() const;

  Kind kind = Kind::kNull;
  bool bool_value = false;
  int64_t int_value = 0;
  uint64_t uint_value = 0;
  double double_value = 0;
  std::string text;  // kString, kBytes (raw bytes), kType, kTimestamp, kDuration, kOther
  std::vector<FormatArg> elements;  // kList
  std::vector<MapEntry> entries;    // kMap
};

struct FormatArg::MapEntry {
  FormatArg key;
  FormatArg value;
};

// "<format>".format(args), ext.Strings versions 1-3 with the en_US locale (cel-go's default,
// which is what Kubernetes gets). Clauses, each consuming the next argument:
//   %s  any supported value: strings as is, ints/uints in decimal, doubles in Go's shortest form
//       ("2.71", "2e-09", "+Inf"), bools, null, bytes as text, types by name; lists as
//       [e1, e2] and maps as {k:v, k2:v2} (sorted by rendered key) with strings quoted, bytes as
//       b"...", doubles as %.6f and timestamps/durations as timestamp("...")/duration("...").
//   %d  int/uint in decimal.
//   %f  %.<p>f  double (or the strings "NaN", "Infinity", "-Infinity"), p fraction digits
//       (default 6), with en_US digit grouping: 1234.5 -> "1,234.500000"; NaN -> "NaN",
//       infinities -> "∞" / "-∞".
//   %e  double in golang.org/x/text's scientific form, always 6 fraction digits:
//       2.71828 -> "2.718280\u202f×\u202f10⁰⁰". cel-go passes the precision as a field width, so
//       %.<p>e left-pads the result with spaces to p code points (default 6; %.0e: none).
//   %b %o %x %X  int/uint in binary/octal/hex (negative with a leading '-'); %b also takes bools
//       (1/0); %x/%X also take strings and bytes (hex of each byte).
//   %%  a literal '%'.
// A precision is accepted (and ignored) on every clause.
// Errors (cel-go's words): "index <i> out of range" (more clauses than arguments),
// "unexpected end of string" (trailing '%'), "could not parse formatting clause: unrecognized
// formatting clause \"<c>\"", "could not parse formatting clause: error while parsing precision:
// ...", "error during formatting: decimal clause can only be used on integers, was given double"
// and the like for a type that does not fit the clause. Unused arguments are ignored (cel-go
// rejects them only at compile time, for literal lists).
absl::StatusOr<std::string> Format(std::string_view format, absl::Span<const FormatArg> args);

// --- Kubernetes library.Regex -----------------------------------------------------------------

// string.find(regex): the leftmost match ("" if none; an empty match counts, so
// 'abc 123'.find('[0-9]*') == ''). Error "Illegal regex: <Go's message>" for a bad pattern.
absl::StatusOr<std::string> Find(std::string_view s, std::string_view pattern);

// string.findAll(regex[, limit]): successive non-overlapping matches, like Go's
// Regexp.FindAllString: an empty match right after the previous match is skipped. At most `limit`
// matches; a negative limit means all, 0 gives an empty list. Error as for Find.
absl::StatusOr<std::vector<std::string>> FindAll(std::string_view s, std::string_view pattern,
                                                 int64_t limit = -1);

}  // namespace qm::cel::strings
