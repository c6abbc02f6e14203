// The CEL standard functions and operators (cel-spec langdef.md, as cel-go implements them for
// Kubernetes), optional types and includes() on any value; see cel/functions.h.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "cel/ast.h"
#include "cel/function_registry.h"
#include "cel/functions.h"
#include "cel/operators.h"
#include "cel/source.h"
#include "cel/strings_lib.h"

namespace qm::cel {

namespace {

constexpr KindMask kNumber = Kinds(ValueKind::kInt, ValueKind::kUint, ValueKind::kDouble);
constexpr KindMask kInt = KindBit(ValueKind::kInt);
constexpr KindMask kUint = KindBit(ValueKind::kUint);
constexpr KindMask kDouble = KindBit(ValueKind::kDouble);
constexpr KindMask kBool = KindBit(ValueKind::kBool);
constexpr KindMask kString = KindBit(ValueKind::kString);
constexpr KindMask kBytes = KindBit(ValueKind::kBytes);
constexpr KindMask kList = KindBit(ValueKind::kList);
constexpr KindMask kMap = KindBit(ValueKind::kMap);
constexpr KindMask kOptional = KindBit(ValueKind::kOptional);
constexpr KindMask kType = KindBit(ValueKind::kType);
constexpr KindMask kTimestamp = KindBit(ValueKind::kTimestamp);
constexpr KindMask kDuration = KindBit(ValueKind::kDuration);

Value Err(std::string message) { return Value::Error(std::move(message)); }

// An integral list index from an int, uint or integral double.
std::optional<int64_t> IndexValue(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kInt:
      return v.int_value();
    case ValueKind::kUint:
      if (v.uint_value() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return std::numeric_limits<int64_t>::max();
      }
      return static_cast<int64_t>(v.uint_value());
    case ValueKind::kDouble: {
      const double d = v.double_value();
      if (d != std::trunc(d) || !(d > -9223372036854775809.0 && d < 9223372036854775808.0)) {
        return std::nullopt;
      }
      return static_cast<int64_t>(d);
    }
    default:
      return std::nullopt;
  }
}

bool IsZeroValue(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kNull:
      return true;
    case ValueKind::kBool:
      return !v.bool_value();
    case ValueKind::kInt:
      return v.int_value() == 0;
    case ValueKind::kUint:
      return v.uint_value() == 0;
    case ValueKind::kDouble:
      return v.double_value() == 0;
    case ValueKind::kString:
    case ValueKind::kBytes:
      return v.string_value().empty();
    case ValueKind::kList:
      return v.list_value().empty();
    case ValueKind::kMap:
      return v.map_value().size() == 0;
    case ValueKind::kOptional:
      return !v.has_optional_value();
    case ValueKind::kQuantity:
      return v.quantity_value().IsZero();
    default:
      return false;
  }
}

// ---------------------------------------------------------------------------------------------
// Entry costs

bool ChargeNothing(EvalContext&, const Call&) { return true; }

// Equality and ordering: the traversal of the smaller operand.
bool ChargeSmallerOperand(EvalContext& ctx, const Call& call) {
  return ctx.Charge(TraversalCost(std::min(ActualSize(call.args[0]), ActualSize(call.args[1]))));
}

// `+`: the traversal of both operands when they are strings, bytes or lists; otherwise 1.
bool ChargeAdd(EvalContext& ctx, const Call& call) {
  const ValueKind k = call.args[0].kind();
  if (k == ValueKind::kString || k == ValueKind::kBytes || k == ValueKind::kList) {
    return ctx.Charge(TraversalCost(ActualSize(call.args[0]) + ActualSize(call.args[1])));
  }
  return ctx.Charge(1);
}

// `in`: the list's length when the collection is a list; otherwise 1.
bool ChargeIn(EvalContext& ctx, const Call& call) {
  const Value& coll = call.args[1];
  return ctx.Charge(coll.kind() == ValueKind::kList ? coll.list_value().size() : 1);
}

