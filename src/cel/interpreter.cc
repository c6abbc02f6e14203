#include "cel/interpreter.h"

#include <array>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "cel/function_registry.h"
#include "cel/functions.h"
#include "cel/interpreter_internal.h"
#include "cel/operators.h"

namespace qm::cel {

using namespace interpreter_internal;  // NOLINT(google-build-using-namespace)

// ---------------------------------------------------------------------------------------------
// Activation

void Activation::Insert(std::string name, Value value) {
  for (size_t i = 0; i < inline_size_; ++i) {
    if (inline_[i].first == name) {
      inline_[i].second = std::move(value);
      return;
    }
  }
  for (auto& [n, v] : more_) {
    if (n == name) {
      v = std::move(value);
      return;
    }
  }
  if (inline_size_ < kInline) {
    inline_[inline_size_++] = {std::move(name), std::move(value)};
    return;
  }
  more_.emplace_back(std::move(name), std::move(value));
}

const Value* Activation::Find(std::string_view name) const {
  for (size_t i = 0; i < inline_size_; ++i) {
    if (inline_[i].first == name) return &inline_[i].second;
  }
  for (const auto& [n, v] : more_) {
    if (n == name) return &v;
  }
  return nullptr;
}

namespace {

// Call arguments: most calls have one to three, kept inline to spare an allocation per call.
class Args {
 public:
  Args() = default;

  void reserve(size_t n) {
    if (n > kInline) heap_.reserve(n);
  }
  void push_back(Value v) {
    if (size_ < kInline) {
      inline_[size_++] = std::move(v);
      return;
    }
    if (size_ == kInline) {
      heap_.assign(std::make_move_iterator(inline_.begin()),
                   std::make_move_iterator(inline_.end()));
    }
    heap_.push_back(std::move(v));
    ++size_;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  Value& operator[](size_t i) { return data()[i]; }
  const Value& operator[](size_t i) const { return data()[i]; }
  Value* begin() { return data(); }
  Value* end() { return data() + size_; }
  const Value* begin() const { return data(); }
  const Value* end() const { return data() + size_; }
  absl::Span<const Value> span() const { return absl::Span<const Value>(data(), size_); }

 private:
  static constexpr size_t kInline = 4;
  Value* data() { return size_ > kInline ? heap_.data() : inline_.data(); }
  const Value* data() const { return size_ > kInline ? heap_.data() : inline_.data(); }

  std::array<Value, kInline> inline_;
  size_t size_ = 0;
  std::vector<Value> heap_;  // all elements once there are more than kInline
};

// ---------------------------------------------------------------------------------------------
// Small helpers

Value Err(std::string message) { return Value::Error(std::move(message)); }

std::string Str(std::string_view s) { return std::string(s); }

bool IsBool(const Value& v, bool b) { return v.kind() == ValueKind::kBool && v.bool_value() == b; }

// Go's Go-syntax type names, for cel-go's "got 'types.Int', expected iterable type".
std::string GoTypeName(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kNull:
      return "types.Null";
    case ValueKind::kBool:
      return "types.Bool";
    case ValueKind::kInt:
      return "types.Int";
    case ValueKind::kUint:
      return "types.Uint";
    case ValueKind::kDouble:
      return "types.Double";
    case ValueKind::kString:
      return "types.String";
    case ValueKind::kBytes:
      return "types.Bytes";
    case ValueKind::kOptional:
      return "*types.Optional";
    case ValueKind::kQuantity:
      return "cel.Quantity";
    case ValueKind::kSemver:
      return "cel.Semver";
    case ValueKind::kType:
      return "*types.Type";
    default:
      return Str(v.TypeName());
  }
}

// ---------------------------------------------------------------------------------------------
// The evaluator

class Evaluator {
 public:
  Evaluator(const Activation& vars, const EvalOptions& options)
      : vars_(vars),
        options_(options),
        functions_(StandardFunctions()),
        ctx_(options.cost_limit, options.regex_cache) {}

  Value Eval(const Expr& e);
  uint64_t cost() const { return ctx_.cost(); }
  bool cancelled() const { return ctx_.cancelled(); }

