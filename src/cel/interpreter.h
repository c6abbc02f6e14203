#pragma once

// The CEL evaluator: walks a parsed (macro-expanded) Ast and computes its Value against an
// Activation (the variables), with CEL's semantics as cel-go implements them for Kubernetes.
//
// Semantics (cel-spec langdef.md, cel-go):
//   * Errors are values (cel/value.h). `a && b` is false if either side is false, and `a || b`
//     true if either side is true, even when the other side is an error ("commutative" error
//     handling); otherwise the first error (left first) is the result. `?:` requires a bool
//     condition. All other functions are strict: an error argument is the result.
//   * int and uint arithmetic is checked: "integer overflow" / "unsigned integer overflow",
//     "division by zero", "modulus by zero". Doubles follow IEEE 754.
//   * `==`/`!=` are heterogeneous (1 == 1u == 1.0; different types are unequal); `<` and friends
//     compare int, uint and double across types, and strings, bytes, bools within their type.
//   * A function or operator applied to arguments it has no overload for yields
//     "no such overload: <function>(<arg types>)" (method calls: "<target type>.<function>(...)").
//   * Library coverage: the CEL standard functions including timestamps and durations
//     (cel/time_lib.h), ext.Strings v2 (via cel/strings_lib.h), Kubernetes library.Lists and
//     library.Regex (find, findAll), ext.Lists v3 (slice, flatten, distinct, reverse, sort,
//     lists.range), ext.Sets, optional types, Kubernetes Quantity, Semver, IP, CIDR, URLs
//     (cel/net_lib.h) and Format (cel/format_lib.h) libraries, and DRA's includes().
//     ext.Lists is not in Kubernetes' environment: the checker (cel/checker.h), and so
//     CompileSelector, rejects it; only callers that evaluate unchecked Asts can reach it.
//
// Cost. Evaluation counts cost as cel-go's runtime cost tracker does, approximately: identifiers,
// field selections and index operations cost 1; constants, `&&`, `||` and `?:` themselves cost 0;
// list literals 10 and map literals 30; a function call costs 1, except functions whose work
// grows with their input, which cost ceil(size * 0.1) for strings and bytes (equality and
// ordering of strings: the smaller size; `+`: both sizes; contains: the product of both;
// matches: ceil((1 + size) * 0.1) * ceil(pattern size * 0.25)), and the number of elements for
// list scans (`in` on a list, list equality, the lists and sets libraries, includes). Everything
// a comprehension evaluates counts on every iteration. When the total passes
// EvalOptions::cost_limit, evaluation stops at once with the error
// "operation cancelled: actual cost limit exceeded", which no `&&`/`||` can absorb.
//
// Layout: this file's evaluator walks the tree, handles the operators that do not evaluate all
// their operands (`&&`, `||`, `?:`), comprehensions, literals, selections and indexing, and
// calls every other function through the function registry (cel/function_registry.h), filled by
// the libraries in cel/functions.h (interpreter.cc); call plans and the ConstantTable are built
// in interpreter_plan.cc.
//
// Thread-safety: Evaluate() keeps no state beyond the call, so the same Ast and Activation can be
// evaluated from many threads at once. The optional RegexCache is internally synchronized.

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "cel/ast.h"
#include "cel/function_registry.h"
#include "cel/value.h"
#include "common/mutex.h"

namespace re2 {
class RE2;
}  // namespace re2

namespace qm::cel {

// The message of the error that ends an evaluation past its cost limit.
inline constexpr std::string_view kCostLimitExceeded =
    "operation cancelled: actual cost limit exceeded";

// Variables visible to an expression. Lookups are by exact name. The first two variables are
// stored inline, so the one-variable activation of a selector (`device`) does not allocate.
class Activation {
 public:
  // Adds or replaces a variable.
  void Insert(std::string name, Value value);
  // The variable's value, or nullptr.
  const Value* Find(std::string_view name) const;

 private:
  static constexpr size_t kInline = 2;
  std::array<std::pair<std::string, Value>, kInline> inline_;
  size_t inline_size_ = 0;
  std::vector<std::pair<std::string, Value>> more_;
};

// Compiled regular expressions shared across evaluations, keyed by pattern text. Thread-safe.
// Holds at most `capacity` patterns; when full, it is emptied and refilled.
class RegexCache {
 public:
  explicit RegexCache(size_t capacity = 1024) : capacity_(capacity) {}
  RegexCache(const RegexCache&) = delete;
  RegexCache& operator=(const RegexCache&) = delete;

  // The compiled pattern, or nullptr (and *error set to Go's message) when it is invalid.
  std::shared_ptr<const re2::RE2> Get(std::string_view pattern, std::string* error);

