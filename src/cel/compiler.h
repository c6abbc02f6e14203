#pragma once

#include <memory>
#include <string>

#include "cel/ast.h"
#include "cel/interpreter.h"

namespace qm::cel {

// The outcome of compiling a device selector: a parsed expression ready to evaluate, or the
// problems in the user's expression rendered as cel-go renders them (`ERROR: <input>:1:5: ...`
// plus the source line and a caret). Exactly one of the two is set.
struct CompileResult {
  std::shared_ptr<const Ast> ast;
  // The evaluation plan of `ast` (literals, field keys, resolved calls, folded parsing calls),
  // prebuilt once; pass it to MatchesValue/Evaluate with `ast` (set together with `ast`).
  std::shared_ptr<const ConstantTable> constants;
  std::string error;
};

// Compiles a DRA device selector: parses it and type-checks it against the DRA environment,
// whose only variable is `device` (driver, attributes, capacity, allowMultipleAllocations; see
// cel/checker.h): undeclared names, unknown fields, overloads that do not exist for the
// argument types, a result that cannot be bool, and an estimated cost above Kubernetes' limit
// of 1,000,000 are all reported. Thread-safe.
CompileResult CompileSelector(const std::string& expression);

}  // namespace qm::cel
