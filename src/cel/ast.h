#pragma once

// The abstract syntax tree of a CEL expression, as produced by the parser (cel/parser.h) and
// consumed by the checker and the planner.
//
// Shape. The tree follows CEL's canonical expression model (cel-spec syntax.proto), so every
// later stage sees only seven kinds of node:
//   - Constant: null, bool, int64, uint64, double, string (valid UTF-8) or bytes;
//   - Ident: a name, possibly with a leading '.' (`.device` names the root scope);
//   - Select: `operand.field`. test_only() is set for has(operand.field); optional() for the
//     optional-syntax form `operand.?field`;
//   - Call: every operator and function call. Operators use the names in cel/operators.h
//     (`a + b` is Call "_+_"(a, b); `a[i]` is "_[_]"(a, i); `a[?i]` is "_[?_]"(a, i); `x in y`
//     is "@in"(x, y)). A method call `t.f(x)` has target() == t; a global call has no target.
//     Namespaced functions the user writes (`optional.of(x)`, `sets.contains(a, b)`) are parsed
//     as method calls on an identifier; the checker resolves them to qualified global names.
//   - List: `[a, ?b]`; optional_indices() lists the elements written with '?' (the element is an
//     optional value that is skipped when empty);
//   - Map: `{k: v, ?k2: v2}`; an optional entry is written `?key: value`;
//   - Comprehension: the fold that every macro expands to (see below).
// Message construction (`Type{field: value}`) is not part of the DRA environment and is rejected
// by the parser.
//
// Macros are expanded at parse time, as cel-go does, so the checker and the evaluator only ever
// see Comprehension nodes and plain calls. Accumulator variable: "@result" (kAccumulatorVar).
//   has(e.f)                   Select(e, f, test_only)
//   r.all(x, p)                fold x over r: init true, cond @not_strictly_false(@result),
//                              step @result && p, result @result
//   r.exists(x, p)             init false, cond @not_strictly_false(!@result),
//                              step @result || p, result @result
//   r.exists_one(x, p)         init 0, cond true, step p ? @result + 1 : @result,
//                              result @result == 1
//   r.map(x, f)                init [], cond true, step @result + [f], result @result
//   r.map(x, p, f)             as map, step p ? @result + [f] : @result
//   r.filter(x, p)             init [], cond true, step p ? @result + [x] : @result
//   cel.bind(v, init, body)    iter "#unused" over [], accu v = init, cond false, step v,
//                              result body (a let-binding evaluated once)
// Two-variable comprehensions (Kubernetes 1.32+, ParserOptions::enable_two_var_comprehensions):
//   r.all(k, v, p), r.exists(k, v, p), r.existsOne(k, v, p) / r.exists_one(k, v, p): as the
//     one-variable forms with iter_var2() set (list: index and element; map: key and value);
//   r.transformList(k, v, [p,] f): as map/filter; r.transformMap(k, v, [p,] f): init {},
//     step cel.@mapInsert(@result, k, f); r.transformMapEntry(k, v, [p,] f): init {},
//     step cel.@mapInsert(@result, f) (f yields a one-entry map).
// Optional types (ParserOptions::enable_optional_syntax):
//   o.optMap(x, f)     o.hasValue() ? optional.of(<bind x = o.value() in f>) : optional.none()
//   o.optFlatMap(x, f) o.hasValue() ? <bind x = o.value() in f> : optional.none()
// Synthesized nodes carry the offset of the macro call's '(' so errors point at the call.
//
// Positions. Every node has a unique id (1..Ast::max_id(), assigned in creation order) and the
// byte offset of the token that produced it, following cel-go so checker messages point at the
// same column as Kubernetes: identifiers and literals at their first character (a negative
// literal at its '-'), operators at the operator token, `.f` at the '.', `[i]` at the '[', calls
// at their '(', lists at '[', maps at '{', map entries at their ':'.
//
// Immutability. An Expr has only const accessors once built; trees are built bottom-up through
// ExprFactory (used by the parser and its macros) and never change afterwards. A finished tree is
// safe to read from many threads. Node height is bounded by the parser's recursion limit, so
// recursive walks (including destruction) have bounded stack depth.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace qm::cel {

// Name of the accumulator variable of the comprehensions that macros expand to.
inline constexpr std::string_view kAccumulatorVar = "@result";
// Iteration variable of cel.bind()/optMap() expansions, which iterate over an empty list.
inline constexpr std::string_view kUnusedIterVar = "#unused";