// cel.@mapInsert: the copy of the map it extends.
bool ChargeMapInsert(EvalContext& ctx, const Call& call) {
  if (!call.args.empty() && call.args[0].kind() == ValueKind::kMap) {
    return ctx.Charge(1 + call.args[0].map_value().size());
  }
  return ctx.Charge(1);
}

// string() and bytes(): the call and the traversal of the argument.
bool ChargeStringConversion(EvalContext& ctx, const Call& call) {
  return ctx.Charge(1) && ctx.Charge(TraversalCost(ActualSize(call.args[0])));
}

// includes(): the scan of a list receiver; any other receiver is compared once.
bool ChargeIncludes(EvalContext& ctx, const Call& call) {
  if (!ctx.Charge(1)) return false;
  return call.target->kind() != ValueKind::kList || ctx.Charge(call.target->list_value().size());
}

bool ChargeOne(EvalContext& ctx, const Call&) { return ctx.Charge(1); }

// ---------------------------------------------------------------------------------------------
// Operators

template <bool kNegate>
Value EqualsImpl(EvalContext& ctx, const Call& call) {
  return EqualsOperator(ctx, kNegate, call.args[0], call.args[1]);
}

template <bool (*kHolds)(int)>
Value OrderImpl(EvalContext&, const Call& call) {
  const std::optional<int> c = Compare(call.args[0], call.args[1]);
  if (!c.has_value()) return Value::Bool(false);  // NaN is unordered
  return Value::Bool(kHolds(*c));
}
bool Less(int c) { return c < 0; }
bool LessEquals(int c) { return c <= 0; }
bool Greater(int c) { return c > 0; }
bool GreaterEquals(int c) { return c >= 0; }

Value AddImpl(EvalContext&, const Call& call) { return Add(call.args[0], call.args[1]); }

enum class IntOp { kSubtract, kMultiply, kDivide, kModulo };

template <IntOp kOp>
Value IntArith(EvalContext&, const Call& call) {
  const int64_t x = call.args[0].int_value(), y = call.args[1].int_value();
  int64_t r = 0;
  if constexpr (kOp == IntOp::kSubtract) {
    if (__builtin_sub_overflow(x, y, &r)) return Err("integer overflow");
  } else if constexpr (kOp == IntOp::kMultiply) {
    if (__builtin_mul_overflow(x, y, &r)) return Err("integer overflow");
  } else if constexpr (kOp == IntOp::kDivide) {
    if (y == 0) return Err("division by zero");
    if (x == std::numeric_limits<int64_t>::min() && y == -1) return Err("integer overflow");
    r = x / y;
  } else {
    if (y == 0) return Err("modulus by zero");
    if (x == std::numeric_limits<int64_t>::min() && y == -1) return Err("integer overflow");
    r = x % y;
  }
  return Value::Int(r);
}

template <IntOp kOp>
Value UintArith(EvalContext&, const Call& call) {
  const uint64_t x = call.args[0].uint_value(), y = call.args[1].uint_value();
  uint64_t r = 0;
  if constexpr (kOp == IntOp::kSubtract) {
    if (__builtin_sub_overflow(x, y, &r)) return Err("unsigned integer overflow");
  } else if constexpr (kOp == IntOp::kMultiply) {
    if (__builtin_mul_overflow(x, y, &r)) return Err("unsigned integer overflow");
  } else if constexpr (kOp == IntOp::kDivide) {
    if (y == 0) return Err("division by zero");
    r = x / y;
  } else {
    if (y == 0) return Err("modulus by zero");
    r = x % y;
  }
  return Value::Uint(r);
}

template <IntOp kOp>
Value DoubleArith(EvalContext&, const Call& call) {
  const double x = call.args[0].double_value(), y = call.args[1].double_value();
  if constexpr (kOp == IntOp::kSubtract) return Value::Double(x - y);
  if constexpr (kOp == IntOp::kMultiply) return Value::Double(x * y);
  return Value::Double(x / y);
}

