// Timestamps and durations (cel/time_lib.h): conversions, arithmetic and accessors; their
// ordering is registered with the other orderings (functions_standard.cc). See cel/functions.h.
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "absl/status/statusor.h"
#include "cel/function_registry.h"
#include "cel/functions.h"
#include "cel/operators.h"
#include "cel/time_lib.h"

namespace qm::cel {

namespace {

constexpr KindMask kInt = KindBit(ValueKind::kInt);
constexpr KindMask kString = KindBit(ValueKind::kString);
constexpr KindMask kTimestamp = KindBit(ValueKind::kTimestamp);
constexpr KindMask kDuration = KindBit(ValueKind::kDuration);

// Every method of a timestamp or duration charges the call.
bool ChargeOne(EvalContext& ctx, const Call&) { return ctx.Charge(1); }

template <typename T>
Value FromTimeResult(absl::StatusOr<T> r) {
  if (!r.ok()) return FromStatus(r.status());
  if constexpr (std::is_same_v<T, Timestamp>) {
    return Value::FromTimestamp(*r);
  } else {
    return Value::Duration(*r);
  }
}

const Timestamp& Ts(const Value& v) { return v.timestamp_value(); }
int64_t Du(const Value& v) { return v.duration_value(); }

Value Identity(EvalContext&, const Call& call) { return call.args[0]; }

Value TimestampField(EvalContext&, const Call& call) {
  absl::StatusOr<int64_t> r =
      TimestampAccessor(Ts(*call.target), call.function,
                        call.args.empty() ? std::string_view("UTC") : call.args[0].string_value());
  if (!r.ok()) return FromStatus(r.status());
  return Value::Int(*r);
}

}  // namespace

void RegisterTimeFunctions(FunctionRegistry& r) {
  r.AddGlobal("timestamp", {kTimestamp}, &Identity);
  r.AddGlobal("timestamp", {kString}, [](EvalContext&, const Call& call) {
    return FromTimeResult(ParseTimestamp(call.args[0].string_value()));
  });
  r.AddGlobal("timestamp", {kInt}, [](EvalContext&, const Call& call) {
    return FromTimeResult(TimestampFromUnixSeconds(call.args[0].int_value()));
  });
  r.AddGlobal("duration", {kDuration}, &Identity);
  r.AddGlobal("duration", {kString}, [](EvalContext&, const Call& call) {
    return FromTimeResult(ParseDuration(call.args[0].string_value()));
  });
  r.AddGlobal("duration", {kInt}, [](EvalContext&, const Call& call) {
    return Value::Duration(call.args[0].int_value());
  });
  r.AddGlobal("int", {kTimestamp},
              [](EvalContext&, const Call& call) { return Value::Int(Ts(call.args[0]).seconds); });
  r.AddGlobal("int", {kDuration},
              [](EvalContext&, const Call& call) { return Value::Int(Du(call.args[0])); });
  r.AddGlobal("string", {kTimestamp}, [](EvalContext&, const Call& call) {
    return Value::String(FormatTimestamp(Ts(call.args[0])));
  });
  r.AddGlobal("string", {kDuration}, [](EvalContext&, const Call& call) {
    return Value::String(FormatDuration(Du(call.args[0])));
  });

  r.AddGlobal(op::kAdd, {kTimestamp, kDuration}, [](EvalContext&, const Call& call) {
    return FromTimeResult(AddDuration(Ts(call.args[0]), Du(call.args[1])));
  });
  r.AddGlobal(op::kAdd, {kDuration, kTimestamp}, [](EvalContext&, const Call& call) {
    return FromTimeResult(AddDuration(Ts(call.args[1]), Du(call.args[0])));
  });
  r.AddGlobal(op::kAdd, {kDuration, kDuration}, [](EvalContext&, const Call& call) {
    return FromTimeResult(AddDurations(Du(call.args[0]), Du(call.args[1])));
  });
  r.AddGlobal(op::kSubtract, {kTimestamp, kDuration}, [](EvalContext&, const Call& call) {
    return FromTimeResult(SubtractDuration(Ts(call.args[0]), Du(call.args[1])));
  });
  r.AddGlobal(op::kSubtract, {kTimestamp, kTimestamp}, [](EvalContext&, const Call& call) {
    return FromTimeResult(SubtractTimestamps(Ts(call.args[0]), Ts(call.args[1])));
  });
  r.AddGlobal(op::kSubtract, {kDuration, kDuration}, [](EvalContext&, const Call& call) {
    return FromTimeResult(SubtractDurations(Du(call.args[0]), Du(call.args[1])));
  });

  r.SetReceiverCost(ValueKind::kTimestamp, &ChargeOne);
  r.SetReceiverCost(ValueKind::kDuration, &ChargeOne);
  // The accessors take the function's name (TimestampAccessor, DurationAccessor).
  for (std::string_view name :
       {"getFullYear", "getMonth", "getDate", "getDayOfMonth", "getDayOfYear", "getDayOfWeek",
        "getHours", "getMinutes", "getSeconds", "getMilliseconds"}) {
    r.AddMethod(name, kTimestamp, {}, &TimestampField);
    r.AddMethod(name, kTimestamp, {kString}, &TimestampField);
  }
  for (std::string_view name : {"getHours", "getMinutes", "getSeconds", "getMilliseconds"}) {
    r.AddMethod(name, kDuration, {}, [](EvalContext&, const Call& call) {
      return Value::Int(DurationAccessor(Du(*call.target), call.function));
    });
  }
}

}  // namespace qm::cel
