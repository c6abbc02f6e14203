#include "cel/function_registry.h"

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cel/functions.h"
#include "cel/interpreter.h"
#include "cel/value.h"

namespace qm::cel {
namespace {

constexpr KindMask kInt = KindBit(ValueKind::kInt);
constexpr KindMask kString = KindBit(ValueKind::kString);
constexpr KindMask kList = KindBit(ValueKind::kList);

// Overloads that name themselves, so a test sees which one ran.
Value StringF(EvalContext&, const Call&) { return Value::String("string.f"); }
Value ListF(EvalContext&, const Call&) { return Value::String("list.f"); }
Value GInt(EvalContext&, const Call&) { return Value::String("g(int)"); }
Value GString(EvalContext&, const Call&) { return Value::String("g(string)"); }
Value GAny(EvalContext&, const Call&) { return Value::String("g(any)"); }
Value GIntInt(EvalContext&, const Call&) { return Value::String("g(int, int)"); }
Value GlobalF(EvalContext&, const Call&) { return Value::String("f(any)"); }
// Charges 5 for its own work.
Value Costly(EvalContext& ctx, const Call&) {
  if (!ctx.Charge(5)) return EvalContext::Cancelled();
  return Value::Bool(true);
}
bool ChargeTen(EvalContext& ctx, const Call&) { return ctx.Charge(10); }
bool ChargeTwo(EvalContext& ctx, const Call&) { return ctx.Charge(2); }
bool ChargeThree(EvalContext& ctx, const Call&) { return ctx.Charge(3); }

class FunctionRegistryTest : public ::testing::Test {
 protected:
  FunctionRegistryTest() {
    registry_.AddMethod("f", kString, {}, &StringF);
    registry_.AddMethod("f", kList, {}, &ListF);
    registry_.AddGlobal("f", {kAnyKind}, &GlobalF);
    registry_.AddGlobal("g", {kInt}, &GInt);
    registry_.AddGlobal("g", {kString}, &GString);
    registry_.AddGlobal("g", {kInt | kString | kList}, &GAny);
    registry_.AddGlobal("g", {kInt, kInt}, &GIntInt);
  }

  // Dispatches a global call (target nullptr) or a receiver call, with a fresh cost count.
  Value Run(CallStyle style, std::string_view name, const Value* target, std::vector<Value> args,
            uint64_t* cost = nullptr, uint64_t limit = 1000) {
    EvalContext ctx(limit, nullptr);
    const Candidates candidates = registry_.Find(style, name, args.size());
    Value v = registry_.Dispatch(ctx, candidates, Call{name, target, args});
    if (cost != nullptr) *cost = ctx.cost();
    return v;
  }
  std::string Text(const Value& v) { return v.DebugString(); }