Value NegateInt(EvalContext&, const Call& call) {
  if (call.args[0].int_value() == std::numeric_limits<int64_t>::min()) {
    return Err("integer overflow");
  }
  return Value::Int(-call.args[0].int_value());
}

template <bool kOptionalIndex>
Value IndexImpl(EvalContext&, const Call& call) {
  return Index(call.args[0], call.args[1], kOptionalIndex);
}

Value InList(EvalContext&, const Call& call) {
  for (const Value& e : call.args[1].list_value()) {
    Value eq = Equals(e, call.args[0]);
    if (eq.IsError() || eq.bool_value()) return eq;
  }
  return Value::Bool(false);
}

Value MapInsertEntry(EvalContext&, const Call& call) {
  if (!MapValue::IsValidKey(call.args[1])) return NoSuchOverload(call.function, nullptr, call.args);
  MapValue m = call.args[0].map_value();
  if (!m.Insert(call.args[1], call.args[2])) {
    return Err("insert failed: key " + KeyText(call.args[1]) + " already exists");
  }
  return Value::Map(std::move(m));
}

Value MapInsertMap(EvalContext&, const Call& call) {
  MapValue m = call.args[0].map_value();
  for (const auto& [k, v] : call.args[1].map_value().entries()) {
    if (!m.Insert(k, v)) return Err("insert failed: key " + KeyText(k) + " already exists");
  }
  return Value::Map(std::move(m));
}

void RegisterOperators(FunctionRegistry& r) {
  r.SetEntryCost(CallStyle::kGlobal, op::kEquals, 2, &ChargeNothing);
  r.AddGlobal(op::kEquals, {kAnyKind, kAnyKind}, &EqualsImpl<false>);
  r.SetEntryCost(CallStyle::kGlobal, op::kNotEquals, 2, &ChargeNothing);
  r.AddGlobal(op::kNotEquals, {kAnyKind, kAnyKind}, &EqualsImpl<true>);

  // Ordering across numbers, and within strings, bytes, bools, timestamps and durations.
  const std::pair<std::string_view, FunctionImpl> orders[] = {
      {op::kLess, &OrderImpl<&Less>},
      {op::kLessEquals, &OrderImpl<&LessEquals>},
      {op::kGreater, &OrderImpl<&Greater>},
      {op::kGreaterEquals, &OrderImpl<&GreaterEquals>},
  };
  for (const auto& [name, impl] : orders) {
    r.SetEntryCost(CallStyle::kGlobal, name, 2, &ChargeSmallerOperand);
    r.AddGlobal(name, {kNumber, kNumber}, impl);
    r.AddGlobal(name, {kString, kString}, impl);
    r.AddGlobal(name, {kBytes, kBytes}, impl);
    r.AddGlobal(name, {kBool, kBool}, impl);
    r.AddGlobal(name, {kTimestamp, kTimestamp}, impl);
    r.AddGlobal(name, {kDuration, kDuration}, impl);
  }

  r.SetEntryCost(CallStyle::kGlobal, op::kAdd, 2, &ChargeAdd);
  for (KindMask k : {kInt, kUint, kDouble, kString, kBytes, kList}) {
    r.AddGlobal(op::kAdd, {k, k}, &AddImpl);
  }
  r.AddGlobal(op::kSubtract, {kInt, kInt}, &IntArith<IntOp::kSubtract>);
  r.AddGlobal(op::kSubtract, {kUint, kUint}, &UintArith<IntOp::kSubtract>);
  r.AddGlobal(op::kSubtract, {kDouble, kDouble}, &DoubleArith<IntOp::kSubtract>);
  r.AddGlobal(op::kMultiply, {kInt, kInt}, &IntArith<IntOp::kMultiply>);
  r.AddGlobal(op::kMultiply, {kUint, kUint}, &UintArith<IntOp::kMultiply>);
  r.AddGlobal(op::kMultiply, {kDouble, kDouble}, &DoubleArith<IntOp::kMultiply>);
  r.AddGlobal(op::kDivide, {kInt, kInt}, &IntArith<IntOp::kDivide>);
  r.AddGlobal(op::kDivide, {kUint, kUint}, &UintArith<IntOp::kDivide>);
  r.AddGlobal(op::kDivide, {kDouble, kDouble}, &DoubleArith<IntOp::kDivide>);
  r.AddGlobal(op::kModulo, {kInt, kInt}, &IntArith<IntOp::kModulo>);
  r.AddGlobal(op::kModulo, {kUint, kUint}, &UintArith<IntOp::kModulo>);

  r.AddGlobal(op::kNegate, {kInt}, &NegateInt);
  r.AddGlobal(op::kNegate, {kDouble}, [](EvalContext&, const Call& call) {
    return Value::Double(-call.args[0].double_value());
  });
  r.AddGlobal(op::kLogicalNot, {kBool}, [](EvalContext&, const Call& call) {
    return Value::Bool(!call.args[0].bool_value());
  });

  // Index reports its own "no such overload" (with `_[?_]` once an optional is involved).
  r.AddGlobal(op::kIndex, {kAnyKind, kAnyKind}, &IndexImpl<false>);
  r.AddGlobal(op::kOptIndex, {kAnyKind, kAnyKind}, &IndexImpl<true>);

  r.SetEntryCost(CallStyle::kGlobal, op::kIn, 2, &ChargeIn);
  r.AddGlobal(op::kIn, {kAnyKind, kList}, &InList);
  r.AddGlobal(op::kIn, {kAnyKind, kMap}, [](EvalContext&, const Call& call) {
    return Value::Bool(call.args[1].map_value().Contains(call.args[0]));
  });

  r.SetEntryCost(CallStyle::kGlobal, op::kMapInsert, FunctionRegistry::kAnyArity, &ChargeMapInsert);
  r.AddGlobal(op::kMapInsert, {kMap, kAnyKind, kAnyKind}, &MapInsertEntry);
  r.AddGlobal(op::kMapInsert, {kMap, kMap}, &MapInsertMap);
}

