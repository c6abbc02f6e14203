// List functions: Kubernetes' library.Lists, ext.Lists v3 (lists.range included), ext.Sets and
// DRA's includes() on lists; see cel/functions.h.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "cel/function_registry.h"
#include "cel/functions.h"

namespace qm::cel {

namespace {

constexpr KindMask kInt = KindBit(ValueKind::kInt);
constexpr KindMask kList = KindBit(ValueKind::kList);
constexpr size_t kMaxIncludesElements = 48;

// Every method of a list charges the call and the scan of the list.
bool ChargeListReceiver(EvalContext& ctx, const Call& call) {
  return ctx.Charge(1) && ctx.Charge(call.target->list_value().size());
}

const ValueList& L(const Call& call) { return call.target->list_value(); }

template <bool kLast>
Value IndexOf(EvalContext&, const Call& call) {
  const ValueList& l = L(call);
  for (size_t k = 0; k < l.size(); ++k) {
    const size_t i = kLast ? l.size() - 1 - k : k;
    Value eq = Equals(l[i], call.args[0]);
    if (eq.IsError()) return eq;
    if (eq.bool_value()) return Value::Int(static_cast<int64_t>(i));
  }
  return Value::Int(-1);
}

Value Includes(EvalContext&, const Call& call) {
  const ValueList& l = L(call);
  if (l.size() > kMaxIncludesElements) {
    return Value::Error("includes() supports lists of at most " +
                        std::to_string(kMaxIncludesElements) + " elements, got " +
                        std::to_string(l.size()));
  }
  for (const Value& e : l) {
    Value eq = Equals(e, call.args[0]);
    if (eq.IsError() || eq.bool_value()) return eq;
  }
  return Value::Bool(false);
}

Value IsSorted(EvalContext&, const Call& call) {
  const ValueList& l = L(call);
  for (size_t i = 1; i < l.size(); ++i) {
    if (!Comparable(l[i - 1], l[i])) return NoSuchOverload(call.function, call.target, call.args);
    const std::optional<int> c = Compare(l[i - 1], l[i]);
    if (c.has_value() && *c > 0) return Value::Bool(false);
  }
  return Value::Bool(true);
}

template <bool kMin>
Value MinMax(EvalContext&, const Call& call) {
  const ValueList& l = L(call);
  if (l.empty()) return Value::Error(std::string(call.function) + " called on empty list");
  Value best = l[0];
  for (size_t i = 1; i < l.size(); ++i) {
    if (!Comparable(best, l[i])) return NoSuchOverload(call.function, call.target, call.args);
    const std::optional<int> c = Compare(l[i], best);
    if (c.has_value() && (kMin ? *c < 0 : *c > 0)) best = l[i];
  }
  if (!Comparable(best, best)) return NoSuchOverload(call.function, call.target, call.args);
  return best;
}

Value Sum(EvalContext&, const Call& call) {
  const ValueList& l = L(call);
  if (l.empty()) return Value::Int(0);
  Value acc = l[0];
  if (acc.kind() != ValueKind::kInt && acc.kind() != ValueKind::kUint &&
      acc.kind() != ValueKind::kDouble) {
    return NoSuchOverload(call.function, call.target, call.args);
  }
  for (size_t i = 1; i < l.size(); ++i) {
    acc = Add(acc, l[i]);
    if (acc.IsError()) return acc;
  }
  return acc;
}

Value Slice(EvalContext&, const Call& call) {
  const ValueList& l = L(call);
  const int64_t s = call.args[0].int_value(), e = call.args[1].int_value();
  const std::string prefix = "cannot slice(" + std::to_string(s) + ", " + std::to_string(e) + "), ";
  if (s < 0 || e < 0) return Value::Error(prefix + "negative indexes not supported");
  if (s > e) {
    return Value::Error(prefix + "start index must be less than or equal to end index");
  }
  if (e > static_cast<int64_t>(l.size())) {
    return Value::Error(prefix + "list is length " + std::to_string(l.size()));
  }
  return Value::List(ValueList(l.begin() + s, l.begin() + e));
}

Value Flatten(EvalContext& ctx, const Call& call) {
  const int64_t depth = call.args.empty() ? 1 : call.args[0].int_value();
  if (depth < 0) return Value::Error("level must be non-negative");
  // Iterative flattening by levels keeps the recursion bounded.
  ValueList cur = L(call);
  for (int64_t d = 0; d < depth; ++d) {
    bool any = false;
    ValueList next;
    for (const Value& e : cur) {
      if (e.kind() == ValueKind::kList) {
        any = true;
        next.insert(next.end(), e.list_value().begin(), e.list_value().end());
      } else {
        next.push_back(e);
      }
    }
    cur = std::move(next);
    if (!any) break;
    if (!ctx.Charge(cur.size())) return EvalContext::Cancelled();
  }
  return Value::List(std::move(cur));
}

Value Distinct(EvalContext& ctx, const Call& call) {
  ValueList out;
  for (const Value& e : L(call)) {
    if (!ctx.Charge(out.size())) return EvalContext::Cancelled();
    bool seen = false;
    for (const Value& o : out) {
      Value eq = Equals(o, e);
      if (eq.IsError()) return eq;
      if (eq.bool_value()) {
        seen = true;
        break;
      }
    }
    if (!seen) out.push_back(e);
  }
  return Value::List(std::move(out));
}

Value Sort(EvalContext& ctx, const Call& call) {
  const ValueList& l = L(call);
  for (size_t i = 1; i < l.size(); ++i) {
    if (l[i].kind() != l[0].kind() || !Comparable(l[0], l[i])) {
      return Value::Error("list elements must have the same type");
    }
  }
  if (!l.empty() && !Comparable(l[0], l[0])) {
    return NoSuchOverload(call.function, call.target, call.args);
  }
  uint64_t log = 1;
  while ((uint64_t{1} << log) < l.size()) ++log;
  if (!ctx.Charge(l.size() * log)) return EvalContext::Cancelled();
  ValueList out = l;
  std::stable_sort(out.begin(), out.end(), [](const Value& a, const Value& b) {
    const std::optional<int> c = Compare(a, b);
    return c.has_value() && *c < 0;
  });
  return Value::List(std::move(out));
}

Value Range(EvalContext& ctx, const Call& call) {
  const int64_t count = std::max<int64_t>(0, call.args[0].int_value());
  if (!ctx.Charge(static_cast<uint64_t>(count))) return EvalContext::Cancelled();
  ValueList out;
  out.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out.push_back(Value::Int(i));
  return Value::List(std::move(out));
}

// Every element of `sub` equals some element of `super`.
Value ContainsAll(const ValueList& super, const ValueList& sub) {
  for (const Value& x : sub) {
    bool found = false;
    for (const Value& y : super) {
      Value eq = Equals(y, x);
      if (eq.IsError()) return eq;
      if (eq.bool_value()) {
        found = true;
        break;
      }
    }
    if (!found) return Value::Bool(false);
  }
  return Value::Bool(true);
}

// The sets functions charge the product of both sizes.
bool ChargeSets(EvalContext& ctx, const Call& call) {
  return ctx.Charge(static_cast<uint64_t>(call.args[0].list_value().size()) *
                    call.args[1].list_value().size());
}

}  // namespace

void RegisterListFunctions(FunctionRegistry& r) {
  r.SetReceiverCost(ValueKind::kList, &ChargeListReceiver);
  r.AddMethod("size", kList, {}, [](EvalContext&, const Call& call) {
    return Value::Int(static_cast<int64_t>(L(call).size()));
  });
  r.AddMethod("indexOf", kList, {kAnyKind}, &IndexOf<false>);
  r.AddMethod("lastIndexOf", kList, {kAnyKind}, &IndexOf<true>);
  // The entry cost of includes() (functions_standard.cc) covers the scan.
  r.AddMethod("includes", kList, {kAnyKind}, &Includes);
  r.AddMethod("isSorted", kList, {}, &IsSorted);
  r.AddMethod("min", kList, {}, &MinMax<true>);
  r.AddMethod("max", kList, {}, &MinMax<false>);
  r.AddMethod("sum", kList, {}, &Sum);
  r.AddMethod("slice", kList, {kInt, kInt}, &Slice);
  r.AddMethod("flatten", kList, {}, &Flatten);
  r.AddMethod("flatten", kList, {kInt}, &Flatten);
  r.AddMethod("distinct", kList, {}, &Distinct);
  r.AddMethod("reverse", kList, {}, [](EvalContext&, const Call& call) {
    return Value::List(ValueList(L(call).rbegin(), L(call).rend()));
  });
  r.AddMethod("sort", kList, {}, &Sort);
  r.AddGlobal("lists.range", {kInt}, &Range);

  r.AddGlobal("sets.contains", {kList, kList}, [](EvalContext& ctx, const Call& call) {
    if (!ChargeSets(ctx, call)) return EvalContext::Cancelled();
    return ContainsAll(call.args[0].list_value(), call.args[1].list_value());
  });
  r.AddGlobal("sets.equivalent", {kList, kList}, [](EvalContext& ctx, const Call& call) {
    if (!ChargeSets(ctx, call)) return EvalContext::Cancelled();
    const ValueList& a = call.args[0].list_value();
    const ValueList& b = call.args[1].list_value();
    Value r = ContainsAll(a, b);
    if (r.IsError() || !r.bool_value()) return r;
    return ContainsAll(b, a);
  });
  r.AddGlobal("sets.intersects", {kList, kList}, [](EvalContext& ctx, const Call& call) {
    if (!ChargeSets(ctx, call)) return EvalContext::Cancelled();
    for (const Value& x : call.args[0].list_value()) {
      for (const Value& y : call.args[1].list_value()) {
        Value eq = Equals(x, y);
        if (eq.IsError() || eq.bool_value()) return eq;
      }
    }
    return Value::Bool(false);
  });
}

}  // namespace qm::cel
