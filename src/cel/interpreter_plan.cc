// The evaluation plan of an Ast (interpreter.h): each call's CallPlan and CallSite, and the
// ConstantTable of literal values, field keys and folded calls.

#include "cel/interpreter.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cel/function_registry.h"
#include "cel/functions.h"
#include "cel/interpreter_internal.h"
#include "cel/operators.h"

namespace qm::cel {

using namespace interpreter_internal;  // NOLINT(google-build-using-namespace)

namespace {

constexpr std::string_view kNamespaces[] = {"optional", "sets", "strings", "lists",
                                            "cel",      "ip",   "format"};

// True for the plans the evaluator runs itself, without the function registry.
bool RunsWithoutRegistry(CallPlan plan) {
  switch (plan) {
    case CallPlan::kAnd:
    case CallPlan::kOr:
    case CallPlan::kConditional:
    case CallPlan::kNotStrictlyFalse:
    case CallPlan::kEquals:
    case CallPlan::kNotEquals:
    case CallPlan::kIndex:
      return true;
    case CallPlan::kGeneric:
    case CallPlan::kAccumulateList:
    case CallPlan::kAccumulateMap:
    case CallPlan::kFolded:
      return false;
  }
  return false;
}

}  // namespace

CallSite interpreter_internal::MakeCallSite(const CallExpr& call) {
  CallSite site;
  site.plan = PlanCall(call);
  if (RunsWithoutRegistry(site.plan)) return site;
  const FunctionRegistry& functions = StandardFunctions();
  const size_t arity = call.args.size();
  site.candidates = functions.Find(
      call.target != nullptr ? CallStyle::kReceiver : CallStyle::kGlobal, call.function, arity);
  if (call.target != nullptr && call.target->kind() == ExprKind::kIdent) {
    const std::string& ns = call.target->ident().name;
    for (std::string_view n : kNamespaces) {
      if (ns != n) continue;
      site.namespaced = true;
      site.qualified_name = ns + "." + call.function;
      site.qualified = functions.Find(CallStyle::kGlobal, site.qualified_name, arity);
      break;
    }
  }
  return site;
}

Value ConstantValue(const Constant& c) {
  switch (c.kind()) {
    case ConstantKind::kNull:
      return Value::Null();
    case ConstantKind::kBool:
      return Value::Bool(c.bool_value());
    case ConstantKind::kInt:
      return Value::Int(c.int_value());
    case ConstantKind::kUint:
      return Value::Uint(c.uint_value());
    case ConstantKind::kDouble:
      return Value::Double(c.double_value());
    case ConstantKind::kString:
      return Value::String(c.string_value());
    case ConstantKind::kBytes:
      return Value::Bytes(c.bytes_value());
  }
  return Value::Null();
}

namespace {

struct PlanOut {
  std::vector<std::optional<Value>>* values;
  std::vector<std::optional<Value>>* fields;
  std::vector<CallSite>* calls;
  std::vector<std::optional<Value>>* folded;
  std::vector<uint64_t>* folded_costs;
};

// A global call whose value depends on its literal arguments only (see CallPlan::kFolded).
bool Foldable(const CallExpr& c) {
  static constexpr std::string_view kPure[] = {"quantity", "isQuantity", "semver",    "isSemver",
                                               "ip",       "isIP",       "cidr",      "isCIDR",
                                               "url",      "isURL",      "timestamp", "duration"};
  if (c.target != nullptr || c.args.empty()) return false;
  if (std::find(std::begin(kPure), std::end(kPure), c.function) == std::end(kPure)) return false;
  for (const auto& a : c.args) {
    if (a->kind() != ExprKind::kConstant) return false;
  }
  return true;
}

// Visits every node; the tree height is bounded by the parser, so recursion is bounded.
void CollectPlan(const Expr& e, const PlanOut& out) {
  const bool in_range = e.id() > 0 && static_cast<size_t>(e.id()) < out.values->size();
  switch (e.kind()) {
    case ExprKind::kConstant:
      if (in_range) (*out.values)[e.id()] = ConstantValue(e.constant());
      return;
    case ExprKind::kIdent:
      return;
    case ExprKind::kSelect:
      if (in_range) (*out.fields)[e.id()] = Value::String(e.select().field);
      CollectPlan(*e.select().operand, out);
      return;
    case ExprKind::kCall:
      if (in_range) {
        (*out.calls)[e.id()] = MakeCallSite(e.call());
        if (Foldable(e.call())) {
          (*out.folded)[e.id()] = FoldCall(e, &(*out.folded_costs)[e.id()]);
          (*out.calls)[e.id()].plan = CallPlan::kFolded;
        }
      }
      if (e.call().target != nullptr) CollectPlan(*e.call().target, out);
      for (const auto& a : e.call().args) CollectPlan(*a, out);
      return;
    case ExprKind::kList:
      for (const auto& el : e.list().elements) CollectPlan(*el, out);
      return;
    case ExprKind::kMap:
      for (const auto& entry : e.map().entries) {
        CollectPlan(*entry.key, out);
        CollectPlan(*entry.value, out);
      }
      return;
    case ExprKind::kComprehension: {
      const ComprehensionExpr& c = e.comprehension();
      for (const Expr* sub : {c.iter_range.get(), c.accu_init.get(), c.loop_condition.get(),
                              c.loop_step.get(), c.result.get()}) {
        CollectPlan(*sub, out);
      }
      return;
    }
  }
}

}  // namespace

CallPlan PlanCall(const CallExpr& call) {
  const std::string& fn = call.function;
  const size_t n = call.args.size();
  if (fn == op::kLogicalAnd) return CallPlan::kAnd;
  if (fn == op::kLogicalOr) return CallPlan::kOr;
  if (fn == op::kConditional && n == 3) return CallPlan::kConditional;
  if (fn == op::kNotStrictlyFalse && n == 1) return CallPlan::kNotStrictlyFalse;
  if (call.target == nullptr && n == 2) {
    if (fn == op::kEquals) return CallPlan::kEquals;
    if (fn == op::kNotEquals) return CallPlan::kNotEquals;
    if (fn == op::kIndex) return CallPlan::kIndex;
  }
  if (call.target == nullptr && n > 0 && call.args[0]->kind() == ExprKind::kIdent &&
      call.args[0]->ident().name == kAccumulatorVar) {
    if (fn == op::kAdd) return CallPlan::kAccumulateList;
    if (fn == op::kMapInsert) return CallPlan::kAccumulateMap;
  }
  return CallPlan::kGeneric;
}

ConstantTable::ConstantTable(const Ast& ast)
    : values_(static_cast<size_t>(ast.max_id()) + 1),
      fields_(values_.size()),
      calls_(values_.size()),
      folded_(values_.size()),
      folded_costs_(values_.size(), 0) {
  CollectPlan(ast.root(), PlanOut{&values_, &fields_, &calls_, &folded_, &folded_costs_});
}

}  // namespace qm::cel