// ---------------------------------------------------------------------------------------------
// Type conversions (cel-go's error texts, which quote Go's strconv errors)

Value ParseIntText(const std::string& s) {
  const std::string prefix = "strconv.ParseInt: parsing " + QuoteString(s) + ": ";
  size_t i = 0;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) i = 1;
  if (i == s.size()) return Err(prefix + "invalid syntax");
  for (size_t j = i; j < s.size(); ++j) {
    if (s[j] < '0' || s[j] > '9') return Err(prefix + "invalid syntax");
  }
  errno = 0;
  const long long v = std::strtoll(s.c_str(), nullptr, 10);
  if (errno == ERANGE) return Err(prefix + "value out of range");
  return Value::Int(v);
}

Value ParseUintText(const std::string& s) {
  const std::string prefix = "strconv.ParseUint: parsing " + QuoteString(s) + ": ";
  if (s.empty()) return Err(prefix + "invalid syntax");
  for (char c : s) {
    if (c < '0' || c > '9') return Err(prefix + "invalid syntax");
  }
  errno = 0;
  const unsigned long long v = std::strtoull(s.c_str(), nullptr, 10);
  if (errno == ERANGE) return Err(prefix + "value out of range");
  return Value::Uint(v);
}

Value ParseDoubleText(const std::string& s) {
  const std::string prefix = "strconv.ParseFloat: parsing " + QuoteString(s) + ": ";
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) {
    return Err(prefix + "invalid syntax");
  }
  errno = 0;
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return Err(prefix + "invalid syntax");
  if (errno == ERANGE && std::isinf(d)) return Err(prefix + "value out of range");
  return Value::Double(d);
}

Value ParseBoolText(const std::string& s) {
  if (s == "1" || s == "t" || s == "T" || s == "true" || s == "TRUE" || s == "True") {
    return Value::Bool(true);
  }
  if (s == "0" || s == "f" || s == "F" || s == "false" || s == "FALSE" || s == "False") {
    return Value::Bool(false);
  }
  return Err("strconv.ParseBool: parsing " + QuoteString(s) + ": invalid syntax");
}