enum class ConstantKind { kNull, kBool, kInt, kUint, kDouble, kString, kBytes };

// A literal value. String values are valid UTF-8; bytes values are arbitrary octets.
class Constant {
 public:
  static Constant Null() { return Constant(ConstantKind::kNull, std::monostate{}); }
  static Constant Bool(bool v) { return Constant(ConstantKind::kBool, v); }
  static Constant Int(int64_t v) { return Constant(ConstantKind::kInt, v); }
  static Constant Uint(uint64_t v) { return Constant(ConstantKind::kUint, v); }
  static Constant Double(double v) { return Constant(ConstantKind::kDouble, v); }
  static Constant String(std::string v) { return Constant(ConstantKind::kString, std::move(v)); }
  static Constant Bytes(std::string v) { return Constant(ConstantKind::kBytes, std::move(v)); }

  ConstantKind kind() const { return kind_; }
  // Each accessor REQUIRES the matching kind().
  bool bool_value() const { return *std::get_if<bool>(&value_); }
  int64_t int_value() const { return *std::get_if<int64_t>(&value_); }
  uint64_t uint_value() const { return *std::get_if<uint64_t>(&value_); }
  double double_value() const { return *std::get_if<double>(&value_); }
  const std::string& string_value() const { return *std::get_if<std::string>(&value_); }
  const std::string& bytes_value() const { return *std::get_if<std::string>(&value_); }

 private:
  using Value = std::variant<std::monostate, bool, int64_t, uint64_t, double, std::string>;
  Constant(ConstantKind kind, Value value) : kind_(kind), value_(std::move(value)) {}

  ConstantKind kind_;
  Value value_;
};

class Expr;

struct IdentExpr {
  std::string name;
};

struct SelectExpr {
  std::unique_ptr<Expr> operand;  // never null
  std::string field;
  bool test_only = false;  // has(operand.field)
  bool optional = false;   // operand.?field
};

struct CallExpr {
  std::string function;
  std::unique_ptr<Expr> target;  // null for a global call
  std::vector<std::unique_ptr<Expr>> args;
};

struct ListExpr {
  std::vector<std::unique_ptr<Expr>> elements;
  std::vector<int32_t> optional_indices;  // ascending indices of `?elem` elements
};

struct MapEntry {
  int64_t id = 0;
  size_t offset = 0;  // the ':' of the entry
  std::unique_ptr<Expr> key;
  std::unique_ptr<Expr> value;
  bool optional = false;  // `?key: value`
};

struct MapExpr {
  std::vector<MapEntry> entries;
};

// A fold: for each element of iter_range (bound to iter_var, and with iter_var2 the index/key
// and value), while loop_condition holds, accu_var = loop_step; the value is result. accu_var
// starts as accu_init. iter_var2 is empty for one-variable comprehensions.
struct ComprehensionExpr {
  std::string iter_var;
  std::string iter_var2;
  std::unique_ptr<Expr> iter_range;
  std::string accu_var;
  std::unique_ptr<Expr> accu_init;
  std::unique_ptr<Expr> loop_condition;
  std::unique_ptr<Expr> loop_step;
  std::unique_ptr<Expr> result;
};

// The kind of an Expr; the order matches Expr's internal variant.
enum class ExprKind { kConstant, kIdent, kSelect, kCall, kList, kMap, kComprehension };

class Expr {
 public:
  Expr(const Expr&) = delete;
  Expr& operator=(const Expr&) = delete;
  ~Expr();

  int64_t id() const { return id_; }
  size_t offset() const { return offset_; }
  // Edges on the longest path from this node down to a leaf (a constant or identifier is 0).
  int height() const { return height_; }
  ExprKind kind() const { return static_cast<ExprKind>(node_.index()); }

  // Each accessor REQUIRES the matching kind().
  const Constant& constant() const { return *std::get_if<Constant>(&node_); }
  const IdentExpr& ident() const { return *std::get_if<IdentExpr>(&node_); }
  const SelectExpr& select() const { return *std::get_if<SelectExpr>(&node_); }
  const CallExpr& call() const { return *std::get_if<CallExpr>(&node_); }
  const ListExpr& list() const { return *std::get_if<ListExpr>(&node_); }
  const MapExpr& map() const { return *std::get_if<MapExpr>(&node_); }
  const ComprehensionExpr& comprehension() const { return *std::get_if<ComprehensionExpr>(&node_); }

