#pragma once

// Function names the parser gives to CEL operators and to the helpers that macro expansion
// introduces. They match cel-go's names (common/operators), so ASTs, cost tables and error
// messages ("found no matching overload for '_+_'") read the same as upstream.

#include <string_view>

namespace qm::cel::op {

// Operators written by the user.
inline constexpr std::string_view kConditional = "_?_:_";
inline constexpr std::string_view kLogicalAnd = "_&&_";
inline constexpr std::string_view kLogicalOr = "_||_";
inline constexpr std::string_view kLogicalNot = "!_";
inline constexpr std::string_view kEquals = "_==_";
inline constexpr std::string_view kNotEquals = "_!=_";
inline constexpr std::string_view kLess = "_<_";
inline constexpr std::string_view kLessEquals = "_<=_";
inline constexpr std::string_view kGreater = "_>_";
inline constexpr std::string_view kGreaterEquals = "_>=_";
inline constexpr std::string_view kAdd = "_+_";
inline constexpr std::string_view kSubtract = "_-_";
inline constexpr std::string_view kMultiply = "_*_";
inline constexpr std::string_view kDivide = "_/_";
inline constexpr std::string_view kModulo = "_%_";
inline constexpr std::string_view kNegate = "-_";
inline constexpr std::string_view kIndex = "_[_]";
// `a[?k]`: optional index (OptionalTypes). `a.?f` is a Select with optional() set instead.
inline constexpr std::string_view kOptIndex = "_[?_]";
inline constexpr std::string_view kIn = "@in";

// Helpers introduced by macro expansion (never written by the user: '@' cannot start an
// identifier).
// @not_strictly_false(b): true unless b is exactly `false` (an error or unknown counts as true),
// so all()/exists() keep iterating past element errors as CEL requires.
inline constexpr std::string_view kNotStrictlyFalse = "@not_strictly_false";
// cel.@mapInsert(map, key, value) / cel.@mapInsert(map, entry_map): a copy of the map with the
// entry added; error on a duplicate key (transformMap/transformMapEntry).
inline constexpr std::string_view kMapInsert = "cel.@mapInsert";
// Optional helpers used by the optMap()/optFlatMap() expansions.
inline constexpr std::string_view kOptionalOf = "optional.of";
inline constexpr std::string_view kOptionalNone = "optional.none";
inline constexpr std::string_view kHasValue = "hasValue";
inline constexpr std::string_view kValue = "value";

}  // namespace qm::cel::op