 private:
  const size_t capacity_;
  qm::Mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const re2::RE2>> cache_ ABSL_GUARDED_BY(mu_);
};

// How the evaluator runs a call node, resolved once from its function name and shape so that
// evaluation does not compare function names. kGeneric calls run the function registry's
// overload that accepts their argument kinds (cel/function_registry.h).
enum class CallPlan : uint8_t {
  kGeneric,
  kAnd,               // `_&&_`
  kOr,                // `_||_`
  kConditional,       // `_?_:_` with three arguments
  kNotStrictlyFalse,  // `@not_strictly_false` with one argument
  kEquals,            // `_==_`, two arguments, no target
  kNotEquals,         // `_!=_`, two arguments, no target
  kIndex,             // `_[_]`, two arguments, no target
  // `_+_` and `cel.@mapInsert` without target whose first argument is the comprehension
  // accumulator (kAccumulatorVar), as the map/filter/transform macros expand: the accumulator
  // is extended in place when nothing else shares it.
  kAccumulateList,
  kAccumulateMap,
  // A global parsing function (quantity, semver, isQuantity, isSemver, ip, isIP, cidr, isCIDR,
  // url, isURL, timestamp, duration) with literal arguments: its value is computed once (only
  // ConstantTable assigns this plan; PlanCall never returns it).
  kFolded,
};

// A call node's plan and its function's overload candidates in the standard registry
// (StandardFunctions(), cel/functions.h), resolved once per call site.
struct CallSite {
  CallPlan plan = CallPlan::kGeneric;
  // The function as written: a receiver function when the call has a target, else global.
  Candidates candidates;
  // For `ns.f(...)` where `ns` is an identifier naming one of the function namespaces
  // (optional, sets, strings, lists, cel, ip, format): the global function "ns.f", called
  // instead when no variable named `ns` is bound.
  bool namespaced = false;
  std::string qualified_name;
  Candidates qualified;
};

// An Ast's evaluation plan, built once per compiled expression so that evaluation does not redo
// (and allocate for) it on every run: the values of the literal nodes, the field names of
// selections as map keys, and the CallSite of every call. Immutable; safe to share across
// threads. It describes the Ast it was built from and no other.
class ConstantTable {
 public:
  explicit ConstantTable(const Ast& ast);
  // The value of literal node `id`, or nullptr when `id` is not a literal of this Ast.
  const Value* Find(int64_t id) const {
    return InRange(id) && values_[id].has_value() ? &*values_[id] : nullptr;
  }
  // The field of selection node `id` as a string Value, or nullptr when `id` is not a selection.
  const Value* FieldKey(int64_t id) const {
    return InRange(id) && fields_[id].has_value() ? &*fields_[id] : nullptr;
  }
  // The plan of call node `id`; kGeneric for any other id.
  CallPlan call_plan(int64_t id) const {
    return InRange(id) ? calls_[id].plan : CallPlan::kGeneric;
  }
  // The call site of call node `id`, or nullptr when `id` is not a node of this Ast.
  const CallSite* call_site(int64_t id) const { return InRange(id) ? &calls_[id] : nullptr; }
  // For a kFolded call node: its value (an error value when the call fails), or nullptr.
  const Value* FoldedValue(int64_t id) const {
    return InRange(id) && folded_[id].has_value() ? &*folded_[id] : nullptr;
  }
  // For a kFolded call node: the cost an evaluation of the call spends (0 for other ids).
  uint64_t folded_cost(int64_t id) const { return InRange(id) ? folded_costs_[id] : 0; }

 private:
  bool InRange(int64_t id) const { return id > 0 && static_cast<size_t>(id) < values_.size(); }

  // All indexed by node id, with the same size.
  std::vector<std::optional<Value>> values_;
  std::vector<std::optional<Value>> fields_;
  std::vector<CallSite> calls_;
  std::vector<std::optional<Value>> folded_;
  std::vector<uint64_t> folded_costs_;
};

// The CallPlan of a call (what ConstantTable records for it).
CallPlan PlanCall(const CallExpr& call);

// The Value of a literal.
Value ConstantValue(const Constant& constant);

struct EvalOptions {
  // Kubernetes' runtime limit for CEL selectors (cel.CostLimit).
  uint64_t cost_limit = 1'000'000;
  // Optional; without it, matches() compiles its pattern on every call.
  RegexCache* regex_cache = nullptr;
  // Optional; the literals of the evaluated Ast, prebuilt (see ConstantTable).
  const ConstantTable* constants = nullptr;
};

struct EvalResult {
  // The result; kind() == ValueKind::kError when evaluation failed.
  Value value;
  // The cost spent (at most cost_limit + the cost of the step that crossed it).
  uint64_t cost = 0;

  bool ok() const { return !value.IsError(); }
  // REQUIRES: !ok().
  const std::string& error() const { return value.error_message(); }
};

// Evaluates `ast` with the variables in `vars`. Never throws; every failure is an error value.
EvalResult Evaluate(const Ast& ast, const Activation& vars, const EvalOptions& options = {});

}  // namespace qm::cel
