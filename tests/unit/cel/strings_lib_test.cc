#include "cel/strings_lib.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

// Expectations come from cel-go's ext/strings.go documentation, ext/strings_test.go and
// ext/formatting_test.go (the locale-based formatter of strings versions 1-3), from Go's
// strings/strconv/regexp behaviour that cel-go delegates to, and from the examples in
// Kubernetes' library/regex.go where they agree with Go.

namespace qm::cel::strings {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A value or an error message, printable in failure output.
template <typename T>
std::string Describe(const absl::StatusOr<T>& result);

std::string DescribeValue(const std::string& s) { return "'" + s + "'"; }
std::string DescribeValue(int64_t v) { return std::to_string(v); }
std::string DescribeValue(bool v) { return v ? "true" : "false"; }
std::string DescribeValue(const std::vector<std::string>& parts) {
  std::string out = "[";
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += ", ";
    out += DescribeValue(parts[i]);
  }
  return out + "]";
}

template <typename T>
std::string Describe(const absl::StatusOr<T>& result) {
  if (!result.ok()) return "error: " + std::string(result.status().message());
  return DescribeValue(*result);
}

// Expected outcomes in the same notation.
std::string Ok(const std::string& s) { return DescribeValue(s); }
std::string Ok(int64_t v) { return DescribeValue(v); }
std::string Ok(const std::vector<std::string>& parts) { return DescribeValue(parts); }
std::string Err(const std::string& message) { return "error: " + message; }

// U+FFFD, what a code-point function writes for an invalid byte.
constexpr char kReplacement[] = "\xEF\xBF\xBD";

TEST(StringsLibTest, SizeCountsCodePoints) {
  const struct {
    std::string s;
    int64_t want;
  } cases[] = {
      {"", 0},
      {"hello", 5},
      {"é", 1},
      {"日本", 2},
      {"😀", 1},
      {"a😀b", 3},
      {"\xff", 1},
      {"a\xe2\x82", 3},     // truncated sequence
      {"\xed\xa0\x80", 3},  // encoded surrogate
  };
  for (const auto& c : cases) EXPECT_EQ(Size(c.s), c.want) << c.s;
}

TEST(StringsLibTest, ContainsStartsWithEndsWith) {
  EXPECT_TRUE(Contains("hello", "ell"));
  EXPECT_TRUE(Contains("hello", ""));
  EXPECT_FALSE(Contains("hello", "lo!"));
  EXPECT_TRUE(Contains("日本語", "本"));
  EXPECT_TRUE(StartsWith("hello", "he"));
  EXPECT_TRUE(StartsWith("hello", ""));
  EXPECT_FALSE(StartsWith("he", "hello"));
  EXPECT_TRUE(StartsWith("éa", "é"));
  EXPECT_TRUE(EndsWith("hello", "llo"));
  EXPECT_TRUE(EndsWith("", ""));
  EXPECT_FALSE(EndsWith("lo", "hello"));
  EXPECT_TRUE(EndsWith("a😀", "😀"));
}

TEST(StringsLibTest, MatchesIsAPartialMatch) {
  const struct {
    std::string s, pattern, want;
  } cases[] = {
      {"hello", "ell", "true"},
      {"hello", "^ell", "false"},
      {"hello", "^h.*o$", "true"},
      {"hello", "", "true"},
      {"fish", "[^a]?sym", "false"},  // from dra/cel/compile_test.go
      {"asymmetric", "[^a]?sym", "true"},
      {"日本", "^..$", "true"},  // '.' is one code point
      {"line1\nline2", "^line2", "false"},
      {"ABC", "(?i)abc", "true"},
      {"a.b", "a\\.b", "true"},
      {"hello", "(a", Err("error parsing regexp: missing closing ): `(a`")},
      {"hello", "[a", Err("error parsing regexp: missing closing ]: `[a`")},
      {"hello", "a**", Err("error parsing regexp: invalid nested repetition operator: `**`")},
      {"hello", "*", Err("error parsing regexp: missing argument to repetition operator: `*`")},
      {"hello", "a)", Err("error parsing regexp: unexpected ): `a)`")},
      {"hello", "\\C", Err("error parsing regexp: invalid escape sequence: `\\C`")},
      {"hello", "\\q", Err("error parsing regexp: invalid escape sequence: `\\q`")},
      {"hello", "[z-a]", Err("error parsing regexp: invalid character class range: `z-a`")},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(Describe(Matches(c.s, c.pattern)), c.want) << c.s << " matches " << c.pattern;
  }
}

TEST(StringsLibTest, CharAt) {
  const struct {
    std::string s;
    int64_t index;
    std::string want;
  } cases[] = {
      {"hello", 4, Ok("o")},
      {"hello", 5, Ok("")},
      {"hello", -1, Err("index out of range: -1")},
      {"tacocat", 3, Ok("o")},
      {"tacocat", 7, Ok("")},
      {"tacocat", 30, Err("index out of range: 30")},
      {"©αT", 0, Ok("©")},
      {"©αT", 1, Ok("α")},
      {"©αT", 2, Ok("T")},
      {"日本", 1, Ok("本")},
      {"a😀b", 1, Ok("😀")},
      {"a😀b", 2, Ok("b")},
      {"a\xff", 1, Ok(kReplacement)},
      {"", 0, Ok("")},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(Describe(CharAt(c.s, c.index)), c.want) << c.s << ".charAt(" << c.index << ")";
  }
}

