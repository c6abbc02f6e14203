#pragma once

// What checker.cc (the Checker: each kind of expression, the cost estimate) and checker_types.cc
// (type relations, the overload table) share. Not for use outside them.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cel/checker.h"

namespace qm::cel::checker_internal {

// ---------------------------------------------------------------------------------------------
// Types

inline bool IsDynLike(const Type& t) {
  return t.kind == TypeKind::kDyn || t.kind == TypeKind::kError;
}

using Bindings = std::map<std::string, Type>;

// `t` with its type parameters replaced by their bindings (dyn when unbound).
Type Substitute(const Type& t, const Bindings& b);

// Whether a value of type `arg` may be passed where `param` is expected, binding type parameters.
bool Assignable(const Type& param, const Type& arg, Bindings* b);

struct Overload {
  bool member = false;
  std::vector<Type> args;  // the target first for member overloads
  Type result;
};

using OverloadTable = std::map<std::string, std::vector<Overload>, std::less<>>;

// Every function and operator the DRA environment declares (checker.h), by name.
const OverloadTable& Overloads();

}  // namespace qm::cel::checker_internal
