#include "cel/parser.h"

#include <pthread.h>

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "cel/ast.h"
#include "cel/source.h"

namespace qm::cel {
namespace {

// The tree of a valid expression as DebugString text, or the rendered issues of an invalid one.
std::string Render(std::string_view text, const ParserOptions& options = {},
                   const DebugStringOptions& debug = {}) {
  const Source source{std::string(text)};
  const ParseResult result = Parse(source, options);
  if (!result.issues.empty()) {
    EXPECT_EQ(result.ast, nullptr) << text;
    return source.DisplayIssues(result.issues);
  }
  if (result.ast == nullptr) return "<no ast and no issues>";
  return DebugString(result.ast->root(), debug);
}

// The value of a string or bytes literal; fails the test when `text` is not one.
std::string LiteralValue(std::string_view text) {
  const ParseResult result = Parse(Source{std::string(text)});
  if (result.ast == nullptr) {
    ADD_FAILURE() << "no AST for " << text << ": "
                  << Source{std::string(text)}.DisplayIssues(result.issues);
    return {};
  }
  const Expr& root = result.ast->root();
  if (root.kind() != ExprKind::kConstant) {
    ADD_FAILURE() << "not a literal: " << text;
    return {};
  }
  if (root.constant().kind() == ConstantKind::kBytes) return root.constant().bytes_value();
  EXPECT_EQ(root.constant().kind(), ConstantKind::kString) << text;
  return root.constant().string_value();
}

struct Case {
  std::string input;
  std::string expected;  // DebugString, or the rendered issues
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.input; }

class ParserGoldenTest : public testing::TestWithParam<Case> {};

TEST_P(ParserGoldenTest, MatchesGolden) {
  EXPECT_EQ(Render(GetParam().input), GetParam().expected);
}

// --- Precedence and associativity ---------------------------------------------------------------

INSTANTIATE_TEST_SUITE_P(
    Precedence, ParserGoldenTest,
    testing::Values(
        Case{"a || b && c", "_||_(a, _&&_(b, c))"}, Case{"a && b || c", "_||_(_&&_(a, b), c)"},
        // Chains of || and && become balanced trees, as in cel-go.
        Case{"a || b || c", "_||_(_||_(a, b), c)"},
        Case{"a || b || c || d", "_||_(_||_(a, b), _||_(c, d))"},
        Case{"a && b && c && d && e", "_&&_(_&&_(_&&_(a, b), c), _&&_(d, e))"},
        Case{"a ? b : c ? d : e", "_?_:_(a, b, _?_:_(c, d, e))"},
        Case{"a || b ? c && d : e", "_?_:_(_||_(a, b), _&&_(c, d), e)"},
        Case{"a ? b : c || d", "_?_:_(a, b, _||_(c, d))"},
        Case{"a == b && c != d", "_&&_(_==_(a, b), _!=_(c, d))"},
        Case{"a < b == c", "_==_(_<_(a, b), c)"},
        Case{"a <= b >= c > d", "_>_(_>=_(_<=_(a, b), c), d)"},
        Case{"a in b == c", "_==_(@in(a, b), c)"}, Case{"a + b in c", "@in(_+_(a, b), c)"},
        Case{"1 + 2 * 3 - 4 / 5 % 6", "_-_(_+_(1, _*_(2, 3)), _%_(_/_(4, 5), 6))"},
        Case{"a - b - c", "_-_(_-_(a, b), c)"}, Case{"a / b * c", "_*_(_/_(a, b), c)"},
        Case{"a + b < c * d", "_<_(_+_(a, b), _*_(c, d))"},
        Case{"(a + b) * c", "_*_(_+_(a, b), c)"}, Case{"((a))", "a"},
        Case{"!a && -b < c", "_&&_(!_(a), _<_(-_(b), c))"}, Case{"!!a", "a"}, Case{"!!!a", "!_(a)"},
        Case{"--a", "a"}, Case{"-a.b", "-_(a.b)"}, Case{"!a.b()", "!_(a.b())"},
        Case{"-a[0]", "-_(_[_](a, 0))"}, Case{"a.b.c[0].d(e)[f]", "_[_](_[_](a.b.c, 0).d(e), f)"},
        Case{"f(a, b) + g()", "_+_(f(a, b), g())"},
        Case{"[1, 2][0] + {'k': 2}['k']", "_+_(_[_]([1, 2], 0), _[_]({\"k\": 2}, \"k\"))"},
        Case{"a // comment\n + b", "_+_(a, b)"},
        // A '-' right before a number is part of the literal; repeated signs cancel in pairs.
        Case{"-1", "-1"}, Case{"- 1.5", "-1.5"}, Case{"--1", "1"}, Case{"---1", "-_(1)"},
        Case{"-1u", "-_(1u)"}, Case{"-(1)", "-_(1)"}, Case{"1 - 1", "_-_(1, 1)"},
        Case{"1-1", "_-_(1, 1)"}, Case{"2 - -1", "_-_(2, -1)"}, Case{"-1.size()", "-1.size()"}));

// --- Literals ----------------------------------------------------------------------------------

INSTANTIATE_TEST_SUITE_P(
    Literals, ParserGoldenTest,
    testing::Values(Case{"0", "0"}, Case{"42", "42"}, Case{"007", "7"}, Case{"0x2A", "42"},
                    Case{"0x2a", "42"}, Case{"9223372036854775807", "9223372036854775807"},
                    Case{"-9223372036854775808", "-9223372036854775808"},
                    Case{"-0x8000000000000000", "-9223372036854775808"}, Case{"1u", "1u"},
                    Case{"1U", "1u"}, Case{"0x1u", "1u"}, Case{"0xFFu", "255u"},
                    Case{"18446744073709551615u", "18446744073709551615u"}, Case{"1.5", "1.5"},
                    Case{"1e3", "1000.0"}, Case{"1E3", "1000.0"}, Case{"1e+2", "100.0"},
                    Case{".5", "0.5"}, Case{"1.5e-3", "0.0015"}, Case{"0.0", "0.0"},
                    Case{"1e-999", "0.0"}, Case{"-2.5e1", "-25.0"}, Case{"1e100", "1e+100"},
                    Case{"true", "true"}, Case{"false", "false"}, Case{"null", "null"},
                    Case{"\"abc\"", "\"abc\""}, Case{"'abc'", "\"abc\""}, Case{"\"\"", "\"\""},
                    Case{"'\"'", "\"\\\"\""}, Case{"\"\"\"a\"b\"\"\"", "\"a\\\"b\""},
                    Case{"'''x''x'''", "\"x''x\""}, Case{"b\"abc\"", "b\"abc\""},
                    Case{"B'abc'", "b\"abc\""}, Case{"b\"\\x00\\xff\"", "b\"\\x00\\xff\""},
                    Case{"[]", "[]"}, Case{"[1, 2, 3,]", "[1, 2, 3]"}, Case{"[,]", "[]"},
                    Case{"{}", "{}"}, Case{"{1: 2u, 'a': b,}", "{1: 2u, \"a\": b}"},
                    Case{"{,}", "{}"}, Case{"[[1], {true: null}]", "[[1], {true: null}]"}));

TEST(ParserLiteralTest, EveryStringEscape) {
  EXPECT_EQ(LiteralValue(R"("\a\b\f\n\r\t\v\\\'\"\`\?")"), std::string("\a\b\f\n\r\t\v\\'\"`?"));
  EXPECT_EQ(LiteralValue(R"('\123')"), "S");                       // octal
  EXPECT_EQ(LiteralValue(R"("\000")"), std::string(1, '\0'));      // octal NUL
  EXPECT_EQ(LiteralValue(R"("\x41\X42")"), "AB");                  // hex, both cases of x
  EXPECT_EQ(LiteralValue(R"("\xFF")"), "\xc3\xbf");                // code point U+00FF
  EXPECT_EQ(LiteralValue(R"("\377")"), "\xc3\xbf");                // code point U+00FF
  EXPECT_EQ(LiteralValue(R"("\u00e9")"), "\xc3\xa9");              // é
  EXPECT_EQ(LiteralValue(R"("\U0001F600")"), "\xf0\x9f\x98\x80");  // 😀
  EXPECT_EQ(LiteralValue(R"("\uD800")"), "\xef\xbf\xbd");     // lone surrogate -> U+FFFD, as Go
  EXPECT_EQ(LiteralValue("\"caf\xc3\xa9\""), "caf\xc3\xa9");  // UTF-8 kept as is
  EXPECT_EQ(LiteralValue("\"a\xff\""), "a\xef\xbf\xbd");      // invalid UTF-8 -> U+FFFD
}

TEST(ParserLiteralTest, RawAndTripleQuotedStrings) {
  EXPECT_EQ(LiteralValue(R"(r"\n")"), "\\n");
  EXPECT_EQ(LiteralValue(R"(R'\d+')"), "\\d+");
  EXPECT_EQ(LiteralValue(R"(r"\")"), "\\");
  EXPECT_EQ(LiteralValue("r'''a\\nb\nc'''"), "a\\nb\nc");
  EXPECT_EQ(LiteralValue("\"\"\"a\nb\"\"\""), "a\nb");
  EXPECT_EQ(LiteralValue("'''a\r\nb\rc'''"), "a\nb\nc");  // newlines normalized as in cel-go
  EXPECT_EQ(LiteralValue("\"\"\"x\\\"\"\"\""), "x\"");    // """x\"""" is x and an escaped quote
  EXPECT_EQ(LiteralValue("\"\"\"\t\\n\"\"\""), "\t\n");
}

TEST(ParserLiteralTest, BytesLiterals) {
  EXPECT_EQ(LiteralValue(R"(b"\xFF")"), "\xff");  // an octet, not UTF-8
  EXPECT_EQ(LiteralValue(R"(b"\377")"), "\xff");
  EXPECT_EQ(LiteralValue(R"(b"\303\277")"), "\xc3\xbf");
  EXPECT_EQ(LiteralValue("b\"\xc3\xbf\""), "\xc3\xbf");  // b"ÿ" is its UTF-8
  EXPECT_EQ(LiteralValue(R"(br"\x")"), "\\x");
  EXPECT_EQ(LiteralValue(R"(BR'\n')"), "\\n");
  EXPECT_EQ(LiteralValue(R"(b'''a\tb''')"), "a\tb");
}

INSTANTIATE_TEST_SUITE_P(
    LiteralErrors, ParserGoldenTest,
    testing::Values(
        Case{"9223372036854775808",
             "ERROR: <input>:1:1: invalid int literal\n | 9223372036854775808\n | ^"},
        Case{"-9223372036854775809",
             "ERROR: <input>:1:1: invalid int literal\n | -9223372036854775809\n | ^"},
        Case{"0x10000000000000000",
             "ERROR: <input>:1:1: invalid int literal\n | 0x10000000000000000\n | ^"},
        Case{"1 + 18446744073709551616u",
             "ERROR: <input>:1:5: invalid uint literal\n | 1 + 18446744073709551616u\n"
             " | ....^"},
        Case{"1e999", "ERROR: <input>:1:1: invalid double literal\n | 1e999\n | ^"},
        // As in Kubernetes, `1.` is not a double: the '.' wants a field name.
        Case{"1.",
             "ERROR: <input>:1:3: Syntax error: mismatched input '<EOF>' expecting IDENTIFIER\n"
             " | 1.\n | ..^"},
        Case{"1.5u",
             "ERROR: <input>:1:4: Syntax error: mismatched input 'u' expecting <EOF>\n | 1.5u\n"
             " | ...^"},
        Case{R"("\q")",
             "ERROR: <input>:1:2: Syntax error: invalid escape sequence '\\q'\n | \"\\q\"\n"
             " | .^"},
        Case{R"('a\xZZ')",
             "ERROR: <input>:1:3: Syntax error: invalid escape sequence '\\xZ'\n | 'a\\xZZ'\n"
             " | ..^"},
        Case{R"("\8")",
             "ERROR: <input>:1:2: Syntax error: invalid escape sequence '\\8'\n | \"\\8\"\n"
             " | .^"},
        Case{R"("\400")",
             "ERROR: <input>:1:2: Syntax error: invalid escape sequence '\\4'\n | \"\\400\"\n"
             " | .^"},
        Case{R"("\U00110000")",
             "ERROR: <input>:1:2: Syntax error: invalid escape sequence '\\U00110000': code "
             "point out of range\n | \"\\U00110000\"\n | .^"},
        Case{R"(b"\u0041")",
             "ERROR: <input>:1:3: Syntax error: invalid escape sequence '\\u0041': \\u and \\U "
             "are not allowed in bytes literals\n | b\"\\u0041\"\n | ..^"},
        Case{"\"abc",
             "ERROR: <input>:1:1: Syntax error: unterminated string literal\n | \"abc\n | ^"},
        Case{"x == 'abc\n+ y",
             "ERROR: <input>:1:6: Syntax error: unterminated string literal\n | x == 'abc\n"
             " | .....^"},
        Case{"'''abc''",
             "ERROR: <input>:1:1: Syntax error: unterminated string literal\n | '''abc''\n"
             " | ^"},
        Case{"r\"abc",
             "ERROR: <input>:1:1: Syntax error: unterminated string literal\n | r\"abc\n | ^"}));

// --- Identifiers, reserved words, field names ---------------------------------------------------

INSTANTIATE_TEST_SUITE_P(
    Identifiers, ParserGoldenTest,
    testing::Values(
        Case{"a", "a"}, Case{"_a1", "_a1"}, Case{".a", ".a"}, Case{".a.b", ".a.b"},
        Case{".f(x)", ".f(x)"}, Case{"a.if", "a.if"}, Case{"a.var()", "a.var()"},
        Case{"a.`b-c`", "a.`b-c`"}, Case{"a.?`b c/d.e`", "a.?`b c/d.e`"}, Case{"a.`if`", "a.if"},
        Case{"true.x", "true.x"},
        Case{"if", "ERROR: <input>:1:1: reserved identifier: if\n | if\n | ^"},
        Case{"a + while(b)",
             "ERROR: <input>:1:5: reserved identifier: while\n | a + while(b)\n | ....^"},
        Case{"var + let",
             "ERROR: <input>:1:1: reserved identifier: var\n | var + let\n | ^\n"
             "ERROR: <input>:1:7: reserved identifier: let\n | var + let\n | ......^"},
        Case{"in",
             "ERROR: <input>:1:1: Syntax error: mismatched input 'in' expecting {'[', '{', '(', "
             "'.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, "
             "BYTES, IDENTIFIER}\n | in\n | ^"},
        Case{"a.true",
             "ERROR: <input>:1:3: Syntax error: mismatched input 'true' expecting IDENTIFIER\n"
             " | a.true\n | ..^"},
        Case{"`a`",
             "ERROR: <input>:1:1: Syntax error: mismatched input '`a`' expecting {'[', '{', '(', "
             "'.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, "
             "BYTES, IDENTIFIER}\n | `a`\n | ^"},
        // Issues are listed by position, whichever stage found them.
        Case{"a.`b`c`",
             "ERROR: <input>:1:6: Syntax error: mismatched input 'c' expecting <EOF>\n"
             " | a.`b`c`\n | .....^\n"
             "ERROR: <input>:1:7: Syntax error: token recognition error at: '`'\n | a.`b`c`\n"
             " | ......^"}));

TEST(ParserTest, RejectsEveryReservedWord) {
  for (const char* word :
       {"as", "break", "const", "continue", "else", "for", "function", "if", "import", "let",
        "loop", "package", "namespace", "return", "var", "void", "while"}) {
    const ParseResult result = Parse(Source{std::string(word) + "(x)"});
    ASSERT_EQ(result.issues.size(), 1u) << word;
    EXPECT_EQ(result.issues[0].message, std::string("reserved identifier: ") + word);
    EXPECT_EQ(result.issues[0].offset, 0u);
    EXPECT_EQ(result.ast, nullptr);
  }
}

// --- Optional syntax ---------------------------------------------------------------------------

INSTANTIATE_TEST_SUITE_P(
    Optional, ParserGoldenTest,
    testing::Values(
        Case{"a.?b", "a.?b"}, Case{"a.?b.c", "a.?b.c"}, Case{"a[?b]", "_[?_](a, b)"},
        Case{"[?a, b, ?c]", "[?a, b, ?c]"}, Case{"{?a: b, c: d}", "{?a: b, c: d}"},
        Case{"device.attributes['d'].?model.orValue('x')",
             "_[_](device.attributes, \"d\").?model.orValue(\"x\")"},
        Case{"a.optMap(x, x + 1)",
             "_?_:_(a.hasValue(), optional.of(__comprehension__(iter: #unused, range: [], "
             "accu: x, init: a.value(), cond: false, step: x, result: _+_(x, 1))), "
             "optional.none())"},
        Case{"a.b.optFlatMap(x, x.c)",
             "_?_:_(a.b.hasValue(), __comprehension__(iter: #unused, range: [], accu: x, init: "
             "a.b.value(), cond: false, step: x, result: x.c), optional.none())"},
        Case{"a.?b()",
             "ERROR: <input>:1:5: Syntax error: mismatched input '(' expecting <EOF>\n"
             " | a.?b()\n | ....^"},
        Case{"a.optMap(x.y, 1)",
             "ERROR: <input>:1:11: optMap() variable name must be a simple identifier\n"
             " | a.optMap(x.y, 1)\n | ..........^"}));

TEST(ParserTest, OptionalSyntaxCanBeDisabled) {
  ParserOptions options;
  options.enable_optional_syntax = false;
  EXPECT_EQ(Render("a.?b", options), "ERROR: <input>:1:2: unsupported syntax '.?'\n | a.?b\n | .^");
  EXPECT_EQ(Render("a[?b]", options),
            "ERROR: <input>:1:2: unsupported syntax '[?'\n | a[?b]\n | .^");
  EXPECT_EQ(Render("[?a]", options), "ERROR: <input>:1:2: unsupported syntax '?'\n | [?a]\n | .^");
  EXPECT_EQ(Render("{?a: 1}", options),
            "ERROR: <input>:1:2: unsupported syntax '?'\n | {?a: 1}\n | .^");
  // Without optional types, optMap is an ordinary method call.
  EXPECT_EQ(Render("a.optMap(x, x)", options), "a.optMap(x, x)");
}

// --- Macros -------------------------------------------------------------------------------------

INSTANTIATE_TEST_SUITE_P(
    Macros, ParserGoldenTest,
    testing::Values(
        Case{"has(a.b)", "a.b~test-only"}, Case{"has(a.b.c) && x", "_&&_(a.b.c~test-only, x)"},
        Case{"has(device.attributes['d'].x)", "_[_](device.attributes, \"d\").x~test-only"},
        Case{"x.all(y, y > 0)",
             "__comprehension__(iter: y, range: x, accu: @result, init: true, cond: "
             "@not_strictly_false(@result), step: _&&_(@result, _>_(y, 0)), result: @result)"},
        Case{"x.exists(y, y)",
             "__comprehension__(iter: y, range: x, accu: @result, init: false, cond: "
             "@not_strictly_false(!_(@result)), step: _||_(@result, y), result: @result)"},
        Case{"x.exists_one(y, y)",
             "__comprehension__(iter: y, range: x, accu: @result, init: 0, cond: true, step: "
             "_?_:_(y, _+_(@result, 1), @result), result: _==_(@result, 1))"},
        Case{"x.map(y, y * 2)",
             "__comprehension__(iter: y, range: x, accu: @result, init: [], cond: true, step: "
             "_+_(@result, [_*_(y, 2)]), result: @result)"},
        Case{"x.map(y, y > 1, y * 2)",
             "__comprehension__(iter: y, range: x, accu: @result, init: [], cond: true, step: "
             "_?_:_(_>_(y, 1), _+_(@result, [_*_(y, 2)]), @result), result: @result)"},
        Case{"x.filter(y, y > 1)",
             "__comprehension__(iter: y, range: x, accu: @result, init: [], cond: true, step: "
             "_?_:_(_>_(y, 1), _+_(@result, [y]), @result), result: @result)"},
        Case{"cel.bind(x, 1, x + x)",
             "__comprehension__(iter: #unused, range: [], accu: x, init: 1, cond: false, step: "
             "x, result: _+_(x, x))"},
        // Nested macros expand inside out.
        Case{"a.all(x, x.exists(y, y))",
             "__comprehension__(iter: x, range: a, accu: @result, init: true, cond: "
             "@not_strictly_false(@result), step: _&&_(@result, __comprehension__(iter: y, "
             "range: x, accu: @result, init: false, cond: @not_strictly_false(!_(@result)), "
             "step: _||_(@result, y), result: @result)), result: @result)"},
        // Not macros: wrong arity, wrong receiver, global forms of receiver macros.
        Case{"x.all(y)", "x.all(y)"}, Case{"x.map(a, b, c, d)", "x.map(a, b, c, d)"},
        Case{"foo.bind(x, 1, x)", "foo.bind(x, 1, x)"}, Case{"all(x, y)", "all(x, y)"},
        Case{"x.has(y)", "x.has(y)"}, Case{"has(a, b)", "has(a, b)"},
        // Two-variable comprehensions.
        Case{"m.all(k, v, v > k)",
             "__comprehension__(iter: k, iter2: v, range: m, accu: @result, init: true, cond: "
             "@not_strictly_false(@result), step: _&&_(@result, _>_(v, k)), result: @result)"},
        Case{"m.existsOne(k, v, v)",
             "__comprehension__(iter: k, iter2: v, range: m, accu: @result, init: 0, cond: "
             "true, step: _?_:_(v, _+_(@result, 1), @result), result: _==_(@result, 1))"},
        Case{"l.transformList(i, v, i > 0, v)",
             "__comprehension__(iter: i, iter2: v, range: l, accu: @result, init: [], cond: "
             "true, step: _?_:_(_>_(i, 0), _+_(@result, [v]), @result), result: @result)"},
        Case{"m.transformMap(k, v, v + 1)",
             "__comprehension__(iter: k, iter2: v, range: m, accu: @result, init: {}, cond: "
             "true, step: cel.@mapInsert(@result, k, _+_(v, 1)), result: @result)"},
        Case{"m.transformMapEntry(k, v, {v: k})",
             "__comprehension__(iter: k, iter2: v, range: m, accu: @result, init: {}, cond: "
             "true, step: cel.@mapInsert(@result, {v: k}), result: @result)"}));

INSTANTIATE_TEST_SUITE_P(
    MacroErrors, ParserGoldenTest,
    testing::Values(
        Case{"has(a)", "ERROR: <input>:1:5: invalid argument to has() macro\n | has(a)\n | ....^"},
        Case{"has(a.?b)",
             "ERROR: <input>:1:6: invalid argument to has() macro\n | has(a.?b)\n | .....^"},
        Case{"1.all(2, 3)",
             "ERROR: <input>:1:7: argument must be a simple name\n | 1.all(2, 3)\n"
             " | ......^"},
        Case{"x.map(y.z, 2)",
             "ERROR: <input>:1:8: argument is not an identifier\n | x.map(y.z, 2)\n"
             " | .......^"},
        Case{"x.filter(1, 2)",
             "ERROR: <input>:1:10: argument is not an identifier\n | x.filter(1, 2)\n"
             " | .........^"},
        Case{"cel.bind(1, 2, 3)",
             "ERROR: <input>:1:10: cel.bind() variable names must be simple identifiers\n"
             " | cel.bind(1, 2, 3)\n | .........^"},
        Case{"m.all(k, k, true)",
             "ERROR: <input>:1:10: duplicate variable name: k\n | m.all(k, k, true)\n"
             " | .........^"},
        Case{"m.all(k, 1, true)",
             "ERROR: <input>:1:10: second variable name must be a simple identifier\n"
             " | m.all(k, 1, true)\n | .........^"},
        Case{"m.transformMap(1, v, v)",
             "ERROR: <input>:1:16: first variable name must be a simple identifier\n"
             " | m.transformMap(1, v, v)\n | ...............^"}));

TEST(ParserTest, MacrosCanBeDisabled) {
  ParserOptions options;
  options.enable_macros = false;
  EXPECT_EQ(Render("has(a.b) && x.all(y, p) && cel.bind(v, 1, v)", options),
            "_&&_(_&&_(has(a.b), x.all(y, p)), cel.bind(v, 1, v))");
  ParserOptions one_var;
  one_var.enable_two_var_comprehensions = false;
  EXPECT_EQ(Render("m.all(k, v, p)", one_var), "m.all(k, v, p)");
}

// --- Positions and ids
// ----------------------------------------------------------------------------

TEST(ParserTest, RecordsCelGoPositions) {
  DebugStringOptions offsets;
  offsets.offsets = true;
  // Identifiers and literals at their first byte, operators at the operator, calls at '(',
  // selects at '.', indexes at '['.
  EXPECT_EQ(Render("a.b(c) + d[e].f", {}, offsets), "_+_(a@0.b(c@4)@3, _[_](d@9, e@11)@10.f@13)@7");
  EXPECT_EQ(Render("-1 == x", {}, offsets), "_==_(-1@0, x@6)@3");
  EXPECT_EQ(Render("!a ? [b] : {c: d}", {}, offsets),
            "_?_:_(!_(a@1)@0, [b@6]@5, {c@12: d@15}@11)@3");
  // Macro expansions sit at the call's '('.
  EXPECT_EQ(Render("has(a.b)", {}, offsets), "a@4.b~test-only@3");
  EXPECT_EQ(Render("x.all(y, z)", {}, offsets),
            "__comprehension__(iter: y, range: x@0, accu: @result, init: true@5, cond: "
            "@not_strictly_false(@result@5)@5, step: _&&_(@result@5, z@9)@5, result: "
            "@result@5)@5");
}

TEST(ParserTest, AssignsUniqueIds) {
  DebugStringOptions ids;
  ids.ids = true;
  EXPECT_EQ(Render("a + b", {}, ids), "_+_(a#1, b#2)#3");
  const ParseResult result = Parse(Source{"x.map(y, y + 1).filter(z, z > 2)"});
  ASSERT_NE(result.ast, nullptr);
  std::vector<int> seen(result.ast->max_id() + 1, 0);
  const auto visit = [&seen](const Expr& e, const auto& self) -> void {
    ASSERT_GE(e.id(), 1);
    ASSERT_LT(e.id(), static_cast<int64_t>(seen.size()));
    ++seen[e.id()];
    switch (e.kind()) {
      case ExprKind::kSelect:
        self(*e.select().operand, self);
        break;
      case ExprKind::kCall:
        if (e.call().target) self(*e.call().target, self);
        for (const auto& a : e.call().args) self(*a, self);
        break;
      case ExprKind::kList:
        for (const auto& el : e.list().elements) self(*el, self);
        break;
      case ExprKind::kMap:
        for (const auto& en : e.map().entries) self(*en.key, self), self(*en.value, self);
        break;
      case ExprKind::kComprehension: {
        const ComprehensionExpr& c = e.comprehension();
        for (const Expr* x : {c.iter_range.get(), c.accu_init.get(), c.loop_condition.get(),
                              c.loop_step.get(), c.result.get()}) {
          self(*x, self);
        }
        break;
      }
      default:
        break;
    }
  };
  visit(result.ast->root(), visit);
  for (size_t id = 1; id < seen.size(); ++id) EXPECT_LE(seen[id], 1) << "id " << id;
}

// --- Syntax errors and their rendering
// ------------------------------------------------------------

constexpr std::string_view kExpectingExpr =
    "{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, "
    "STRING, BYTES, IDENTIFIER}";

TEST(ParserErrorTest, MatchesCelGoForUnknownCharacter) {
  // Same text as cel-go's parser test for `1 + $`.
  EXPECT_EQ(Render("1 + $"),
            "ERROR: <input>:1:5: Syntax error: token recognition error at: '$'\n"
            " | 1 + $\n | ....^\n"
            "ERROR: <input>:1:6: Syntax error: mismatched input '<EOF>' "
            "expecting " +
                std::string(kExpectingExpr) + "\n | 1 + $\n | .....^");
}

TEST(ParserErrorTest, MatchesCelGoForTrailingTokenOnNextLine) {
  EXPECT_EQ(Render("1 + 2\n3 +"),
            "ERROR: <input>:2:1: Syntax error: mismatched input '3' expecting <EOF>\n | 3 +\n"
            " | ^");
}

TEST(ParserErrorTest, ReportsMissingOperand) {
  EXPECT_EQ(Render("device.x + "),
            "ERROR: <input>:1:12: Syntax error: mismatched input '<EOF>' "
            "expecting " +
                std::string(kExpectingExpr) + "\n | device.x + \n | ...........^");
  EXPECT_EQ(Render(""), "ERROR: <input>:1:1: Syntax error: mismatched input '<EOF>' expecting " +
                            std::string(kExpectingExpr) + "\n | \n | ^");
}

INSTANTIATE_TEST_SUITE_P(
    SyntaxErrors, ParserGoldenTest,
    testing::Values(
        Case{"(a + b",
             "ERROR: <input>:1:7: Syntax error: mismatched input '<EOF>' expecting ')'\n"
             " | (a + b\n | ......^"},
        Case{"f(a b)",
             "ERROR: <input>:1:5: Syntax error: mismatched input 'b' expecting {')', ','}\n"
             " | f(a b)\n | ....^"},
        Case{"f(a,)", "ERROR: <input>:1:5: Syntax error: mismatched input ')' expecting " +
                          std::string(kExpectingExpr) + "\n | f(a,)\n | ....^"},
        Case{"[1 2]",
             "ERROR: <input>:1:4: Syntax error: mismatched input '2' expecting {']', ','}\n"
             " | [1 2]\n | ...^"},
        Case{"{1 2}",
             "ERROR: <input>:1:4: Syntax error: mismatched input '2' expecting ':'\n"
             " | {1 2}\n | ...^"},
        Case{"a[1",
             "ERROR: <input>:1:4: Syntax error: mismatched input '<EOF>' expecting ']'\n"
             " | a[1\n | ...^"},
        Case{"a ? b",
             "ERROR: <input>:1:6: Syntax error: mismatched input '<EOF>' expecting ':'\n"
             " | a ? b\n | .....^"},
        // The middle operand of ?: is an ||-expression, as in CEL.g4.
        Case{"a ? b ? c : d : e",
             "ERROR: <input>:1:7: Syntax error: mismatched input '?' expecting ':'\n"
             " | a ? b ? c : d : e\n | ......^"},
        Case{"-!a", "ERROR: <input>:1:2: Syntax error: mismatched input '!' expecting " +
                        std::string(kExpectingExpr) + "\n | -!a\n | .^"},
        Case{"f(a, b)(c)",
             "ERROR: <input>:1:8: Syntax error: mismatched input '(' expecting <EOF>\n"
             " | f(a, b)(c)\n | .......^"},
        Case{"a | b",
             "ERROR: <input>:1:3: Syntax error: token recognition error at: '| '\n | a | b\n"
             " | ..^\n"
             "ERROR: <input>:1:5: Syntax error: mismatched input 'b' expecting <EOF>\n"
             " | a | b\n | ....^"},
        Case{"device.driver = 'x'",
             "ERROR: <input>:1:15: Syntax error: token recognition error at: '= '\n"
             " | device.driver = 'x'\n | ..............^\n"
             "ERROR: <input>:1:17: Syntax error: mismatched input ''x'' expecting <EOF>\n"
             " | device.driver = 'x'\n | ................^"},
        Case{"a &\n& b",
             "ERROR: <input>:1:3: Syntax error: token recognition error at: '&'\n | a &\n"
             " | ..^\n"
             "ERROR: <input>:2:1: Syntax error: token recognition error at: '& '\n | & b\n"
             " | ^\n"
             "ERROR: <input>:2:3: Syntax error: mismatched input 'b' expecting <EOF>\n"
             " | & b\n | ..^"},
        Case{"Foo{a: 1}",
             "ERROR: <input>:1:4: message construction is not supported\n | Foo{a: 1}\n"
             " | ...^"},
        Case{"a.b.C{}",
             "ERROR: <input>:1:6: message construction is not supported\n | a.b.C{}\n"
             " | .....^"},
        Case{"a.b(){}",
             "ERROR: <input>:1:6: Syntax error: mismatched input '{' expecting <EOF>\n"
             " | a.b(){}\n | .....^"}));

TEST(ParserErrorTest, CountsColumnsInCodePointsAndWidensCaretForWideText) {
  // 'é' is one column and one (narrow) code point.
  EXPECT_EQ(Render("'\xc3\xa9' + x +"),
            "ERROR: <input>:1:10: Syntax error: mismatched input '<EOF>' expecting " +
                std::string(kExpectingExpr) + "\n | '\xc3\xa9' + x +\n | .........^");
  // CJK characters are two columns wide: the caret line uses fullwidth dots under them.
  EXPECT_EQ(Render("'\xe6\x97\xa5\xe6\x9c\xac' == $"),
            "ERROR: <input>:1:9: Syntax error: token recognition error at: '$'\n"
            " | '\xe6\x97\xa5\xe6\x9c\xac' == $\n | .\xef\xbc\x8e\xef\xbc\x8e.....^\n"
            "ERROR: <input>:1:10: Syntax error: mismatched input '<EOF>' expecting " +
                std::string(kExpectingExpr) + "\n | '\xe6\x97\xa5\xe6\x9c\xac' == $\n" +
                " | .\xef\xbc\x8e\xef\xbc\x8e......^");
  // A caret under a wide character is itself fullwidth.
  EXPECT_EQ(Render("\xe6\x97\xa5"),
            "ERROR: <input>:1:1: Syntax error: token recognition error at: '\xe6\x97\xa5'\n"
            " | \xe6\x97\xa5\n | \xef\xbc\xbe\n"
            "ERROR: <input>:1:2: Syntax error: mismatched input '<EOF>' expecting " +
                std::string(kExpectingExpr) + "\n | \xe6\x97\xa5\n | \xef\xbc\x8e^");
}

TEST(ParserErrorTest, ShowsTabsAsSpaces) {
  EXPECT_EQ(Render("\ta +"),
            "ERROR: <input>:1:5: Syntax error: mismatched input '<EOF>' "
            "expecting " +
                std::string(kExpectingExpr) + "\n |  a +\n | ....^");
}

TEST(ParserErrorTest, ReportsEveryRecoverableProblemButStopsAtTheFirstSyntaxError) {
  const ParseResult result = Parse(Source{"if(1) + \"\\q\" + 99999999999999999999 + ) + ("});
  ASSERT_EQ(result.issues.size(), 4u);
  EXPECT_EQ(result.issues[0].message, "Syntax error: invalid escape sequence '\\q'");
  EXPECT_EQ(result.issues[1].message, "reserved identifier: if");
  EXPECT_EQ(result.issues[2].message, "invalid int literal");
  EXPECT_EQ(result.issues[3].message,
            "Syntax error: mismatched input ')' expecting " + std::string(kExpectingExpr));
  EXPECT_EQ(result.ast, nullptr);
}

// --- Expressions from the seed manifests and vendor documentation -------------------------------

INSTANTIATE_TEST_SUITE_P(
    DraSelectors, ParserGoldenTest,
    testing::Values(
        // fixtures/seeds/02-deviceclass-a100-80g.yaml
        Case{"device.driver == \"gpu.nvidia.com\" &&\n"
             "device.attributes[\"gpu.nvidia.com\"].productName.lowerAscii().contains(\"a100\") "
             "&&\n"
             "device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"80Gi\")) >= 0",
             "_&&_(_&&_(_==_(device.driver, \"gpu.nvidia.com\"), _[_](device.attributes, "
             "\"gpu.nvidia.com\").productName.lowerAscii().contains(\"a100\")), "
             "_>=_(_[_](device.capacity, \"gpu.nvidia.com\").memory.compareTo(quantity("
             "\"80Gi\")), 0))"},
        // fixtures/seeds/03-deviceclass-gpu.yaml
        Case{"device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == "
             "'gpu'",
             "_&&_(_==_(device.driver, \"gpu.nvidia.com\"), _==_(_[_](device.attributes, "
             "\"gpu.nvidia.com\").type, \"gpu\"))"},
        // fixtures/seeds/14-claim-fallback-l4-or-a100.yaml
        Case{"device.attributes[\"gpu.nvidia.com\"].productName.contains(\"A100\") &&\n"
             "device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"40Gi\")) >= 0",
             "_&&_(_[_](device.attributes, \"gpu.nvidia.com\").productName.contains(\"A100\"), "
             "_>=_(_[_](device.capacity, \"gpu.nvidia.com\").memory.compareTo(quantity("
             "\"40Gi\")), 0))"},
        Case{"device.attributes[\"gpu.nvidia.com\"].productName.contains(\"L4\")",
             "_[_](device.attributes, \"gpu.nvidia.com\").productName.contains(\"L4\")"},
        // Vendor examples.
        Case{"device.attributes[\"gpu.nvidia.com\"].cudaComputeCapability.isGreaterThan("
             "semver(\"8.0.0\"))",
             "_[_](device.attributes, \"gpu.nvidia.com\").cudaComputeCapability.isGreaterThan("
             "semver(\"8.0.0\"))"},
        Case{"device.attributes[\"gpu.nvidia.com\"].productName.lowerAscii().matches("
             "\"^.*a100.*$\")",
             "_[_](device.attributes, \"gpu.nvidia.com\").productName.lowerAscii().matches("
             "\"^.*a100.*$\")"},
        // Kubernetes dra/cel/compile_test.go.
        Case{"device.attributes[\"dra.example.com\"].name.isGreaterThan(semver(\"v0.0.1\", "
             "true)) && isSemver(\"v1.0.0\", true)",
             "_&&_(_[_](device.attributes, \"dra.example.com\").name.isGreaterThan(semver("
             "\"v0.0.1\", true)), isSemver(\"v1.0.0\", true))"},
        Case{"device.attributes.exists_one(x, x == \"dra.example.com\")",
             "__comprehension__(iter: x, range: device.attributes, accu: @result, init: 0, "
             "cond: true, step: _?_:_(_==_(x, \"dra.example.com\"), _+_(@result, 1), @result), "
             "result: _==_(@result, 1))"},
        Case{"cel.bind(dra, device.attributes[\"dra.example.com\"], dra.name)",
             "__comprehension__(iter: #unused, range: [], accu: dra, init: "
             "_[_](device.attributes, \"dra.example.com\"), cond: false, step: dra, result: "
             "dra.name)"},
        Case{"1 in device.attributes[\"dra.example.com\"].names",
             "@in(1, _[_](device.attributes, \"dra.example.com\").names)"},
        Case{"device.attributes[\"dra.example.com\"].services.split(\"example\").size() >= 2",
             "_>=_(_[_](device.attributes, \"dra.example.com\").services.split(\"example\")."
             "size(), 2)"},
        Case{"\"name\" in device.capacity[\"dra.example.com\"] && "
             "device.capacity[\"dra.example.com\"].name.isGreaterThan(quantity(\"1Ki\"))",
             "_&&_(@in(\"name\", _[_](device.capacity, \"dra.example.com\")), "
             "_[_](device.capacity, \"dra.example.com\").name.isGreaterThan(quantity(\"1Ki\")))"},
        Case{"device.allowMultipleAllocations == true",
             "_==_(device.allowMultipleAllocations, true)"}));

// --- Limits and robustness ----------------------------------------------------------------------

std::string Repeat(std::string_view s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(ParserLimitTest, NestingWithinTheLimitParses) {
  EXPECT_EQ(Render(Repeat("(", 200) + "1" + Repeat(")", 200)), "1");
  EXPECT_EQ(Render(Repeat("[", 200) + Repeat("]", 200)).substr(0, 4), "[[[[");
  EXPECT_EQ(Render("a" + Repeat(".b", 250)).size(), 1u + 2 * 250);
}

TEST(ParserLimitTest, DeepNestingReportsTheRecursionLimit) {
  for (const std::string& text :
       {Repeat("(", 10000) + "1" + Repeat(")", 10000), Repeat("(", 10000),
        Repeat("[", 10000) + Repeat("]", 10000), Repeat("{1:", 5000) + "1" + Repeat("}", 5000),
        Repeat("f(", 10000) + Repeat(")", 10000), Repeat("a ? b : ", 10000) + "c",
        "a" + Repeat(".b", 251), "a" + Repeat("[0]", 10000), "1" + Repeat(" + 1", 10000),
        "1" + Repeat(" == 1", 10000), "x" + Repeat(".f()", 10000),
        Repeat("x.all(y, ", 5000) + "true" + Repeat(")", 5000)}) {
    const ParseResult result = Parse(Source{text});
    EXPECT_EQ(result.ast, nullptr) << text.substr(0, 40);
    ASSERT_FALSE(result.issues.empty()) << text.substr(0, 40);
    EXPECT_EQ(result.issues.back().message, "expression recursion limit exceeded: 250")
        << text.substr(0, 40);
  }
}

TEST(ParserLimitTest, LongChainsOfLogicalOperatorsStayShallow) {
  const ParseResult result = Parse(Source{"a" + Repeat(" || a", 5000) + Repeat(" && b", 5000)});
  ASSERT_NE(result.ast, nullptr);
  EXPECT_LE(result.ast->root().height(), 30);
}

TEST(ParserLimitTest, RepeatedUnaryOperatorsCollapse) {
  EXPECT_EQ(Render(Repeat("!", 10001) + "a"), "!_(a)");
  EXPECT_EQ(Render(Repeat("-", 10000) + "a"), "a");
}

TEST(ParserLimitTest, RecursionLimitIsConfigurable) {
  ParserOptions options;
  options.max_recursion_depth = 3;
  EXPECT_EQ(Render("a.b.c.d", options), "a.b.c.d");
  EXPECT_EQ(Render("a.b.c.d.e", options),
            "ERROR: <input>:1:8: expression recursion limit exceeded: 3\n | a.b.c.d.e\n"
            " | .......^");
  EXPECT_EQ(Render("((1))", options), "1");
  EXPECT_EQ(Render("(((1)))", options),
            "ERROR: <input>:1:4: expression recursion limit exceeded: 3\n | (((1)))\n"
            " | ...^");
}

TEST(ParserLimitTest, StopsAfterTheErrorReportingLimit) {
  const ParseResult result = Parse(Source{Repeat("$", 500)});
  ASSERT_EQ(result.issues.size(), 101u);
  EXPECT_EQ(result.issues[99].message, "Syntax error: token recognition error at: '$'");
  EXPECT_EQ(result.issues[100].message, "Syntax error: More than 100 syntax errors");
  EXPECT_EQ(result.issues[100].offset, 100u);
}

TEST(ParserLimitTest, RejectsExpressionsOverTheCodePointLimit) {
  ParserOptions options;
  options.expression_size_code_point_limit = 4;
  EXPECT_EQ(Render("'\xc3\xa9\xc3\xa9'", options), "\"\xc3\xa9\xc3\xa9\"");  // 4 code points
  const ParseResult result = Parse(Source{"aaaaa"}, options);
  ASSERT_EQ(result.issues.size(), 1u);
  EXPECT_EQ(result.issues[0].message, "expression code point size exceeds limit: size: 5, limit 4");
}

TEST(ParserRobustnessTest, UnterminatedAndBrokenLiteralsReturnIssues) {
  for (const char* text :
       {"\"",   "'",       "'''",       "\"\"\"",      "r'",  "b\"", "br'''x", "\"\\",
        "'\\'", "\"\\x\"", "\"\\u12\"", "\"\\U0000\"", "`",   "``",  "`a",     "0x",
        "1e",   ".",       "..5",       "a.",          "a.?", "a[?", "{?",     "[?]",
        "?",    ":",       "&",         "|",           "="}) {
    const ParseResult result = Parse(Source{text});
    EXPECT_EQ(result.ast, nullptr) << text;
    EXPECT_FALSE(result.issues.empty()) << text;
    for (const Issue& issue : result.issues) EXPECT_LE(issue.offset, std::string(text).size());
  }
}

// Any input yields exactly one of an AST or issues, with offsets inside the text and a rendering
// that is valid UTF-8.
void ExpectWellFormed(const std::string& text) {
  const Source source{text};
  const ParseResult result = Parse(source);
  ASSERT_EQ(result.ast == nullptr, !result.issues.empty()) << testing::PrintToString(text);
  for (const Issue& issue : result.issues) ASSERT_LE(issue.offset, text.size());
  const std::string rendered = source.DisplayIssues(result.issues);
  ASSERT_EQ(SanitizeUtf8(rendered), rendered);
  if (result.ast != nullptr) {
    ASSERT_LE(result.ast->root().height(), 260);
    DebugString(result.ast->root());
  }
}

TEST(ParserRobustnessTest, RandomBytesNeverCrash) {
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<int> length(0, 300);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int i = 0; i < 3000; ++i) {
    std::string text(length(rng), '\0');
    for (char& c : text) c = static_cast<char>(byte(rng));
    ExpectWellFormed(text);
  }
}

TEST(ParserRobustnessTest, RandomTokenSoupNeverCrashes) {
  static constexpr std::string_view kPieces[] = {
      "a",    "b",    ".",    "?",  ":",  "(",    ")",   "[",   "]",      "{",
      "}",    ",",    "+",    "-",  "*",  "/",    "%",   "!",   "==",     "!=",
      "<",    "<=",   ">",    ">=", "&&", "||",   "in",  "1",   "1u",     "1.5",
      "'s'",  "b'x'", "\"\\", "'",  "\"", "has(", "all", "map", "exists", "cel",
      "bind", "true", "null", " ",  "\n", "`",    "e",   "0x",  "if",     "\xe6\x97\xa5",
      "\xff"};
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> count(0, 60);
  std::uniform_int_distribution<size_t> piece(0, std::size(kPieces) - 1);
  for (int i = 0; i < 20000; ++i) {
    std::string text;
    for (int n = count(rng); n > 0; --n) text += kPieces[piece(rng)];
    ExpectWellFormed(text);
  }
}

// The recursion limit bounds stack use: the deepest accepted expressions of every nesting shape
// parse, print and destroy on a thread with a 1 MiB stack (about 3x what they need; sanitizers
// inflate frames about 4x, so those builds get 4 MiB).
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kSmallStack = 4 << 20;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr size_t kSmallStack = 4 << 20;
#else
constexpr size_t kSmallStack = 1 << 20;
#endif
#else
constexpr size_t kSmallStack = 1 << 20;
#endif

void* ParseDeepExpressions(void* ok) {
  for (const std::string& text :
       {Repeat("(", 249) + "1" + Repeat(")", 249), "a" + Repeat(".b", 250),
        Repeat("[", 249) + Repeat("]", 249), Repeat("f(", 249) + Repeat(")", 249),
        Repeat("{1: ", 249) + "1" + Repeat("}", 249), Repeat("a ? b : ", 248) + "c",
        Repeat("a < (b + (c * ", 80) + "d" + Repeat("))", 80),
        Repeat("x.all(y, ", 120) + "true" + Repeat(")", 120)}) {
    const ParseResult result = Parse(Source{text});
    if (result.ast == nullptr) return nullptr;
    DebugString(result.ast->root());
  }
  *static_cast<bool*>(ok) = true;
  return nullptr;
}

TEST(ParserRobustnessTest, DeepestAcceptedExpressionsFitInASmallStack) {
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, kSmallStack), 0);
  bool ok = false;
  pthread_t thread;
  ASSERT_EQ(pthread_create(&thread, &attr, &ParseDeepExpressions, &ok), 0);
  ASSERT_EQ(pthread_join(thread, nullptr), 0);
  pthread_attr_destroy(&attr);
  EXPECT_TRUE(ok);
}

}  // namespace
}  // namespace qm::cel