TEST(StringsLibTest, IndexOf) {
  const struct {
    std::string s, substr;
    std::optional<int64_t> offset;
    std::string want;
  } cases[] = {
      // ext/strings.go documentation.
      {"hello mellow", "", std::nullopt, Ok(0)},
      {"hello mellow", "ello", std::nullopt, Ok(1)},
      {"hello mellow", "jello", std::nullopt, Ok(-1)},
      {"hello mellow", "", 2, Ok(2)},
      {"hello mellow", "ello", 2, Ok(7)},
      {"hello mellow", "ello", 20, Ok(-1)},
      {"hello mellow", "ello", -1, Err("index out of range: -1")},
      // ext/strings_test.go.
      {"tacocat", "", std::nullopt, Ok(0)},
      {"tacocat", "ac", std::nullopt, Ok(1)},
      {"tacocat", "none", std::nullopt, Ok(-1)},
      {"tacocat", "", 3, Ok(3)},
      {"tacocat", "a", 3, Ok(5)},
      {"tacocat", "at", 3, Ok(5)},
      {"ta©o©αT", "©", std::nullopt, Ok(2)},
      {"ta©o©αT", "©", 3, Ok(4)},
      {"ta©o©αT", "©αT", 3, Ok(4)},
      {"ta©o©αT", "©α", 5, Ok(-1)},
      {"ijk", "k", std::nullopt, Ok(2)},
      {"hello wello", "hello wello", std::nullopt, Ok(0)},
      {"hello wello", "ello", 6, Ok(7)},
      {"hello wello", "elbo room!!", std::nullopt, Ok(-1)},
      {"hello wello", "elbo room!!!", std::nullopt, Ok(-1)},
      {"tacocat", "a", 30, Ok(-1)},
      {"tacocat", "", 7, Ok(7)},
      {"tacocat", "", 30, Ok(7)},
      {"tacocat", "", -1, Err("index out of range: -1")},
      // Multi-byte positions are code points.
      {"日本語", "語", std::nullopt, Ok(2)},
      {"😀a😀a", "a", 2, Ok(3)},
      {"éé", "é", 1, Ok(1)},
      {"", "a", std::nullopt, Ok(-1)},
      {"", "", std::nullopt, Ok(0)},
      // An invalid byte is U+FFFD.
      {"a\xffz", "z", std::nullopt, Ok(2)},
      {"a\xffz", "\xEF\xBF\xBD", std::nullopt, Ok(1)},
  };
  for (const auto& c : cases) {
    const auto got = c.offset ? IndexOf(c.s, c.substr, *c.offset) : IndexOf(c.s, c.substr);
    EXPECT_EQ(Describe(got), c.want)
        << "'" << c.s << "'.indexOf('" << c.substr << "', " << c.offset.value_or(-999) << ")";
  }
}

TEST(StringsLibTest, LastIndexOf) {
  const struct {
    std::string s, substr;
    std::optional<int64_t> offset;
    std::string want;
  } cases[] = {
      // ext/strings.go documentation.
      {"hello mellow", "", std::nullopt, Ok(12)},
      {"hello mellow", "ello", std::nullopt, Ok(7)},
      {"hello mellow", "jello", std::nullopt, Ok(-1)},
      {"hello mellow", "ello", 6, Ok(1)},
      {"hello mellow", "ello", 20, Ok(-1)},
      {"hello mellow", "ello", -1, Err("index out of range: -1")},
      // ext/strings_test.go.
      {"", "@@", std::nullopt, Ok(-1)},
      {"tacocat", "", std::nullopt, Ok(7)},
      {"tacocat", "at", std::nullopt, Ok(5)},
      {"tacocat", "none", std::nullopt, Ok(-1)},
      {"tacocat", "", 3, Ok(3)},
      {"tacocat", "a", 3, Ok(1)},
      {"ta©o©αT", "©", std::nullopt, Ok(4)},
      {"ta©o©αT", "©", 3, Ok(2)},
      {"ta©o©αT", "©α", 4, Ok(4)},
      {"hello wello", "ello", 6, Ok(1)},
      {"hello wello", "low", std::nullopt, Ok(-1)},
      {"hello wello", "elbo room!!", std::nullopt, Ok(-1)},
      {"hello wello", "elbo room!!!", std::nullopt, Ok(-1)},
      {"hello wello", "hello wello", std::nullopt, Ok(0)},
      {"bananananana", "nana", 7, Ok(6)},
      {"tacocat", "a", -1, Err("index out of range: -1")},
      {"tacocat", "a", 30, Ok(-1)},
      {"tacocat", "", 7, Ok(7)},
      {"tacocat", "", 30, Ok(7)},
      {"tacocat", "", -1, Err("index out of range: -1")},
      // Multi-byte positions are code points.
      {"日本日本", "日", std::nullopt, Ok(2)},
      {"😀a😀a", "😀", 1, Ok(0)},
      {"aé", "é", std::nullopt, Ok(1)},
      // cel-go compares byte lengths first: a 1-byte haystack cannot hold a 3-byte needle.
      {"\xff", "\xEF\xBF\xBD", std::nullopt, Ok(-1)},
  };
  for (const auto& c : cases) {
    const auto got = c.offset ? LastIndexOf(c.s, c.substr, *c.offset) : LastIndexOf(c.s, c.substr);
    EXPECT_EQ(Describe(got), c.want)
        << "'" << c.s << "'.lastIndexOf('" << c.substr << "', " << c.offset.value_or(-999) << ")";
  }
}

