#include "cel/function_registry.h"

#include <string>
#include <utility>

#include "cel/interpreter.h"

namespace qm::cel {

namespace {

constexpr size_t kKindCount = static_cast<size_t>(ValueKind::kFormat) + 1;

std::string Key(CallStyle style, std::string_view name) {
  std::string key(1, style == CallStyle::kGlobal ? 'g' : 'r');
  key.append(name);
  return key;
}

bool ChargeOne(EvalContext& ctx, const Call&) { return ctx.Charge(1); }

}  // namespace

Value EvalContext::Cancelled() { return Value::Error(std::string(kCostLimitExceeded)); }

FunctionRegistry::Function& FunctionRegistry::FunctionOf(CallStyle style, std::string_view name) {
  return functions_[Key(style, name)];
}

void FunctionRegistry::Add(CallStyle style, std::string_view name, Overload overload) {
  Function& f = FunctionOf(style, name);
  const size_t arity = overload.args.size();
  if (f.by_arity.size() <= arity) f.by_arity.resize(arity + 1);
  f.overloads.push_back(std::make_unique<const Overload>(std::move(overload)));
  f.by_arity[arity].push_back(f.overloads.back().get());
}

void FunctionRegistry::AddGlobal(std::string_view name, std::vector<KindMask> args,
                                 FunctionImpl impl) {
  Add(CallStyle::kGlobal, name, Overload{.receiver = 0, .args = std::move(args), .impl = impl});
}

void FunctionRegistry::AddMethod(std::string_view name, KindMask receiver,
                                 std::vector<KindMask> args, FunctionImpl impl) {
  Add(CallStyle::kReceiver, name,
      Overload{.receiver = receiver, .args = std::move(args), .impl = impl});
}

void FunctionRegistry::SetEntryCost(CallStyle style, std::string_view name, size_t arity,
                                    EntryCost cost) {
  Function& f = FunctionOf(style, name);
  if (arity == kAnyArity) {
    f.entry_cost = cost;
    return;
  }
  if (f.entry_cost_by_arity.size() <= arity) f.entry_cost_by_arity.resize(arity + 1, nullptr);
  f.entry_cost_by_arity[arity] = cost;
}

void FunctionRegistry::SetReceiverCost(ValueKind receiver, EntryCost cost) {
  if (receiver_costs_.empty()) receiver_costs_.resize(kKindCount, nullptr);
  receiver_costs_[static_cast<size_t>(receiver)] = cost;
}

Candidates FunctionRegistry::Find(CallStyle style, std::string_view name, size_t arity) const {
  auto it = functions_.find(Key(style, name));
  if (it == functions_.end()) return Candidates{};
  const Function& f = it->second;
  Candidates out;
  out.entry_cost = arity < f.entry_cost_by_arity.size() && f.entry_cost_by_arity[arity] != nullptr
                       ? f.entry_cost_by_arity[arity]
                       : f.entry_cost;
  if (arity < f.by_arity.size()) out.overloads = f.by_arity[arity];
  return out;
}

Value FunctionRegistry::Dispatch(EvalContext& ctx, const Candidates& candidates,
                                 const Call& call) const {
  EntryCost entry_cost = candidates.entry_cost;
  if (entry_cost == nullptr) {
    if (call.target == nullptr) {
      entry_cost = &ChargeOne;
    } else if (!receiver_costs_.empty()) {
      entry_cost = receiver_costs_[static_cast<size_t>(call.target->kind())];
    }
  }
  if (entry_cost != nullptr && !entry_cost(ctx, call)) return EvalContext::Cancelled();
  for (const Overload* overload : candidates.overloads) {
    if (!overload->Accepts(call)) continue;
    Value result = overload->impl(ctx, call);
    if (ctx.cancelled()) return EvalContext::Cancelled();
    return result;
  }
  return NoSuchOverload(call.function, call.target, call.args);
}

Value NoSuchOverload(std::string_view function, const Value* target, absl::Span<const Value> args) {
  std::string out = "no such overload: ";
  if (target != nullptr) {
    out += target->TypeName();
    out += ".";
  }
  out += function;
  out += "(";
  for (size_t i = 0; i < args.size(); ++i) {
    if (i > 0) out += ", ";
    out += args[i].TypeName();
  }
  out += ")";
  return Value::Error(std::move(out));
}

uint64_t ActualSize(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kString:
    case ValueKind::kBytes:
      return v.string_value().size();
    case ValueKind::kList:
      return v.list_value().size();
    case ValueKind::kMap:
      return v.map_value().size();
    default:
      return 1;
  }
}

}  // namespace qm::cel
