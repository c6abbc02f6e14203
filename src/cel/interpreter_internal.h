#pragma once

// What interpreter.cc (the Evaluator) and interpreter_plan.cc (call plans and the ConstantTable)
// share. Not for use outside them.

#include <cstdint>

#include "cel/ast.h"
#include "cel/interpreter.h"
#include "cel/value.h"

namespace qm::cel::interpreter_internal {

// The CallSite of a call (what ConstantTable records for it, before folding).
CallSite MakeCallSite(const CallExpr& call);

// Evaluates call node `e` once, unplanned and without variables or limit, as every run would (a
// CallPlan::kFolded call): its value, and in *cost what the evaluation spent.
Value FoldCall(const Expr& e, uint64_t* cost);

}  // namespace qm::cel::interpreter_internal