TEST(StringsLibTest, LowerAndUpperAsciiLeaveOtherCodePoints) {
  EXPECT_EQ(LowerAscii("TacoCat"), "tacocat");
  EXPECT_EQ(LowerAscii("TacoCÆt"), "tacocÆt");
  EXPECT_EQ(LowerAscii("TacoCÆt Xii"), "tacocÆt xii");
  EXPECT_EQ(LowerAscii("ÀÉ 日本 A"), "ÀÉ 日本 a");
  EXPECT_EQ(UpperAscii("TacoCat"), "TACOCAT");
  EXPECT_EQ(UpperAscii("tacoCat"), "TACOCAT");
  EXPECT_EQ(UpperAscii("tacoCαt"), "TACOCαT");
  EXPECT_EQ(UpperAscii("TacoCÆt Xii"), "TACOCÆT XII");
  EXPECT_EQ(LowerAscii(""), "");
  // Invalid bytes come out as U+FFFD, as Go's string([]rune(s)) writes them.
  EXPECT_EQ(LowerAscii("A\xff"
                       "B"),
            absl::StrCat("a", kReplacement, "b"));
  EXPECT_EQ(UpperAscii("a\xc3"), absl::StrCat("A", kReplacement));
}

TEST(StringsLibTest, Replace) {
  const struct {
    std::string s, from, to;
    std::optional<int64_t> limit;
    std::string want;
  } cases[] = {
      {"hello hello", "he", "we", std::nullopt, "wello wello"},
      {"hello hello", "he", "we", -1, "wello wello"},
      {"hello hello", "he", "we", 1, "wello hello"},
      {"hello hello", "he", "we", 0, "hello hello"},
      {"hello hello", "he", "we", 5, "wello wello"},
      {"hello hello", "", "_", std::nullopt, "_h_e_l_l_o_ _h_e_l_l_o_"},
      {"hello hello", "h", "", std::nullopt, "ello ello"},
      {"12 days 12 hours", "{0}", "2", std::nullopt, "12 days 12 hours"},
      {"{0} days {0} hours", "{0}", "2", std::nullopt, "2 days 2 hours"},
      {"{0} days {0} hours", "{0}", "2", 1, "2 days {0} hours"},
      {"1 ©αT taco", "αT", "o©α", std::nullopt, "1 ©o©α taco"},
      {"aaaa", "aa", "b", std::nullopt, "bb"},
      {"hello hello", "", "_", 2, "_h_ello hello"},
      {"日本", "", "|", std::nullopt, "|日|本|"},
      {"", "", "x", std::nullopt, "x"},
      {"abc", "abc", "abc", std::nullopt, "abc"},
      // Bytes are copied, not decoded: an invalid byte stays as it is.
      {"a\xff"
       "b",
       "", "|", std::nullopt, "|a|\xff|b|"},
      {"a\xff"
       "b",
       "b", "c", std::nullopt,
       "a\xff"
       "c"},
  };
  for (const auto& c : cases) {
    const std::string got =
        c.limit ? Replace(c.s, c.from, c.to, *c.limit) : Replace(c.s, c.from, c.to);
    EXPECT_EQ(got, c.want) << "'" << c.s << "'.replace('" << c.from << "', '" << c.to << "', "
                           << c.limit.value_or(-999) << ")";
  }
  // "{0} days {0} hours".replace("{0}", "2", 1).replace("{0}", "23") from ext/strings_test.go.
  EXPECT_EQ(Replace(Replace("{0} days {0} hours", "{0}", "2", 1), "{0}", "23"), "2 days 23 hours");
}

TEST(StringsLibTest, Split) {
  using Parts = std::vector<std::string>;
  const struct {
    std::string s, separator;
    std::optional<int64_t> limit;
    Parts want;
  } cases[] = {
      {"hello hello hello", " ", std::nullopt, {"hello", "hello", "hello"}},
      {"hello hello hello", " ", 0, {}},
      {"hello hello hello", " ", 1, {"hello hello hello"}},
      {"hello hello hello", " ", 2, {"hello", "hello hello"}},
      {"hello hello hello", " ", -1, {"hello", "hello", "hello"}},
      {"hello world", " ", std::nullopt, {"hello", "world"}},
      {"hello world events!", " ", 0, {}},
      {"hello world events!", " ", 1, {"hello world events!"}},
      {"o©o©o©o", "©", -1, {"o", "o", "o", "o"}},
      {"a,b", ",", 5, {"a", "b"}},
      {"a,b,", ",", std::nullopt, {"a", "b", ""}},
      {"", ",", std::nullopt, {""}},
      {"", "", std::nullopt, {}},
      {"no separator", ",", std::nullopt, {"no separator"}},
      // dra/cel/compile_test.go: services.split("example").size() >= 2.
      {"example.com/example", "example", std::nullopt, {"", ".com/", ""}},
      // An empty separator splits into code points; the last part takes the rest.
      {"日本語", "", std::nullopt, {"日", "本", "語"}},
      {"abc", "", 2, {"a", "bc"}},
      {"a😀", "", -1, {"a", "😀"}},
      {"a\xff"
       "b",
       "",
       std::nullopt,
       {"a", "\xff", "b"}},
  };
  for (const auto& c : cases) {
    const Parts got = c.limit ? Split(c.s, c.separator, *c.limit) : Split(c.s, c.separator);
    EXPECT_EQ(got, c.want) << "'" << c.s << "'.split('" << c.separator << "', "
                           << c.limit.value_or(-999) << ")";
  }
}