bool ValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t n = 0;
    const char32_t cp = DecodeUtf8(s, i, &n);
    if (cp == 0xFFFD && n == 1) {
      // A literal U+FFFD is three bytes; a one-byte U+FFFD is an invalid sequence.
      return false;
    }
    i += n;
  }
  return true;
}

std::string DoubleToString(double d) {
  absl::StatusOr<std::string> s = strings::Format("%s", {strings::FormatArg::Double(d)});
  return s.ok() ? *s : std::to_string(d);
}

Value Identity(EvalContext&, const Call& call) { return call.args[0]; }

void RegisterConversions(FunctionRegistry& r) {
  // int() and uint() of timestamps and durations, string() of those and of IPs and CIDRs, and
  // timestamp() and duration(): functions_time.cc and functions_kubernetes.cc.
  r.AddGlobal("int", {kInt}, &Identity);
  r.AddGlobal("int", {kUint}, [](EvalContext&, const Call& call) {
    const uint64_t u = call.args[0].uint_value();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Err("integer overflow");
    }
    return Value::Int(static_cast<int64_t>(u));
  });
  r.AddGlobal("int", {kDouble}, [](EvalContext&, const Call& call) {
    const double d = call.args[0].double_value();
    if (!(d > -9223372036854775808.0 && d < 9223372036854775808.0)) {
      return Err("integer overflow");
    }
    return Value::Int(static_cast<int64_t>(d));
  });
  r.AddGlobal("int", {kString}, [](EvalContext&, const Call& call) {
    return ParseIntText(call.args[0].string_value());
  });

  r.AddGlobal("uint", {kUint}, &Identity);
  r.AddGlobal("uint", {kInt}, [](EvalContext&, const Call& call) {
    if (call.args[0].int_value() < 0) return Err("unsigned integer overflow");
    return Value::Uint(static_cast<uint64_t>(call.args[0].int_value()));
  });
  r.AddGlobal("uint", {kDouble}, [](EvalContext&, const Call& call) {
    const double d = call.args[0].double_value();
    if (!(d >= 0 && d < 18446744073709551616.0)) return Err("unsigned integer overflow");
    return Value::Uint(static_cast<uint64_t>(d));
  });
  r.AddGlobal("uint", {kString}, [](EvalContext&, const Call& call) {
    return ParseUintText(call.args[0].string_value());
  });

  r.AddGlobal("double", {kDouble}, &Identity);
  r.AddGlobal("double", {kInt}, [](EvalContext&, const Call& call) {
    return Value::Double(static_cast<double>(call.args[0].int_value()));
  });
  r.AddGlobal("double", {kUint}, [](EvalContext&, const Call& call) {
    return Value::Double(static_cast<double>(call.args[0].uint_value()));
  });
  r.AddGlobal("double", {kString}, [](EvalContext&, const Call& call) {
    return ParseDoubleText(call.args[0].string_value());
  });

  r.SetEntryCost(CallStyle::kGlobal, "string", 1, &ChargeStringConversion);
  r.AddGlobal("string", {kString}, &Identity);
  r.AddGlobal("string", {kInt}, [](EvalContext&, const Call& call) {
    return Value::String(std::to_string(call.args[0].int_value()));
  });
  r.AddGlobal("string", {kUint}, [](EvalContext&, const Call& call) {
    return Value::String(std::to_string(call.args[0].uint_value()));
  });
  r.AddGlobal("string", {kDouble}, [](EvalContext&, const Call& call) {
    return Value::String(DoubleToString(call.args[0].double_value()));
  });
  r.AddGlobal("string", {kBool}, [](EvalContext&, const Call& call) {
    return Value::String(call.args[0].bool_value() ? "true" : "false");
  });
  r.AddGlobal("string", {kBytes}, [](EvalContext&, const Call& call) {
    if (!ValidUtf8(call.args[0].bytes_value())) {
      return Err("invalid UTF-8 in bytes, cannot convert to string");
    }
    return Value::String(call.args[0].bytes_value());
  });
  r.AddGlobal("string", {kType}, [](EvalContext&, const Call& call) {
    return Value::String(call.args[0].type_name());
  });

  r.AddGlobal("bool", {kBool}, &Identity);
  r.AddGlobal("bool", {kString}, [](EvalContext&, const Call& call) {
    return ParseBoolText(call.args[0].string_value());
  });

  r.SetEntryCost(CallStyle::kGlobal, "bytes", 1, &ChargeStringConversion);
  r.AddGlobal("bytes", {kBytes}, &Identity);
  r.AddGlobal("bytes", {kString}, [](EvalContext&, const Call& call) {
    return Value::Bytes(call.args[0].string_value());
  });

  r.AddGlobal("type", {kAnyKind}, [](EvalContext&, const Call& call) {
    return Value::Type(std::string(call.args[0].TypeName()));
  });
  r.AddGlobal("dyn", {kAnyKind}, &Identity);
}

