#pragma once

// The libraries of the CEL environment, each registering its functions and operators into a
// FunctionRegistry (cel/function_registry.h), with cel-go's semantics, error texts and costs
// (cel/interpreter.h describes both):
//   functions_standard.cc    operators (equality, ordering, arithmetic, indexing, `in`, the
//                            macros' cel.@mapInsert), type conversions, size, type, dyn,
//                            optional types, includes() on any value
//   functions_strings.cc     ext.Strings v2, matches() and Kubernetes' library.Regex (find,
//                            findAll), strings.quote, join
//   functions_lists.cc       Kubernetes' library.Lists, ext.Lists v3 (lists.range included),
//                            ext.Sets
//   functions_time.cc        timestamps and durations (cel/time_lib.h)
//   functions_kubernetes.cc  Kubernetes' Quantity, Semver, IP, CIDR, URL and Format libraries
//                            (cel/net_lib.h, cel/format_lib.h)
// Adding a function is registering its overloads in one of these files.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cel/function_registry.h"
#include "cel/value.h"

namespace qm::cel {

void RegisterStandardFunctions(FunctionRegistry& registry);
void RegisterStringFunctions(FunctionRegistry& registry);
void RegisterListFunctions(FunctionRegistry& registry);
void RegisterTimeFunctions(FunctionRegistry& registry);
void RegisterKubernetesFunctions(FunctionRegistry& registry);

// The registry of every library above, built on first use and never destroyed. Thread-safe.
const FunctionRegistry& StandardFunctions();

// Helpers shared by the evaluator and the libraries.

// `a == b` (`a != b` when `negate`), charging the traversal of the smaller operand.
Value EqualsOperator(EvalContext& ctx, bool negate, const Value& a, const Value& b);
// `container[key]` (`container[?key]` when `optional`): lists by integral index, maps by key,
// optional containers chained; otherwise "no such overload: _[_](...)".
Value Index(const Value& container, const Value& key, bool optional);
// `a + b` for ints, uints, doubles, strings, bytes and lists (not time values).
Value Add(const Value& a, const Value& b);
// The text cel-go prints for a map key in "no such key" and "insert failed" errors (Go's %v).
std::string KeyText(const Value& key);
// An error value with the status' message.
Value FromStatus(const absl::Status& status);
// A list of strings.
Value StringList(std::vector<std::string> parts);

}  // namespace qm::cel