TEST(StringsLibTest, Substring) {
  const struct {
    std::string s;
    int64_t start;
    std::optional<int64_t> end;
    std::string want;
  } cases[] = {
      {"tacocat", 4, std::nullopt, Ok("cat")},
      {"tacocat", 0, 4, Ok("taco")},
      {"tacocat", -1, std::nullopt, Err("index out of range: -1")},
      {"tacocat", 2, 1, Err("invalid substring range. start: 2, end: 1")},
      {"tacocat", 7, std::nullopt, Ok("")},
      {"tacocat", 4, 4, Ok("")},
      {"ta©o©αT", 2, 6, Ok("©o©α")},
      {"ta©o©αT", 7, 7, Ok("")},
      {"tacocat", 40, std::nullopt, Err("index out of range: 40")},
      {"tacocat", 1, 50, Err("index out of range: 50")},
      {"tacocat", 49, 50, Err("index out of range: 49")},
      {"tacocat", 4, 3, Err("invalid substring range. start: 4, end: 3")},
      {"tacocat", -2, -1, Err("index out of range: -2")},
      {"hello", 1, 3, Ok("el")},
      {"a😀b", 1, 2, Ok("😀")},
      {"日本語", 1, std::nullopt, Ok("本語")},
      {"a\xff"
       "b",
       1, 2, Ok(kReplacement)},
  };
  for (const auto& c : cases) {
    const auto got = c.end ? Substring(c.s, c.start, *c.end) : Substring(c.s, c.start);
    EXPECT_EQ(Describe(got), c.want)
        << "'" << c.s << "'.substring(" << c.start << ", " << c.end.value_or(-999) << ")";
  }
}

TEST(StringsLibTest, TrimRemovesUnicodeWhiteSpaceOnly) {
  const struct {
    std::string s, want;
  } cases[] = {
      {"  \ttrim\n    ", "trim"},
      {" \ttrim\n ", "trim"},
      {" \f\n\r\t\vtext  ", "text"},
      {"\u0085\u00a0\u1680text", "text"},
      {"text\u2000\u2001\u2002\u2003\u2004\u2004\u2006\u2007\u2008\u2009", "text"},
      {"\u200atext\u2028\u2029\u202F\u205F\u3000", "text"},
      // Zero-width characters are not white space.
      {"\u180etext\u200b\u200c\u200d\u2060\ufeff", "\u180etext\u200b\u200c\u200d\u2060\ufeff"},
      {"   ", ""},
      {"", ""},
      {" inner  space ", "inner  space"},
      // Invalid bytes are not white space and are kept as they are.
      {"  \xff  ", "\xff"},
      {"\xff text \xff", "\xff text \xff"},
  };
  for (const auto& c : cases) EXPECT_EQ(Trim(c.s), c.want) << c.s;
}

TEST(StringsLibTest, Join) {
  EXPECT_EQ(Join({"hello", "mellow"}), "hellomellow");
  EXPECT_EQ(Join({"hello", "mellow"}, " "), "hello mellow");
  EXPECT_EQ(Join({}), "");
  EXPECT_EQ(Join({}, "/"), "");
  EXPECT_EQ(Join({"x", "y"}, "-"), "x-y");
  EXPECT_EQ(Join({"only"}, ", "), "only");
  EXPECT_EQ(Join({"日", "本"}, "·"), "日·本");
}

TEST(StringsLibTest, ReverseReversesCodePoints) {
  const struct {
    std::string s, want;
  } cases[] = {
      {"gums", "smug"},
      {"palindromes", "semordnilap"},
      {"John Smith", "htimS nhoJ"},
      {"u180etext", "txete081u"},
      {"2600+U", "U+0062"},
      {"\u180e\u200b\u200c\u200d\u2060\ufeff", "\ufeff\u2060\u200d\u200c\u200b\u180e"},
      {"日本😀", "😀本日"},
      {"", ""},
      {"a\xff", absl::StrCat(kReplacement, "a")},
  };
  for (const auto& c : cases) EXPECT_EQ(Reverse(c.s), c.want) << c.s;
}

TEST(StringsLibTest, QuoteEscapesCelEscapeSequences) {
  const struct {
    std::string s, want;
  } cases[] = {
      {"first\nsecond", "\"first\\nsecond\""},
      {"bell\a", "\"bell\\a\""},
      {"\bbackspace", "\"\\bbackspace\""},
      {"\fform feed", "\"\\fform feed\""},
      {"carriage \r return", "\"carriage \\r return\""},
      {"horizontal tab\t", "\"horizontal tab\\t\""},
      {"vertical \v tab", "\"vertical \\v tab\""},
      {"double \\\\ slash", "\"double \\\\\\\\ slash\""},
      {"two escape sequences \a\n", "\"two escape sequences \\a\\n\""},
      {"verbatim", "\"verbatim\""},
      {"ends with \\", "\"ends with \\\\\""},
      {"\\ starts with", "\"\\\\ starts with\""},
      {"printable unicode😀", "\"printable unicode😀\""},
      {"mid string \" quote", "\"mid string \\\" quote\""},
      {"single-quote with \"double quote\"", "\"single-quote with \\\"double quote\\\"\""},
      {"size('πέντε')", "\"size('πέντε')\""},
      {"завтра", "\"завтра\""},
      {"ta©o©αT", "\"ta©o©αT\""},
      {"", "\"\""},
      // Other control characters are copied; invalid bytes become U+FFFD.
      {std::string("nul\0x", 5), std::string("\"nul\0x\"", 7)},
      {"filler \x9f", absl::StrCat("\"filler ", kReplacement, "\"")},
  };
  for (const auto& c : cases) EXPECT_EQ(Quote(c.s), c.want) << c.s;
}

// --- format() ---------------------------------------------------------------------------------

using A = FormatArg;

struct FormatCase {
  std::string name;
  std::string format;
  std::vector<FormatArg> args;
  std::string want;  // Ok(...) or Err(...)
};

void RunFormatCases(const std::vector<FormatCase>& cases) {
  for (const FormatCase& c : cases) {
    EXPECT_EQ(Describe(Format(c.format, c.args)), c.want) << c.name << ": " << c.format;
  }
}

