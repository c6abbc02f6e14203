#pragma once

// The CEL type checker for DRA device selectors: the second stage of
// parse -> check -> evaluate. It types a parsed (macro-expanded) Ast against the DRA environment
// and estimates the worst-case cost of evaluating it, as cel-go's checker and cost estimator do
// for Kubernetes.
//
// Environment. One variable, `device` (kubernetes.DRADevice) with the fields
//   driver: string, attributes: map(string, map(string, dyn)),
//   capacity: map(string, map(string, kubernetes.Quantity)), allowMultipleAllocations: bool;
// the type names bool, int, uint, double, string, bytes, list, map, null_type, type and
// optional_type as identifiers; and an overload table for every function and operator that
// Kubernetes' DRA environment declares (base environment 1.32-1.34 plus DRA's cel.bind and
// includes), with argument and result types. Functions the evaluator implements beyond that
// (cel-go's ext.Lists: slice, flatten, distinct, reverse, sort, lists.range) are undeclared, as
// in cel-go: "undeclared reference to 'flatten' (in container '')". (Quantity's mul, div and
// divInt are newer than 1.34 and are implemented nowhere.) `dyn` matches every
// type. Comprehension variables get the element type of their range (key type for maps; index
// and element, or key and value, for two-variable forms); dyn when the range is dyn.
//
// Issues, in cel-go's words, each at the offset of the node it is about:
//   undeclared reference to 'x' (in container '')          unknown identifier or function
//   undefined field 'f'                                      unknown field of `device`
//   type 'int' does not support field selection
//   found no matching overload for '_+_' applied to '(int, string)'
//                                          (method calls: 'string.(int)', the target first)
//   expression of type 'int' cannot be range of a comprehension (must be list, map, or dynamic)
//   type 'string' does not match previous type 'int' in aggregate. Use 'dyn(x)' to make the
//     aggregate dynamic.                   (Kubernetes enables HomogeneousAggregateLiterals)
// `==` and `!=` require operands of the same type (or dyn), as cel-go's checker does even with
// CrossTypeNumericComparisons: `1 == 1.0` is "found no matching overload for '_==_' applied to
// '(int, double)'", while `dyn(1) == 1.0` checks (and is true at runtime). Result types of
// map()/filter() are list(T) when the step's type is known, otherwise list(dyn).
// Literal arguments of timestamp() and duration() are validated as Kubernetes'
// ValidateTimestampLiterals/ValidateDurationLiterals do: "invalid timestamp argument".
//
// Cost estimate (worst case, in cel-go's units, see interpreter.h for the runtime counterpart).
// Every identifier, selection, index and call costs 1, constants and `&&`, `||`, `?:` 0 (their
// operands are all counted), list literals 10 and map literals 30. Functions whose work grows
// with their input add: strings ceil(size * 0.1) (contains: ceil(a * b * 0.1); matches:
// ceil((1 + size) * 0.1) * ceil(pattern * 0.25)), list scans the number of elements (sets.*:
// the product). A comprehension costs range + init + N * (condition + step) + result, with N the
// range's maximum size. Sizes: literals their own size; device.driver 63; attribute and
// capacity maps 32 entries (32 attributes per device); an attribute value 64 (the longest
// string; list attributes hold at most 48 elements); a map's or list's nested elements share one
// bound (the largest nested size); strings built from other values are bounded by their inputs;
// results whose size cannot be bounded count as kUnboundedSize. A
// comprehension's accumulator is bounded by max(init size, N). Arithmetic saturates.

#include <cstdint>
#include <string>
#include <vector>

#include "cel/ast.h"
#include "cel/source.h"

namespace qm::cel {

enum class TypeKind {
  kDyn,
  kError,  // the type of an expression that failed to check; matches everything
  kNull,
  kBool,
  kInt,
  kUint,
  kDouble,
  kString,
  kBytes,
  kList,      // params: element
  kMap,       // params: key, value
  kOptional,  // params: value
  kQuantity,
  kSemver,
  kType,    // params: the type it names (may be empty)
  kDevice,  // kubernetes.DRADevice
  kParam,   // a type parameter in an overload signature (name)
  kTimestamp,
  kDuration,
  kIp,      // net.IP
  kCidr,    // net.CIDR
  kUrl,     // kubernetes.URL
  kFormat,  // kubernetes.NamedFormat
};

struct Type {
  TypeKind kind = TypeKind::kDyn;
  std::vector<Type> params;
  std::string name;  // kParam only

  static Type Of(TypeKind kind) { return Type{kind, {}, {}}; }
  static Type List(Type elem) { return Type{TypeKind::kList, {std::move(elem)}, {}}; }
  static Type Map(Type key, Type value) {
    return Type{TypeKind::kMap, {std::move(key), std::move(value)}, {}};
  }
  static Type Optional(Type value) { return Type{TypeKind::kOptional, {std::move(value)}, {}}; }

  friend bool operator==(const Type&, const Type&) = default;
};

// cel-go's rendering: int, list(int), map(string, dyn), optional_type(int), kubernetes.Quantity,
// kubernetes.Semver, kubernetes.DRADevice, null_type, type(int), *error*,
// google.protobuf.Timestamp, google.protobuf.Duration, net.IP, net.CIDR, kubernetes.URL,
// kubernetes.NamedFormat.
std::string FormatType(const Type& type);

// Kubernetes' limit on the estimated cost of a selector (CELSelectorExpressionMaxCost).
inline constexpr uint64_t kMaxSelectorCost = 1'000'000;
// Kubernetes' message when the estimate is above the limit (field.Forbidden).
inline constexpr std::string_view kCostLimitMessage = "too complex, exceeds cost limit";
// The size assumed for values whose size cannot be bounded.
inline constexpr uint64_t kUnboundedSize = uint64_t{1} << 32;

struct CheckResult {
  // Problems found, in the order found; empty when the expression type-checks.
  std::vector<Issue> issues;
  // The type of the whole expression (kError when it did not check).
  Type result_type;
  // The type of every node, indexed by id (index 0 unused).
  std::vector<Type> types;
  // The worst-case cost estimate (saturating; meaningful only without issues).
  uint64_t estimated_cost = 0;
};

// Type-checks `ast` against the DRA environment and estimates its cost. Thread-safe; never
// throws.
CheckResult Check(const Ast& ast);

}  // namespace qm::cel
