#pragma once

// The CEL parser: expression text -> Ast (cel/ast.h), the first stage of
// parse -> check -> plan -> evaluate.
//
// Syntax is CEL's (cel-spec langdef.md, cel-go's CEL.g4), with the precedence, lowest first:
//   ?:  (right-assoc; the middle operand is an ||-expression)
//   ||  &&  (chains become balanced trees, as in cel-go, so long chains stay shallow)
//   < <= >= > == != in  (one level, left-assoc)
//   + -   then   * / %   (left-assoc)
//   unary ! and - (repeated: an even count cancels out; `-` directly before an int or double
//   literal makes a negative literal, so -9223372036854775808 is valid)
//   postfix .f  .?f  .f(args)  [i]  [?i]  and primaries: identifiers (optionally `.name`),
//   global calls, (e), lists [a, ?b,], maps {k: v, ?k: v,}, literals.
// Literals: ints (decimal, 0x hex), uints (1u, 0x1U), doubles (1.5, 1e3, .5, 1.5e-3; as in
// Kubernetes, `1.` is not a double), strings and bytes in single, double or triple quotes, raw
// (r"...") or not, with every CEL escape (\a \b \f \n \r \t \v \\ \' \" \` \? \ooo \xHH \uHHHH
// \UHHHHHHHH; \u and \U only in strings), true, false, null. Field names after '.' may be
// backtick-quoted (a.`b-c`). Comments run from // to the end of the line.
// Reserved words are rejected as identifiers ("reserved identifier: if"); `in`, `true`,
// `false` and `null` are keywords. Message construction (`T{f: v}`) is rejected.
//
// Problems in the expression are data, never a Status and never an exception: Parse() returns
// the issues with byte offsets, and Source::DisplayIssues() renders them as Kubernetes does.
// Messages follow cel-go's words ("Syntax error: mismatched input '<EOF>' expecting ...",
// "Syntax error: token recognition error at: '$'", "reserved identifier: var",
// "invalid int literal", "argument must be a simple name", "invalid argument to has() macro",
// "expression recursion limit exceeded: 250"); strings get clearer messages than ANTLR's
// ("Syntax error: unterminated string literal", "Syntax error: invalid escape sequence '\q'").
// The parser reports lexical errors and the problems it can recover from, and stops at the first
// syntax error.
//
// Robustness: any byte sequence is accepted as input; parsing is linear in the input, never
// crashes, and bounds its own stack use through ParserOptions::max_recursion_depth, which also
// bounds the height of the returned tree. At the default limit the deepest accepted expressions
// need under 400 KiB of stack in optimized and debug builds (about 1.4 MiB under ASan).

#include <memory>
#include <vector>

#include "cel/ast.h"
#include "cel/source.h"

namespace qm::cel {

struct ParserOptions {
  // Maximum nesting of sub-expressions (parentheses, arguments, ternaries) and maximum height of
  // operator and member chains such as a.b.c... or 1 + 1 + ...; beyond it the issue
  // "expression recursion limit exceeded: <n>" is reported. Must be >= 1.
  int max_recursion_depth = 250;
  // Expressions longer than this many code points are rejected before lexing
  // ("expression code point size exceeds limit: size: <n>, limit <m>"). Kubernetes' own, lower
  // limit on selector length (10 KiB) is checked by the caller.
  int expression_size_code_point_limit = 100000;
  // After this many issues, one more ("Syntax error: More than <n> syntax errors") is added and
  // parsing stops.
  int error_reporting_limit = 100;
  // Expand macros (has, all, exists, exists_one, map, filter, cel.bind). When false they are
  // left as plain calls.
  bool enable_macros = true;
  // Optional syntax: `a.?f`, `a[?k]`, `[?e]`, `{?k: v}` and the optMap/optFlatMap macros.
  // When false these report "unsupported syntax '.?'" (or '[?', '?').
  bool enable_optional_syntax = true;
  // Two-variable comprehension macros: all/exists/existsOne/exists_one with three arguments,
  // transformList, transformMap, transformMapEntry.
  bool enable_two_var_comprehensions = true;
};

// The outcome of parsing. Exactly one of these holds:
//   - issues is empty and ast is the parsed, macro-expanded expression;
//   - issues is non-empty and ast is null.
struct ParseResult {
  std::unique_ptr<Ast> ast;
  std::vector<Issue> issues;
};

// Parses `source.text()`. Thread-safe (no shared state); the result does not refer to `source`.
ParseResult Parse(const Source& source, const ParserOptions& options = {});

}  // namespace qm::cel