std::vector<FormatArg> Ints(std::initializer_list<int64_t> values) {
  std::vector<FormatArg> out;
  for (int64_t v : values) out.push_back(A::Int(v));
  return out;
}

TEST(StringsLibFormatTest, SubstitutesClausesInOrder) {
  RunFormatCases({
      {"brief example", "%d and %s", {A::Int(1), A::String("x")}, Ok("1 and x")},
      {"no-op", "no substitution", {}, Ok("no substitution")},
      {"mid-string",
       "str is %s and some more",
       {A::String("filler")},
       Ok("str is filler and some more")},
      {"percent escaping", "%% and also %%", {}, Ok("% and also %")},
      {"inside escaped percents", "%%%s%%", {A::String("text")}, Ok("%text%")},
      {"escaped percent right",
       "%s%%",
       {A::String("percent on the right")},
       Ok("percent on the right%")},
      {"escaped percent left",
       "%%%s",
       {A::String("percent on the left")},
       Ok("%percent on the left")},
      {"multiple",
       "%d %d %d, %s %s %s, %d %d %d, %s %s %s",
       {A::Int(1), A::Int(2), A::Int(3), A::String("A"), A::String("B"), A::String("C"), A::Int(4),
        A::Int(5), A::Int(6), A::String("D"), A::String("E"), A::String("F")},
       Ok("1 2 3, A B C, 4 5 6, D E F")},
      {"doc example",
       "this is a string: %s\nand an integer: %d",
       {A::String("str"), A::Int(42)},
       Ok("this is a string: str\nand an integer: 42")},
      {"unused arguments are ignored", "%s", {A::String("a"), A::String("b")}, Ok("a")},
      {"precision accepted on %d", "%.2d", {A::Int(5)}, Ok("5")},
      {"multi-byte text is copied", "日本 %s 😀", {A::String("é")}, Ok("日本 é 😀")},
  });
}

TEST(StringsLibFormatTest, StringClause) {
  RunFormatCases({
      {"double", "%s", {A::Double(2.71)}, Ok("2.71")},
      {"double doc example",
       "a double substituted with %%s: %s",
       {A::Double(64.2)},
       Ok("a double substituted with %s: 64.2")},
      {"small double", "%s", {A::Double(0.000000002)}, Ok("2e-09")},
      {"large double", "%s", {A::Double(1e6)}, Ok("1e+06")},
      {"below 1e6", "%s", {A::Double(100000.0)}, Ok("100000")},
      {"many digits", "%s", {A::Double(123456789.0)}, Ok("1.23456789e+08")},
      {"1e21", "%s", {A::Double(1e21)}, Ok("1e+21")},
      {"0.0001", "%s", {A::Double(0.0001)}, Ok("0.0001")},
      {"0.1", "%s", {A::Double(0.1)}, Ok("0.1")},
      {"negative zero", "%s", {A::Double(-0.0)}, Ok("-0")},
      {"denormal", "%s", {A::Double(5e-324)}, Ok("5e-324")},
      {"NaN", "%s", {A::Double(kNaN)}, Ok("NaN")},
      {"+Inf", "%s", {A::Double(kInf)}, Ok("+Inf")},
      {"-Inf", "%s", {A::Double(-kInf)}, Ok("-Inf")},
      {"int", "%s", {A::Int(999999999999)}, Ok("999999999999")},
      {"uint", "%s", {A::Uint(std::numeric_limits<uint64_t>::max())}, Ok("18446744073709551615")},
      {"null", "null: %s", {A::Null()}, Ok("null: null")},
      {"bytes", "some bytes: %s", {A::Bytes("xyz")}, Ok("some bytes: xyz")},
      {"type", "type is %s", {A::Type("string")}, Ok("type is string")},
      {"timestamp", "%s", {A::Timestamp("2023-02-03T23:31:20Z")}, Ok("2023-02-03T23:31:20Z")},
      {"duration", "%s", {A::Duration("6347s")}, Ok("6347s")},
      {"bools",
       "true bool: %s, false bool: %s",
       {A::Bool(true), A::Bool(false)},
       Ok("true bool: true, false bool: false")},
      {"string with invalid byte is copied", "%s", {A::String("a\xff")}, Ok("a\xff")},
  });
}