  FunctionRegistry registry_;
};

TEST_F(FunctionRegistryTest, ResolvesMethodsByReceiverKind) {
  const Value s = Value::String("x");
  const Value l = Value::List({});
  EXPECT_EQ(Text(Run(CallStyle::kReceiver, "f", &s, {})), "\"string.f\"");
  EXPECT_EQ(Text(Run(CallStyle::kReceiver, "f", &l, {})), "\"list.f\"");
  const Value i = Value::Int(1);
  EXPECT_EQ(Text(Run(CallStyle::kReceiver, "f", &i, {})), "error(\"no such overload: int.f()\")");
}

TEST_F(FunctionRegistryTest, KeepsReceiverAndGlobalFunctionsApart) {
  EXPECT_EQ(Text(Run(CallStyle::kGlobal, "f", nullptr, {Value::Int(1)})), "\"f(any)\"");
  // The receiver function "f" has no overload with one argument.
  const Value s = Value::String("x");
  EXPECT_EQ(Text(Run(CallStyle::kReceiver, "f", &s, {Value::Int(1)})),
            "error(\"no such overload: string.f(int)\")");
  EXPECT_TRUE(registry_.Find(CallStyle::kReceiver, "g", 1).overloads.empty());
}

TEST_F(FunctionRegistryTest, ResolvesByArity) {
  EXPECT_EQ(registry_.Find(CallStyle::kGlobal, "g", 1).overloads.size(), 3u);
  EXPECT_EQ(registry_.Find(CallStyle::kGlobal, "g", 2).overloads.size(), 1u);
  EXPECT_TRUE(registry_.Find(CallStyle::kGlobal, "g", 3).overloads.empty());
  EXPECT_EQ(Text(Run(CallStyle::kGlobal, "g", nullptr, {Value::Int(1), Value::Int(2)})),
            "\"g(int, int)\"");
  EXPECT_EQ(Text(Run(CallStyle::kGlobal, "g", nullptr, {Value::Int(1), Value::Int(2), Value()})),
            "error(\"no such overload: g(int, int, null_type)\")");
}

TEST_F(FunctionRegistryTest, ResolvesByArgumentKindsInRegistrationOrder) {
  EXPECT_EQ(Text(Run(CallStyle::kGlobal, "g", nullptr, {Value::Int(1)})), "\"g(int)\"");
  EXPECT_EQ(Text(Run(CallStyle::kGlobal, "g", nullptr, {Value::String("s")})), "\"g(string)\"");
  // Only the third overload accepts a list; the first two are tried first for ints and strings.
  EXPECT_EQ(Text(Run(CallStyle::kGlobal, "g", nullptr, {Value::List({})})), "\"g(any)\"");
  EXPECT_EQ(Text(Run(CallStyle::kGlobal, "g", nullptr, {Value::Int(1), Value::String("s")})),
            "error(\"no such overload: g(int, string)\")");
}

TEST_F(FunctionRegistryTest, UnknownOverloadIsCelGosNoSuchOverload) {
  EXPECT_EQ(Text(Run(CallStyle::kGlobal, "g", nullptr, {Value::Bool(true)})),
            "error(\"no such overload: g(bool)\")");
  EXPECT_EQ(Text(Run(CallStyle::kGlobal, "nope", nullptr, {Value::Int(1), Value::String("s")})),
            "error(\"no such overload: nope(int, string)\")");
  const Value q = Value::Double(1.5);
  EXPECT_EQ(Text(Run(CallStyle::kReceiver, "nope", &q, {Value::Uint(2)})),
            "error(\"no such overload: double.nope(uint)\")");
}

TEST_F(FunctionRegistryTest, ChargesEntryCostsWhetherOrNotAnOverloadMatches) {
  uint64_t cost = 0;
  // A global call costs 1 by default, matched or not.
  Run(CallStyle::kGlobal, "g", nullptr, {Value::Int(1)}, &cost);
  EXPECT_EQ(cost, 1u);
  Run(CallStyle::kGlobal, "nope", nullptr, {}, &cost);
  EXPECT_EQ(cost, 1u);
  // A receiver call costs what its receiver's kind costs (nothing by default).
  const Value s = Value::String("x");
  Run(CallStyle::kReceiver, "f", &s, {}, &cost);
  EXPECT_EQ(cost, 0u);
  registry_.SetReceiverCost(ValueKind::kString, &ChargeTwo);
  Run(CallStyle::kReceiver, "f", &s, {}, &cost);
  EXPECT_EQ(cost, 2u);
  Run(CallStyle::kReceiver, "unknown", &s, {}, &cost);
  EXPECT_EQ(cost, 2u);
  // A function's own entry cost wins: for its arity, else for every arity.
  registry_.SetEntryCost(CallStyle::kGlobal, "g", FunctionRegistry::kAnyArity, &ChargeTen);
  registry_.SetEntryCost(CallStyle::kGlobal, "g", 2, &ChargeThree);
  Run(CallStyle::kGlobal, "g", nullptr, {Value::Bool(true)}, &cost);
  EXPECT_EQ(cost, 10u);
  Run(CallStyle::kGlobal, "g", nullptr, {Value::Int(1), Value::Int(1)}, &cost);
  EXPECT_EQ(cost, 3u);
}

TEST_F(FunctionRegistryTest, OverloadCostsAddToTheEntryCostAndCancel) {
  registry_.AddGlobal("costly", {}, &Costly);
  uint64_t cost = 0;
  EXPECT_EQ(Text(Run(CallStyle::kGlobal, "costly", nullptr, {}, &cost)), "true");
  EXPECT_EQ(cost, 6u);
  const std::string cancelled = "error(\"" + std::string(kCostLimitExceeded) + "\")";
  EXPECT_EQ(Text(Run(CallStyle::kGlobal, "costly", nullptr, {}, &cost, /*limit=*/5)), cancelled);
  EXPECT_EQ(cost, 6u);
  // An entry cost past the limit stops before any overload runs.
  EXPECT_EQ(Text(Run(CallStyle::kGlobal, "costly", nullptr, {}, &cost, /*limit=*/0)), cancelled);
  EXPECT_EQ(cost, 1u);
}

TEST(StandardFunctionsTest, ResolvesOperatorsAndMethodsByKind) {
  const FunctionRegistry& functions = StandardFunctions();
  auto run = [&](CallStyle style, std::string_view name, const Value* target,
                 std::vector<Value> args) {
    EvalContext ctx(1000, nullptr);
    return functions
        .Dispatch(ctx, functions.Find(style, name, args.size()), Call{name, target, args})
        .DebugString();
  };
  EXPECT_EQ(run(CallStyle::kGlobal, "_+_", nullptr, {Value::Int(1), Value::Int(2)}), "3");
  EXPECT_EQ(run(CallStyle::kGlobal, "_+_", nullptr, {Value::Uint(1), Value::Uint(2)}), "3u");
  EXPECT_EQ(run(CallStyle::kGlobal, "_+_", nullptr, {Value::Int(1), Value::Uint(2)}),
            "error(\"no such overload: _+_(int, uint)\")");
  EXPECT_EQ(run(CallStyle::kGlobal, "_<_", nullptr, {Value::Int(1), Value::Double(1.5)}), "true");
  EXPECT_EQ(run(CallStyle::kGlobal, "optional.of", nullptr, {Value::Int(1)}), "optional.of(1)");
  const Value s = Value::String("abc");
  EXPECT_EQ(run(CallStyle::kReceiver, "contains", &s, {Value::String("b")}), "true");
  EXPECT_EQ(run(CallStyle::kReceiver, "contains", &s, {Value::Int(1)}),
            "error(\"no such overload: string.contains(int)\")");
  const Value l = Value::List({Value::Int(3), Value::Int(1)});
  EXPECT_EQ(run(CallStyle::kReceiver, "indexOf", &l, {Value::Int(1)}), "1");
  EXPECT_EQ(run(CallStyle::kReceiver, "indexOf", &s, {Value::String("c")}), "2");
}

}  // namespace
}  // namespace qm::cel