// ---------------------------------------------------------------------------------------------
// size(), optional types, includes()

Value SizeOf(EvalContext&, const Call& call) {
  const Value& v = call.target != nullptr ? *call.target : call.args[0];
  return Value::Int(static_cast<int64_t>(ActualSize(v)));
}

void RegisterOthers(FunctionRegistry& r) {
  // size() of strings and lists (methods): functions_strings.cc and functions_lists.cc.
  r.AddGlobal("size", {kString}, [](EvalContext&, const Call& call) {
    return Value::Int(strings::Size(call.args[0].string_value()));
  });
  r.AddGlobal("size", {Kinds(ValueKind::kBytes, ValueKind::kList, ValueKind::kMap)}, &SizeOf);
  r.AddMethod("size", Kinds(ValueKind::kBytes, ValueKind::kMap), {},
              [](EvalContext& ctx, const Call& call) {
                if (!ctx.Charge(1)) return EvalContext::Cancelled();
                return SizeOf(ctx, call);
              });

  r.AddGlobal(op::kOptionalOf, {kAnyKind},
              [](EvalContext&, const Call& call) { return Value::OptionalOf(call.args[0]); });
  r.AddGlobal(op::kOptionalNone, {},
              [](EvalContext&, const Call&) { return Value::OptionalNone(); });
  r.AddGlobal("optional.ofNonZeroValue", {kAnyKind}, [](EvalContext&, const Call& call) {
    return IsZeroValue(call.args[0]) ? Value::OptionalNone() : Value::OptionalOf(call.args[0]);
  });
  r.SetReceiverCost(ValueKind::kOptional, &ChargeOne);
  r.AddMethod(op::kHasValue, kOptional, {}, [](EvalContext&, const Call& call) {
    return Value::Bool(call.target->has_optional_value());
  });
  r.AddMethod(op::kValue, kOptional, {}, [](EvalContext&, const Call& call) {
    if (!call.target->has_optional_value()) return Err("optional.none() dereference");
    return call.target->optional_value();
  });
  r.AddMethod("orValue", kOptional, {kAnyKind}, [](EvalContext&, const Call& call) {
    return call.target->has_optional_value() ? call.target->optional_value() : call.args[0];
  });
  r.AddMethod("or", kOptional, {kOptional}, [](EvalContext&, const Call& call) {
    return call.target->has_optional_value() ? *call.target : call.args[0];
  });

  // DRA's includes(): on a list a membership test (functions_lists.cc), on any other value
  // equality.
  r.SetEntryCost(CallStyle::kReceiver, "includes", 1, &ChargeIncludes);
  r.AddMethod("includes", kAnyKind & ~kList, {kAnyKind},
              [](EvalContext&, const Call& call) { return Equals(*call.target, call.args[0]); });
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Shared helpers

Value EqualsOperator(EvalContext& ctx, bool negate, const Value& a, const Value& b) {
  if (!ctx.Charge(TraversalCost(std::min(ActualSize(a), ActualSize(b))))) {
    return EvalContext::Cancelled();
  }
  Value eq = Equals(a, b);
  if (eq.IsError() || !negate) return eq;
  return Value::Bool(!eq.bool_value());
}

Value Index(const Value& container, const Value& key, bool optional) {
  switch (container.kind()) {
    case ValueKind::kList: {
      const std::optional<int64_t> i = IndexValue(key);
      if (!i.has_value()) {
        return NoSuchOverload(optional ? op::kOptIndex : op::kIndex, nullptr, {container, key});
      }
      const ValueList& l = container.list_value();
      if (*i < 0 || *i >= static_cast<int64_t>(l.size())) {
        if (optional) return Value::OptionalNone();
        return Err("index out of bounds: " + std::to_string(*i));
      }
      return optional ? Value::OptionalOf(l[*i]) : l[*i];
    }
    case ValueKind::kMap: {
      if (!MapValue::IsValidKey(key) && key.kind() != ValueKind::kDouble) {
        return NoSuchOverload(optional ? op::kOptIndex : op::kIndex, nullptr, {container, key});
      }
      const Value* v = container.map_value().Find(key);
      if (v == nullptr) {
        return optional ? Value::OptionalNone() : Err("no such key: " + KeyText(key));
      }
      return optional ? Value::OptionalOf(*v) : *v;
    }
    case ValueKind::kOptional:
      if (!container.has_optional_value()) return container;
      return Index(container.optional_value(), key, /*optional=*/true);
    default:
      return NoSuchOverload(optional ? op::kOptIndex : op::kIndex, nullptr, {container, key});
  }
}

Value Add(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return NoSuchOverload(op::kAdd, nullptr, {a, b});
  switch (a.kind()) {
    case ValueKind::kInt: {
      int64_t r;
      if (__builtin_add_overflow(a.int_value(), b.int_value(), &r)) return Err("integer overflow");
      return Value::Int(r);
    }
    case ValueKind::kUint: {
      uint64_t r;
      if (__builtin_add_overflow(a.uint_value(), b.uint_value(), &r)) {
        return Err("unsigned integer overflow");
      }
      return Value::Uint(r);
    }
    case ValueKind::kDouble:
      return Value::Double(a.double_value() + b.double_value());
    case ValueKind::kString:
      return Value::String(a.string_value() + b.string_value());
    case ValueKind::kBytes:
      return Value::Bytes(a.bytes_value() + b.bytes_value());
    case ValueKind::kList: {
      ValueList out;
      out.reserve(a.list_value().size() + b.list_value().size());
      out.insert(out.end(), a.list_value().begin(), a.list_value().end());
      out.insert(out.end(), b.list_value().begin(), b.list_value().end());
      return Value::List(std::move(out));
    }
    default:
      return NoSuchOverload(op::kAdd, nullptr, {a, b});
  }
}

std::string KeyText(const Value& k) {
  switch (k.kind()) {
    case ValueKind::kString:
      return k.string_value();
    case ValueKind::kInt:
      return std::to_string(k.int_value());
    case ValueKind::kUint:
      return std::to_string(k.uint_value());
    case ValueKind::kBool:
      return k.bool_value() ? "true" : "false";
    default:
      return k.DebugString();
  }
}

Value FromStatus(const absl::Status& status) { return Err(std::string(status.message())); }

Value StringList(std::vector<std::string> parts) {
  ValueList out;
  out.reserve(parts.size());
  for (std::string& p : parts) out.push_back(Value::String(std::move(p)));
  return Value::List(std::move(out));
}

void RegisterStandardFunctions(FunctionRegistry& registry) {
  RegisterOperators(registry);
  RegisterConversions(registry);
  RegisterOthers(registry);
}

const FunctionRegistry& StandardFunctions() {
  static const FunctionRegistry* const registry = [] {
    auto* r = new FunctionRegistry();
    RegisterStandardFunctions(*r);
    RegisterStringFunctions(*r);
    RegisterListFunctions(*r);
    RegisterTimeFunctions(*r);
    RegisterKubernetesFunctions(*r);
    return r;
  }();
  return *registry;
}

}  // namespace qm::cel