TEST(StringsLibFormatTest, StringClauseRendersListsAndMaps) {
  using E = FormatArg::MapEntry;
  RunFormatCases({
      {"double in list", "%s", {A::List({A::Double(2.71)})}, Ok("[2.710000]")},
      {"small double in list", "%s", {A::List({A::Double(0.000000002)})}, Ok("[0.000000]")},
      {"special doubles in list",
       "%s",
       {A::List({A::Double(kNaN), A::Double(kInf), A::Double(-kInf)})},
       Ok(R"(["NaN", "+Inf", "-Inf"])")},
      {"mixed list",
       "%s",
       {A::List({A::String("abc"), A::Double(3.14), A::Null(), A::List(Ints({9, 8, 7, 6})),
                 A::Timestamp("2023-02-03T23:31:20Z")})},
       Ok(R"(["abc", 3.140000, null, [9, 8, 7, 6], timestamp("2023-02-03T23:31:20Z")])")},
      {"dyn list",
       "dyntype list: %s",
       {A::List({A::Int(6), A::Double(4.2), A::String("a string")})},
       Ok(R"(dyntype list: [6, 4.200000, "a string"])")},
      {"nested list",
       "list: %s",
       {A::List({A::List({A::Int(1), A::Int(2), A::List({A::Double(3.0), A::Int(4)})})})},
       Ok("list: [[1, 2, [3.000000, 4]]]")},
      {"map sorted by rendered key",
       "%s",
       {A::Map({E{A::String("key1"), A::Bytes("xyz")}, E{A::String("key5"), A::Null()},
                E{A::String("key2"), A::Duration("7200s")}, E{A::String("key4"), A::Bool(true)},
                E{A::String("key3"), A::Double(2.71828)}})},
       Ok(R"({"key1":b"xyz", "key2":duration("7200s"), "key3":2.718280, "key4":true, "key5":null})")},
      {"map with all key types",
       "map with multiple key types: %s",
       {A::Map({E{A::Int(1), A::String("value1")}, E{A::Uint(2), A::String("value2")},
                E{A::Bool(true), A::Double(kNaN)}})},
       Ok(R"(map with multiple key types: {1:"value1", 2:"value2", true:"NaN"})")},
      {"dyn map",
       "dyntype map: %s",
       {A::Map({E{A::String("strKey"), A::String("x")}, E{A::Bool(true), A::Int(42)},
                E{A::Int(6), A::Duration("422s")}})},
       Ok(R"(dyntype map: {"strKey":"x", 6:duration("422s"), true:42})")},
      {"doc example",
       "a map inside a list: %s",
       {A::List({A::Int(1), A::Int(2), A::Int(3),
                 A::Map({E{A::String("a"), A::String("x")}, E{A::String("b"), A::String("y")},
                         E{A::String("c"), A::String("z")}})})},
       Ok(R"(a map inside a list: [1, 2, 3, {"a":"x", "b":"y", "c":"z"}])")},
      {"types and uints in a list",
       "%s",
       {A::List({A::Type("int"), A::Uint(32)})},
       Ok("[int, 32]")},
      {"empty list and map", "%s %s", {A::List({}), A::Map({})}, Ok("[] {}")},
      // Strings inside aggregates are quoted as Go's %q does.
      {"escapes in list",
       "%s",
       {A::List({A::String("a\"b\\c\n"), A::String("é日😀"), A::String("\x01\u200b")})},
       Ok(R"(["a\"b\\c\n", "é日😀", "\x01\u200b"])")},
      {"invalid byte in list", "%s", {A::List({A::String("a\xff")})}, Ok(R"(["a\xff"])")},
  });
}

TEST(StringsLibFormatTest, NumericClauses) {
  RunFormatCases({
      {"decimal uint", "%d", {A::Uint(64)}, Ok("64")},
      {"decimal negative", "%d", {A::Int(-42)}, Ok("-42")},
      {"binary", "this is 5 in binary: %b", {A::Int(5)}, Ok("this is 5 in binary: 101")},
      {"negative binary",
       "this is -5 in binary: %b",
       {A::Int(-5)},
       Ok("this is -5 in binary: -101")},
      {"uint binary",
       "unsigned 64 in binary: %b",
       {A::Uint(64)},
       Ok("unsigned 64 in binary: 1000000")},
      {"bool binary", "bit set from bool: %b", {A::Bool(true)}, Ok("bit set from bool: 1")},
      {"false binary", "%b", {A::Bool(false)}, Ok("0")},
      {"octal", "%o", {A::Int(11)}, Ok("13")},
      {"negative octal", "%o", {A::Int(-11)}, Ok("-13")},
      {"uint octal",
       "this is an unsigned octal: %o",
       {A::Uint(65535)},
       Ok("this is an unsigned octal: 177777")},
      {"hex", "%x is 30 in hexadecimal", {A::Int(30)}, Ok("1e is 30 in hexadecimal")},
      {"upper hex", "%X is 20 in hexadecimal", {A::Int(30)}, Ok("1E is 20 in hexadecimal")},
      {"negative hex", "%x is -30 in hexadecimal", {A::Int(-30)}, Ok("-1e is -30 in hexadecimal")},
      {"uint hex", "%X is 6000 in hexadecimal", {A::Uint(6000)}, Ok("1770 is 6000 in hexadecimal")},
      {"min int hex", "%x", {A::Int(std::numeric_limits<int64_t>::min())}, Ok("-8000000000000000")},
      {"string hex", "%x", {A::String("Hello world!")}, Ok("48656c6c6f20776f726c6421")},
      {"string upper hex", "%X", {A::String("Hello world!")}, Ok("48656C6C6F20776F726C6421")},
      {"bytes hex", "%x", {A::Bytes("byte string")}, Ok("6279746520737472696e67")},
      {"bytes hex leading zero",
       "%x",
       {A::Bytes(std::string("\0\0byte string\0", 14))},
       Ok("00006279746520737472696e6700")},
      {"bytes upper hex", "%X", {A::Bytes("byte string")}, Ok("6279746520737472696E67")},
      {"invalid UTF-8 bytes hex", "%x", {A::Bytes("\xff")}, Ok("ff")},
  });
}