 private:
  bool Charge(uint64_t c) { return ctx_.Charge(c); }
  static Value Cancelled() { return EvalContext::Cancelled(); }

  // Evaluates `e` without copying a value that already exists: returns a pointer to a value
  // that outlives the evaluation (a variable of the activation, a literal of the plan, or
  // something inside those immutable values), or stores the result in *scratch and returns
  // scratch. Comprehension variables are always copied (their storage moves as scopes open).
  const Value* EvalRef(const Expr& e, Value* scratch);
  const Value* IdentRef(const Expr& e, Value* scratch);
  const Value* SelectRef(const Expr& e, Value* scratch);
  const Value* IndexRef(const CallExpr& c, Value* scratch);
  // The precomputed value of a kFolded call, its cost charged; nullptr (nothing charged) when
  // that cost would pass the limit, so that the call runs and stops where it would unplanned.
  const Value* FoldedRef(const Expr& e) {
    const Value* v = options_.constants->FoldedValue(e.id());
    if (v == nullptr || !ctx_.ChargeWithinLimit(options_.constants->folded_cost(e.id()))) {
      return nullptr;
    }
    return v;
  }
  CallPlan PlanOf(const Expr& e) const {
    return options_.constants != nullptr ? options_.constants->call_plan(e.id())
                                         : PlanCall(e.call());
  }
  // The call site of call node `e`: the plan's, or built into *local when there is no plan.
  const CallSite& SiteOf(const Expr& e, CallSite* local) const {
    if (options_.constants != nullptr) {
      if (const CallSite* site = options_.constants->call_site(e.id())) return *site;
    }
    *local = MakeCallSite(e.call());
    return *local;
  }
  Value EvalCall(const Expr& e);
  Value EvalList(const Expr& e);
  Value EvalMap(const Expr& e);
  Value EvalComprehension(const Expr& e);
  Value EvalLogical(const CallExpr& c, bool is_and);
  Value EvalAccumulate(const CallExpr& c, const CallSite& site, Value* slot);
  Value Dispatch(const Candidates& candidates, std::string_view fn, const Value* target,
                 const Args& args) {
    return functions_.Dispatch(ctx_, candidates, Call{fn, target, args.span()});
  }
  // `key` is the field as a string Value (built from `field` when nullptr).
  Value SelectField(const Value& operand, const std::string& field, const Value* key,
                    bool optional);

  const Value* FindLocal(std::string_view name) const {
    for (auto it = locals_.rbegin(); it != locals_.rend(); ++it) {
      if (it->first == name) return &it->second;
    }
    return nullptr;
  }
  Value* FindLocalMutable(std::string_view name) {
    for (auto it = locals_.rbegin(); it != locals_.rend(); ++it) {
      if (it->first == name) return &it->second;
    }
    return nullptr;
  }
  bool IsBound(std::string_view name) const {
    return FindLocal(name) != nullptr || vars_.Find(name) != nullptr;
  }