 private:
  friend class ExprFactory;
  using Node =
      std::variant<Constant, IdentExpr, SelectExpr, CallExpr, ListExpr, MapExpr, ComprehensionExpr>;
  Expr(int64_t id, size_t offset, Node node);

  int64_t id_;
  size_t offset_;
  int height_ = 0;
  Node node_;
};

// Builds Expr trees and hands out ids (1, 2, 3, ... in creation order). Not thread-safe; one
// factory builds one tree. Every argument that is a std::unique_ptr<Expr> must be non-null.
class ExprFactory {
 public:
  std::unique_ptr<Expr> NewConstant(size_t offset, Constant value);
  std::unique_ptr<Expr> NewIdent(size_t offset, std::string name);
  std::unique_ptr<Expr> NewSelect(size_t offset, std::unique_ptr<Expr> operand, std::string field,
                                  bool optional = false);
  // has(operand.field).
  std::unique_ptr<Expr> NewPresenceTest(size_t offset, std::unique_ptr<Expr> operand,
                                        std::string field);
  std::unique_ptr<Expr> NewCall(size_t offset, std::string function,
                                std::vector<std::unique_ptr<Expr>> args);
  std::unique_ptr<Expr> NewMemberCall(size_t offset, std::string function,
                                      std::unique_ptr<Expr> target,
                                      std::vector<std::unique_ptr<Expr>> args);
  std::unique_ptr<Expr> NewList(size_t offset, std::vector<std::unique_ptr<Expr>> elements,
                                std::vector<int32_t> optional_indices = {});
  MapEntry NewMapEntry(size_t offset, std::unique_ptr<Expr> key, std::unique_ptr<Expr> value,
                       bool optional = false);
  std::unique_ptr<Expr> NewMap(size_t offset, std::vector<MapEntry> entries);
  std::unique_ptr<Expr> NewComprehension(size_t offset, std::string iter_var, std::string iter_var2,
                                         std::unique_ptr<Expr> iter_range, std::string accu_var,
                                         std::unique_ptr<Expr> accu_init,
                                         std::unique_ptr<Expr> loop_condition,
                                         std::unique_ptr<Expr> loop_step,
                                         std::unique_ptr<Expr> result);
  // A deep copy of `expr` with fresh ids and the same offsets.
  std::unique_ptr<Expr> Copy(const Expr& expr);

  // Splits a Select node into its operand and field (used by has()).
  // REQUIRES: select->kind() == ExprKind::kSelect.
  static std::unique_ptr<Expr> TakeSelectOperand(std::unique_ptr<Expr> select, std::string* field);

  // The largest id handed out so far (0 before the first node).
  int64_t last_id() const { return last_id_; }

 private:
  std::unique_ptr<Expr> Finish(size_t offset, Expr::Node node);

  int64_t last_id_ = 0;
};

// A parsed expression: the root and the id range. Immutable and thread-safe to share.
class Ast {
 public:
  // REQUIRES: root != nullptr; every id in the tree is in [1, max_id].
  Ast(std::unique_ptr<Expr> root, int64_t max_id) : root_(std::move(root)), max_id_(max_id) {}

  const Expr& root() const { return *root_; }
  // Ids are in [1, max_id()], so side tables (types, references) can be vectors indexed by id.
  int64_t max_id() const { return max_id_; }

 private:
  std::unique_ptr<Expr> root_;
  int64_t max_id_;
};

struct DebugStringOptions {
  bool ids = false;      // append "#<id>" to every node
  bool offsets = false;  // append "@<byte offset>" to every node
};

// A compact, canonical, single-line rendering of a tree, for tests and logs:
//   constants  null true 42 -7 42u 1.5 1e+100 "a\"b" b"\x00\xff"
//   ident      a  .a
//   select     a.b  a.?b  a.b~test-only  a.`b-c`
//   call       _+_(a, b)  f(x)  t.f(x)
//   list/map   [a, ?b]  {k: v, ?k2: v2}
//   fold       __comprehension__(iter: x, range: r, accu: @result, init: true,
//              cond: @not_strictly_false(@result), step: _&&_(@result, p), result: @result)
//              (on one line; "iter2: y" follows "iter" for two-variable comprehensions)
// Doubles print in their shortest round-trip form with ".0" added when it looks like an int.
std::string DebugString(const Expr& expr, const DebugStringOptions& options = {});

// Quotes a string as a CEL string literal ("..."), escaping '"', '\\' and control characters.
std::string QuoteString(std::string_view value);

}  // namespace qm::cel