TEST(StringsLibFormatTest, FixedPointUsesEnUsGrouping) {
  RunFormatCases({
      {"precision", "%.3f", {A::Double(1.2345)}, Ok("1.234")},
      {"default precision", "%f", {A::Double(2.71828)}, Ok("2.718280")},
      {"doc example", "%f", {A::Double(3.14)}, Ok("3.140000")},
      {"dyn double", "dynamic double: %.3f", {A::Double(4.5)}, Ok("dynamic double: 4.500")},
      {"one digit", "msg.single_double: %.1f", {A::Double(1.0)}, Ok("msg.single_double: 1.0")},
      {"high precision", "%.200f", {A::Double(1.0)}, Ok("1." + std::string(200, '0'))},
      {"grouping", "%f", {A::Double(1234567.891)}, Ok("1,234,567.891000")},
      {"negative grouping", "%.2f", {A::Double(-1234.5)}, Ok("-1,234.50")},
      {"no fraction", "%.0f", {A::Double(1000.0)}, Ok("1,000")},
      {"ties to even", "%.0f", {A::Double(2.5)}, Ok("2")},
      {"carry into a new group", "%.1f", {A::Double(999.95)}, Ok("1,000.0")},
      {"negative zero", "%f", {A::Double(-0.0)}, Ok("0.000000")},
      {"rounds to zero", "%.3f", {A::Double(-0.0001)}, Ok("-0.000")},
      {"NaN string", "%f", {A::String("NaN")}, Ok("NaN")},
      {"Infinity string", "%f", {A::String("Infinity")}, Ok("∞")},
      {"-Infinity string", "%f", {A::String("-Infinity")}, Ok("-∞")},
      {"NaN and infinity",
       "NaN: %f, infinity: %f",
       {A::Double(kNaN), A::Double(kInf)},
       Ok("NaN: NaN, infinity: ∞")},
  });
}

TEST(StringsLibFormatTest, ScientificUsesXTextNotation) {
  RunFormatCases({
      {"precision 6",
       "%.6e",
       {A::Double(1052.032911275)},
       Ok("1.052033\u202f\u00d7\u202f10\u2070\u00b3")},
      {"default", "%e", {A::Double(2.71828)}, Ok("2.718280\u202f\u00d7\u202f10\u2070\u2070")},
      {"literal and escaped",
       "unescaped unicode: %e, escaped unicode: %e",
       {A::Double(2.71828), A::Double(2.71828)},
       Ok("unescaped unicode: 2.718280\u202f×\u202f10⁰⁰, escaped unicode: "
          "2.718280\u202f\u00d7\u202f10\u2070\u2070")},
      {"negative exponent", "%e", {A::Double(0.000000002)}, Ok("2.000000\u202f\u00d7\u202f10⁻⁰⁹")},
      {"negative value", "%e", {A::Double(-1234.5)}, Ok("-1.234500\u202f\u00d7\u202f10⁰³")},
      {"zero", "%e", {A::Double(0.0)}, Ok("0.000000\u202f\u00d7\u202f10⁰⁰")},
      {"three-digit exponent", "%e", {A::Double(1e100)}, Ok("1.000000\u202f\u00d7\u202f10¹⁰⁰")},
      // cel-go passes the precision as a field width: digits stay at 6, short results are padded.
      {"precision is a width", "%.3e", {A::Double(2.71828)}, Ok("2.718280\u202f\u00d7\u202f10⁰⁰")},
      {"wide width pads", "%.20e", {A::Double(2.71828)}, Ok("     2.718280\u202f\u00d7\u202f10⁰⁰")},
      {"NaN padded to 6", "%e", {A::Double(kNaN)}, Ok("   NaN")},
      {"infinity padded to 6", "%e", {A::String("Infinity")}, Ok("     ∞")},
      {"zero width", "%.0e", {A::Double(kNaN)}, Ok("NaN")},
  });
}