  const Activation& vars_;
  const EvalOptions& options_;
  const FunctionRegistry& functions_;
  EvalContext ctx_;
  // Comprehension variables, innermost last.
  std::vector<std::pair<std::string_view, Value>> locals_;
};

// `v` is what an EvalRef call with scratch `local` returned; the result stays valid after `local`
// is gone (moved into *scratch when it is `local`).
const Value* Keep(const Value* v, Value* local, Value* scratch) {
  if (v != local) return v;
  *scratch = std::move(*local);
  return scratch;
}

Value Evaluator::Eval(const Expr& e) {
  if (cancelled()) return Cancelled();
  switch (e.kind()) {
    case ExprKind::kConstant:
    case ExprKind::kIdent:
    case ExprKind::kSelect: {
      Value scratch;
      const Value* v = EvalRef(e, &scratch);
      return v == &scratch ? std::move(scratch) : *v;
    }
    case ExprKind::kCall:
      return EvalCall(e);
    case ExprKind::kList:
      return EvalList(e);
    case ExprKind::kMap:
      return EvalMap(e);
    case ExprKind::kComprehension:
      return EvalComprehension(e);
  }
  return Err("unknown expression kind");
}

const Value* Evaluator::EvalRef(const Expr& e, Value* scratch) {
  if (cancelled()) {
    *scratch = Cancelled();
    return scratch;
  }
  switch (e.kind()) {
    case ExprKind::kConstant:
      if (options_.constants != nullptr) {
        if (const Value* v = options_.constants->Find(e.id())) return v;
      }
      *scratch = ConstantValue(e.constant());
      return scratch;
    case ExprKind::kIdent:
      return IdentRef(e, scratch);
    case ExprKind::kSelect:
      return SelectRef(e, scratch);
    case ExprKind::kCall: {
      const CallPlan plan = PlanOf(e);
      if (plan == CallPlan::kIndex) return IndexRef(e.call(), scratch);
      if (plan == CallPlan::kFolded) {
        if (const Value* v = FoldedRef(e)) return v;
      }
      *scratch = EvalCall(e);
      return scratch;
    }
    default:
      *scratch = Eval(e);
      return scratch;
  }
}

const Value* Evaluator::IdentRef(const Expr& e, Value* scratch) {
  if (!Charge(1)) {
    *scratch = Cancelled();
    return scratch;
  }
  std::string_view name = e.ident().name;
  const bool rooted = !name.empty() && name[0] == '.';
  if (rooted) {
    name.remove_prefix(1);
  } else if (const Value* v = FindLocal(name)) {
    *scratch = *v;
    return scratch;
  }
  if (const Value* v = vars_.Find(name)) return v;
  static constexpr std::string_view kTypeNames[] = {"bool",      "int",   "uint",         "double",
                                                    "string",    "bytes", "list",         "map",
                                                    "null_type", "type",  "optional_type"};
  for (std::string_view t : kTypeNames) {
    if (name == t) {
      *scratch = Value::Type(Str(t));
      return scratch;
    }
  }
  *scratch = Err("no such attribute(s): " + Str(e.ident().name));
  return scratch;
}

Value Evaluator::SelectField(const Value& operand, const std::string& field, const Value* key,
                             bool optional) {
  switch (operand.kind()) {
    case ValueKind::kMap: {
      const Value* v = key != nullptr ? operand.map_value().Find(*key)
                                      : operand.map_value().Find(Value::String(field));
      if (v == nullptr) return optional ? Value::OptionalNone() : Err("no such key: " + field);
      return optional ? Value::OptionalOf(*v) : *v;
    }
    case ValueKind::kOptional:
      // Selection on an optional value stays optional (cel-go's optional chaining).
      if (!operand.has_optional_value()) return operand;
      return SelectField(operand.optional_value(), field, key, /*optional=*/true);
    default:
      return Err("type '" + Str(operand.TypeName()) + "' does not support field selection");
  }
}

const Value* Evaluator::SelectRef(const Expr& e, Value* scratch) {
  const SelectExpr& s = e.select();
  Value local;
  const Value* operand = EvalRef(*s.operand, &local);
  if (operand->IsError()) return Keep(operand, &local, scratch);
  if (!Charge(1)) {
    *scratch = Cancelled();
    return scratch;
  }
  const Value* key = options_.constants != nullptr ? options_.constants->FieldKey(e.id()) : nullptr;
  if (s.test_only) {
    if (operand->kind() == ValueKind::kMap) {
      const MapValue& m = operand->map_value();
      *scratch =
          Value::Bool((key != nullptr ? m.Find(*key) : m.Find(Value::String(s.field))) != nullptr);
    } else {
      *scratch = Err("invalid type for field selection: " + Str(operand->TypeName()));
    }
    return scratch;
  }
  if (!s.optional && key != nullptr && operand->kind() == ValueKind::kMap) {
    // SelectField's map case, without copying the entry out of a map that outlives this call.
    if (const Value* v = operand->map_value().Find(*key); v != nullptr && operand != &local) {
      return v;
    }
  }
  *scratch = SelectField(*operand, s.field, key, s.optional);
  return scratch;
}

const Value* Evaluator::IndexRef(const CallExpr& c, Value* scratch) {
  Value local_a;
  Value local_b;
  const Value* a = EvalRef(*c.args[0], &local_a);
  if (cancelled()) {
    *scratch = Cancelled();
    return scratch;
  }
  const Value* b = EvalRef(*c.args[1], &local_b);
  if (cancelled()) {
    *scratch = Cancelled();
    return scratch;
  }
  if (a->IsError()) return Keep(a, &local_a, scratch);
  if (b->IsError()) return Keep(b, &local_b, scratch);
  if (!Charge(1)) {
    *scratch = Cancelled();
    return scratch;
  }
  if (a != &local_a && a->kind() == ValueKind::kMap && MapValue::IsValidKey(*b)) {
    // Index's map case, without copying the entry out of a map that outlives this call.
    if (const Value* v = a->map_value().Find(*b)) return v;
  }
  *scratch = Index(*a, *b, /*optional=*/false);
  return scratch;
}

Value Evaluator::EvalLogical(const CallExpr& c, bool is_and) {
  const std::string_view fn = is_and ? op::kLogicalAnd : op::kLogicalOr;
  if (c.args.size() != 2) return NoSuchOverload(fn, nullptr, {});
  // The decisive value: false for &&, true for ||.
  const bool decisive = !is_and;
  Value l = Eval(*c.args[0]);
  if (cancelled()) return Cancelled();
  if (IsBool(l, decisive)) return l;
  Value r = Eval(*c.args[1]);
  if (cancelled()) return Cancelled();
  if (IsBool(r, decisive)) return r;
  if (l.kind() == ValueKind::kBool && r.kind() == ValueKind::kBool) return r;
  if (l.IsError()) return l;
  if (r.IsError()) return r;
  return NoSuchOverload(fn, nullptr, {l, r});
}

// `@result + [x]` and `cel.@mapInsert(@result, ...)` inside a comprehension: the accumulator is
// about to be replaced by this step's value, so it is moved out of its slot and, when nothing
// else shares it, extended in place. This keeps map()/filter() linear instead of quadratic.
Value Evaluator::EvalAccumulate(const CallExpr& c, const CallSite& site, Value* slot) {
  if (!Charge(1)) return Cancelled();
  Value accu = std::move(*slot);
  *slot = Value::Null();
  Args rest;
  for (size_t i = 1; i < c.args.size(); ++i) {
    rest.push_back(Eval(*c.args[i]));
    if (cancelled()) return Cancelled();
  }
  if (accu.IsError()) return accu;
  for (const Value& v : rest) {
    if (v.IsError()) return v;
  }
  if (site.plan == CallPlan::kAccumulateList && rest.size() == 1 &&
      accu.kind() == ValueKind::kList && rest[0].kind() == ValueKind::kList) {
    if (!Charge(TraversalCost(rest[0].list_value().size()))) return Cancelled();
    if (accu.UniquePayload()) {
      ValueList* l = accu.MutableListForUniqueOwner();
      l->insert(l->end(), rest[0].list_value().begin(), rest[0].list_value().end());
      return accu;
    }
    return Add(accu, rest[0]);
  }
  if (site.plan == CallPlan::kAccumulateMap && accu.kind() == ValueKind::kMap &&
      accu.UniquePayload()) {
    MapValue* m = accu.MutableMapForUniqueOwner();
    if (rest.size() == 2) {
      if (!MapValue::IsValidKey(rest[0]))
        return NoSuchOverload(c.function, nullptr, {accu, rest[0]});
      if (!m->Insert(rest[0], rest[1])) {
        return Err("insert failed: key " + KeyText(rest[0]) + " already exists");
      }
      return accu;
    }
    if (rest.size() == 1 && rest[0].kind() == ValueKind::kMap) {
      for (const auto& [k, v] : rest[0].map_value().entries()) {
        if (!m->Insert(k, v)) return Err("insert failed: key " + KeyText(k) + " already exists");
      }
      return accu;
    }
  }
  Args all;
  all.push_back(std::move(accu));
  for (Value& v : rest) all.push_back(std::move(v));
  ctx_.Refund(1);  // Dispatch charges the call itself.
  return Dispatch(site.candidates, c.function, nullptr, all);
}

Value Evaluator::EvalCall(const Expr& e) {
  const CallExpr& c = e.call();
  const CallPlan plan = PlanOf(e);
  switch (plan) {
    case CallPlan::kAnd:
      return EvalLogical(c, /*is_and=*/true);
    case CallPlan::kOr:
      return EvalLogical(c, /*is_and=*/false);
    case CallPlan::kConditional: {
      Value cond = Eval(*c.args[0]);
      if (cond.IsError()) return cond;
      if (cond.kind() != ValueKind::kBool) return NoSuchOverload(c.function, nullptr, {cond});
      return Eval(*c.args[cond.bool_value() ? 1 : 2]);
    }
    case CallPlan::kNotStrictlyFalse: {
      Value v = Eval(*c.args[0]);
      if (cancelled()) return Cancelled();
      return Value::Bool(!IsBool(v, false));
    }
    case CallPlan::kIndex: {
      Value scratch;
      const Value* v = IndexRef(c, &scratch);
      return v == &scratch ? std::move(scratch) : *v;
    }
    case CallPlan::kEquals:
    case CallPlan::kNotEquals: {
      // The generic path below without copies of the operands, the argument vector and the
      // dispatch.
      Value local_a;
      Value local_b;
      const Value* a = EvalRef(*c.args[0], &local_a);
      if (cancelled()) return Cancelled();
      const Value* b = EvalRef(*c.args[1], &local_b);
      if (cancelled()) return Cancelled();
      if (a->IsError()) return *a;
      if (b->IsError()) return *b;
      return EqualsOperator(ctx_, plan == CallPlan::kNotEquals, *a, *b);
    }
    case CallPlan::kFolded:
      if (const Value* v = FoldedRef(e)) return *v;
      break;
    case CallPlan::kAccumulateList:
    case CallPlan::kAccumulateMap:
    case CallPlan::kGeneric:
      break;
  }
  CallSite local_site;
  const CallSite& site = SiteOf(e, &local_site);
  if (plan == CallPlan::kAccumulateList || plan == CallPlan::kAccumulateMap) {
    if (Value* slot = FindLocalMutable(kAccumulatorVar)) {
      if (!Charge(1)) return Cancelled();  // the identifier
      return EvalAccumulate(c, site, slot);
    }
  }
  const Expr* target_expr = c.target.get();
  const Candidates* candidates = &site.candidates;
  std::string_view fn = c.function;
  if (site.namespaced && !IsBound(target_expr->ident().name)) {
    candidates = &site.qualified;
    fn = site.qualified_name;
    target_expr = nullptr;
  }
  Value target;
  if (target_expr != nullptr) {
    target = Eval(*target_expr);
    if (cancelled()) return Cancelled();
  }
  Args args;
  args.reserve(c.args.size());
  for (const auto& a : c.args) {
    args.push_back(Eval(*a));
    if (cancelled()) return Cancelled();
  }
  if (target_expr != nullptr && target.IsError()) return target;
  for (const Value& a : args) {
    if (a.IsError()) return a;
  }
  return Dispatch(*candidates, fn, target_expr != nullptr ? &target : nullptr, args);
}

Value Evaluator::EvalList(const Expr& e) {
  const ListExpr& l = e.list();
  if (!Charge(10)) return Cancelled();
  ValueList out;
  out.reserve(l.elements.size());
  size_t next_opt = 0;
  for (size_t i = 0; i < l.elements.size(); ++i) {
    Value v = Eval(*l.elements[i]);
    if (v.IsError()) return v;
    const bool optional = next_opt < l.optional_indices.size() &&
                          l.optional_indices[next_opt] == static_cast<int32_t>(i);
    if (optional) {
      ++next_opt;
      if (v.kind() != ValueKind::kOptional) {
        return Err("cannot initialize optional list element from non-optional value " +
                   v.DebugString());
      }
      if (!v.has_optional_value()) continue;
      out.push_back(v.optional_value());
      continue;
    }
    out.push_back(std::move(v));
  }
  return Value::List(std::move(out));
}

Value Evaluator::EvalMap(const Expr& e) {
  const MapExpr& m = e.map();
  if (!Charge(30)) return Cancelled();
  MapValue out;
  for (const MapEntry& entry : m.entries) {
    Value k = Eval(*entry.key);
    if (k.IsError()) return k;
    Value v = Eval(*entry.value);
    if (v.IsError()) return v;
    if (!MapValue::IsValidKey(k)) return Err("unsupported key type: " + Str(k.TypeName()));
    if (entry.optional) {
      if (v.kind() != ValueKind::kOptional) {
        return Err("cannot initialize optional entry '" + KeyText(k) +
                   "' from non-optional value " + v.DebugString());
      }
      if (!v.has_optional_value()) continue;
      v = v.optional_value();
    }
    if (!out.Insert(k, std::move(v))) {
      return Err("insert failed: key " + KeyText(k) + " already exists");
    }
  }
  return Value::Map(std::move(out));
}

Value Evaluator::EvalComprehension(const Expr& e) {
  const ComprehensionExpr& c = e.comprehension();
  Value range = Eval(*c.iter_range);
  if (range.IsError()) return range;
  if (range.kind() != ValueKind::kList && range.kind() != ValueKind::kMap) {
    return Err("got '" + GoTypeName(range) + "', expected iterable type");
  }
  Value init = Eval(*c.accu_init);
  if (cancelled()) return Cancelled();
  const size_t base = locals_.size();
  locals_.emplace_back(c.accu_var, std::move(init));
  const bool two = !c.iter_var2.empty();
  locals_.emplace_back(c.iter_var, Value());
  if (two) locals_.emplace_back(c.iter_var2, Value());
  auto restore = [&] { locals_.resize(base); };
  const size_t n = range.kind() == ValueKind::kList ? range.list_value().size()
                                                    : range.map_value().entries().size();
  for (size_t i = 0; i < n; ++i) {
    if (range.kind() == ValueKind::kList) {
      const Value& elem = range.list_value()[i];
      if (two) {
        locals_[base + 1].second = Value::Int(static_cast<int64_t>(i));
        locals_[base + 2].second = elem;
      } else {
        locals_[base + 1].second = elem;
      }
    } else {
      const auto& [k, v] = range.map_value().entries()[i];
      locals_[base + 1].second = k;
      if (two) locals_[base + 2].second = v;
    }
    Value cond = Eval(*c.loop_condition);
    if (cancelled()) {
      restore();
      return Cancelled();
    }
    if (IsBool(cond, false)) break;
    if (cond.IsError()) {
      restore();
      return cond;
    }
    Value step = Eval(*c.loop_step);
    if (cancelled()) {
      restore();
      return Cancelled();
    }
    locals_[base].second = std::move(step);
  }
  // The result sees the accumulator but not the iteration variables.
  locals_.resize(base + 1);
  Value result = Eval(*c.result);
  restore();
  return result;
}

}  // namespace

Value interpreter_internal::FoldCall(const Expr& e, uint64_t* cost) {
  // Evaluate it once, unplanned and without variables or limit, as every run would.
  const Activation no_vars;
  const EvalOptions unlimited{.cost_limit = std::numeric_limits<uint64_t>::max()};
  Evaluator evaluator(no_vars, unlimited);
  Value value = evaluator.Eval(e);
  *cost = evaluator.cost();
  return value;
}

EvalResult Evaluate(const Ast& ast, const Activation& vars, const EvalOptions& options) {
  Evaluator evaluator(vars, options);
  EvalResult result;
  result.value = evaluator.Eval(ast.root());
  if (evaluator.cancelled()) result.value = Value::Error(std::string(kCostLimitExceeded));
  result.cost = evaluator.cost();
  return result;
}

}  // namespace qm::cel
