#pragma once

#include <memory>
#include <string>

#include "cel/ast.h"

namespace qm::cel {

// The outcome of compiling a device selector: a parsed expression ready to evaluate, or the
// problems in the user's expression rendered as cel-go renders them (`ERROR: <input>:1:5: ...`
// plus the source line and a caret). Exactly one of the two is set.
struct CompileResult {
  std::shared_ptr<const Ast> ast;
  std::string error;
};

// Compiles a DRA device selector: parses it and checks it against the DRA environment, whose
// only variable is `device` (fields driver, attributes, capacity, allowMultipleAllocations).
// Reported now: syntax errors, references to undeclared names, unknown fields of `device`, and
// a result that is a literal of another type than bool. Full type checking and the compile-time
// cost estimate are not done yet (issue 3). Thread-safe.
CompileResult CompileSelector(const std::string& expression);

}  // namespace qm::cel