TEST(StringsLibFormatTest, ReportsCelGoErrors) {
  using E = FormatArg::MapEntry;
  const std::string kStringClause =
      "error during formatting: string clause can only be used on strings, bools, bytes, ints, "
      "doubles, maps, lists, types, durations, and timestamps, was given ";
  RunFormatCases({
      {"unrecognized clause",
       "%a",
       {A::Int(1)},
       Err("could not parse formatting clause: unrecognized formatting clause \"a\"")},
      {"uppercase E",
       "double is %E",
       {A::Double(0.5)},
       Err("could not parse formatting clause: unrecognized formatting clause \"E\"")},
      {"j",
       "%j",
       {A::Int(123)},
       Err("could not parse formatting clause: unrecognized formatting clause \"j\"")},
      {"non-ASCII clause byte",
       "%é",
       {A::Int(1)},
       Err("could not parse formatting clause: unrecognized formatting clause \"Ã\"")},
      {"too few arguments", "%d %d %d", Ints({0, 1}), Err("index 2 out of range")},
      {"too few for string", "%s %s", {A::String("abc")}, Err("index 1 out of range")},
      {"trailing percent without argument", "filler %", {}, Err("index 0 out of range")},
      {"trailing percent", "filler %", {A::Int(1)}, Err("unexpected end of string")},
      {"unterminated precision",
       "double is %.34",
       {A::Double(5.0)},
       Err("could not parse formatting clause: error while parsing precision: could not find "
           "end of precision specifier")},
      {"empty precision",
       "%.f",
       {A::Double(5.0)},
       Err("could not parse formatting clause: error while parsing precision: error while "
           "converting precision to integer: strconv.Atoi: parsing \"\": invalid syntax")},
      {"huge precision",
       "%.99999999999999999999f",
       {A::Double(5.0)},
       Err("could not parse formatting clause: error while parsing precision: error while "
           "converting precision to integer: strconv.Atoi: parsing \"99999999999999999999\": "
           "value out of range")},
      {"precision above 255",
       "%.256f",
       {A::Double(5.0)},
       Err("could not parse formatting clause: error while parsing precision: precision 256 "
           "exceeds the supported maximum of 255")},
      {"string in binary",
       "string is %b",
       {A::String("abc")},
       Err("error during formatting: only integers and bools can be formatted as binary, was "
           "given string")},
      {"duration in decimal",
       "%d",
       {A::Duration("1802s")},
       Err("error during formatting: decimal clause can only be used on integers, was given "
           "google.protobuf.Duration")},
      {"string in octal",
       "octal: %o",
       {A::String("a string")},
       Err("error during formatting: octal clause can only be used on integers, was given "
           "string")},
      {"double in hex",
       "double is %x",
       {A::Double(0.5)},
       Err("error during formatting: only integers, byte buffers, and strings can be formatted "
           "as hex, was given double")},
      {"double in decimal",
       "int is %d",
       {A::Double(5.2)},
       Err("error during formatting: decimal clause can only be used on integers, was given "
           "double")},
      {"bool in fixed",
       "double is %f",
       {A::Bool(true)},
       Err("error during formatting: fixed-point clause can only be used on doubles, was given "
           "bool")},
      {"int in fixed",
       "%f",
       {A::Int(1)},
       Err("error during formatting: fixed-point clause can only be used on doubles, was given "
           "int")},
      {"other string in fixed",
       "%f",
       {A::String("1.5")},
       Err("error during formatting: fixed-point clause can only be used on doubles, was given "
           "string")},
      {"bool in scientific",
       "double is %e",
       {A::Bool(true)},
       Err("error during formatting: scientific clause can only be used on doubles, was given "
           "bool")},
      {"null in decimal",
       "null: %d",
       {A::Null()},
       Err("error during formatting: decimal clause can only be used on integers, was given "
           "null_type")},
      {"null in scientific",
       "null: %e",
       {A::Null()},
       Err("error during formatting: scientific clause can only be used on doubles, was given "
           "null_type")},
      {"null in fixed",
       "null: %f",
       {A::Null()},
       Err("error during formatting: fixed-point clause can only be used on doubles, was given "
           "null_type")},
      {"null in hex",
       "null: %X",
       {A::Null()},
       Err("error during formatting: only integers, byte buffers, and strings can be formatted "
           "as hex, was given null_type")},
      {"null in binary",
       "null: %b",
       {A::Null()},
       Err("error during formatting: only integers and bools can be formatted as binary, was "
           "given null_type")},
      {"null in octal",
       "null: %o",
       {A::Null()},
       Err("error during formatting: octal clause can only be used on integers, was given "
           "null_type")},
      {"object",
       "object is %s",
       {A::Other("ext.TestAllTypes")},
       Err(kStringClause + "ext.TestAllTypes")},
      {"object inside list",
       "%s",
       {A::List({A::Int(1), A::Int(2), A::Other("ext.TestAllTypes")})},
       Err(kStringClause + "ext.TestAllTypes")},
      {"object inside map",
       "%s",
       {A::Map({E{A::Int(1), A::String("a")}, E{A::Int(2), A::Other("ext.TestAllTypes")}})},
       Err(kStringClause + "ext.TestAllTypes")},
      {"quantity",
       "%s",
       {A::Other("kubernetes.Quantity")},
       Err(kStringClause + "kubernetes.Quantity")},
      {"double map key",
       "%s",
       {A::Map({E{A::Double(1.5), A::Int(1)}})},
       Err("error during formatting: no formatting function for map key of type double")},
      {"invalid UTF-8 bytes",
       "%s",
       {A::Bytes("\xff")},
       Err("error during formatting: could not convert argument \"invalid UTF-8 in bytes, "
           "cannot convert to string\" to string")},
  });
}

// --- Kubernetes library.Regex -----------------------------------------------------------------

TEST(StringsLibRegexTest, FindReturnsTheLeftmostMatch) {
  const struct {
    std::string s, pattern, want;
  } cases[] = {
      {"abc 123", "[0-9]+", Ok("123")},
      {"abc 123", "[0-9]*", Ok("")},  // the empty match at 0 is leftmost (Go semantics)
      {"abc 123", "xyz", Ok("")},
      {"paranormal", "a.", Ok("ar")},
      {"日本語", "本.", Ok("本語")},
      {"abc", "(", Err("Illegal regex: error parsing regexp: missing closing ): `(`")},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(Describe(Find(c.s, c.pattern)), c.want) << c.s << ".find(" << c.pattern << ")";
  }
}

TEST(StringsLibRegexTest, FindAllSkipsEmptyMatchesAfterAMatch) {
  using Parts = std::vector<std::string>;
  const struct {
    std::string s, pattern;
    int64_t limit;
    std::string want;
  } cases[] = {
      {"123 abc 456", "[0-9]+", -1, Ok(Parts{"123", "456"})},
      {"123 abc 456", "[0-9]+", 1, Ok(Parts{"123"})},
      {"123 abc 456", "xyz", -1, Ok(Parts{})},
      {"123 abc 456", "[0-9]+", 0, Ok(Parts{})},
      // Go's regexp examples and tests.
      {"paranormal", "a.", -1, Ok(Parts{"ar", "an", "al"})},
      {"paranormal", "a.", 2, Ok(Parts{"ar", "an"})},
      {"graal", "a.", -1, Ok(Parts{"aa"})},
      {"none", "a.", -1, Ok(Parts{})},
      {"baaab", "a*", -1, Ok(Parts{"", "aaa", ""})},
      {"123 abc 456", "[0-9]*", -1, Ok(Parts{"123", "", "", "", "", "456"})},
      // Empty matches step by code point.
      {"日本語", "", -1, Ok(Parts{"", "", "", ""})},
      {"1, 2, 3, 4", "[0-9]+", -1, Ok(Parts{"1", "2", "3", "4"})},
      {"abc", "[", -1, Err("Illegal regex: error parsing regexp: missing closing ]: `[`")},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(Describe(FindAll(c.s, c.pattern, c.limit)), c.want)
        << c.s << ".findAll(" << c.pattern << ", " << c.limit << ")";
  }
  EXPECT_EQ(Describe(FindAll("a1b22", "[0-9]+")), Ok(Parts{"1", "22"}));
}

}  // namespace
}  // namespace qm::cel::strings
