#pragma once

// The function registry of the CEL evaluator (cel/interpreter.h), after cel-cpp's
// FunctionRegistry: every function and operator is registered by name with its overloads. An
// overload is described by its call style (receiver `t.f(x)` or global `f(x)`), its arity and the
// kinds of value it accepts as receiver and as each argument. The libraries that fill the
// standard registry are in cel/functions.h.
//
// Resolution happens in two steps, so that evaluation compares no function names:
//   * Find(style, name, arity), once per call site (the evaluator's ConstantTable): the
//     candidate overloads of that name, style and arity, in registration order;
//   * Dispatch(ctx, candidates, call), on every evaluation: the first candidate whose kinds
//     match the receiver and argument values runs. When none matches, the result is cel-go's
//     error "no such overload: <function>(<arg types>)" ("<receiver type>.<function>(...)" for
//     receiver calls).
//
// Cost. Before choosing an overload, Dispatch charges the call's entry cost, whether or not an
// overload then matches (as cel-go charges a call that ends in "no such overload"): the entry
// cost set for the function and arity (SetEntryCost), otherwise 1 for a global call, and for a
// receiver call the cost set for the receiver's kind (SetReceiverCost; nothing when none is
// set). An overload charges whatever its own work costs on top through EvalContext::Charge.
//
// Thread-safety: a registry is filled by one thread and then only read; Find and Dispatch may
// run from many threads at once. Candidates point into the registry: they stay valid while it
// lives and nothing more is registered.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/types/span.h"
#include "cel/value.h"

namespace qm::cel {

class RegexCache;

// The cost and cancellation state of one evaluation, shared by the evaluator and the function
// implementations it calls. Not thread-safe: one evaluation, one thread.
class EvalContext {
 public:
  // `regex_cache` is optional (nullptr: patterns are compiled on every use).
  EvalContext(uint64_t cost_limit, RegexCache* regex_cache)
      : cost_limit_(cost_limit), regex_cache_(regex_cache) {}

  // Adds `c` to the cost; false once the limit is passed (the evaluation is then cancelled and
  // the caller returns Cancelled()).
  bool Charge(uint64_t c) {
    cost_ += c;
    if (cost_ > cost_limit_) cancelled_ = true;
    return !cancelled_;
  }
  // Adds `c` only when the total stays within the limit; false, with nothing added, otherwise.
  bool ChargeWithinLimit(uint64_t c) {
    if (c > cost_limit_ || cost_ > cost_limit_ - c) return false;
    cost_ += c;
    return true;
  }
  // Takes back `c` of what was charged before (when a charge is about to be made again).
  void Refund(uint64_t c) { cost_ -= c; }

  uint64_t cost() const { return cost_; }
  bool cancelled() const { return cancelled_; }
  RegexCache* regex_cache() const { return regex_cache_; }

  // The error value of a cancelled evaluation ("operation cancelled: actual cost limit
  // exceeded").
  static Value Cancelled();

 private:
  const uint64_t cost_limit_;
  RegexCache* const regex_cache_;
  uint64_t cost_ = 0;
  bool cancelled_ = false;
};

// A set of ValueKinds: one bit per kind.
using KindMask = uint32_t;
constexpr KindMask KindBit(ValueKind k) { return KindMask{1} << static_cast<unsigned>(k); }
template <typename... K>
constexpr KindMask Kinds(K... kinds) {
  return (KindBit(kinds) | ...);
}
inline constexpr KindMask kAnyKind = ~KindMask{0};

enum class CallStyle : uint8_t {
  kGlobal,    // f(x), and namespaced functions such as optional.of(x) by their qualified name
  kReceiver,  // t.f(x)
};

// One call, as an overload and an entry cost see it. Neither the target nor any argument is an
// error value (the evaluator returns those before dispatching).
struct Call {
  // The function's name as called: "contains", "_+_", "optional.of".
  std::string_view function;
  // The receiver of a receiver call; nullptr for a global call.
  const Value* target = nullptr;
  absl::Span<const Value> args;
};

// An overload's implementation: the call's value, or an error value. Charges what its work
// costs through `ctx`, returning EvalContext::Cancelled() once a charge fails.
using FunctionImpl = Value (*)(EvalContext& ctx, const Call& call);
// An entry cost (see the top of this file): charges `ctx`, false once a charge fails.
using EntryCost = bool (*)(EvalContext& ctx, const Call& call);

struct Overload {
  // The receiver kinds a receiver overload accepts (unused for global overloads).
  KindMask receiver = 0;
  // The kinds each argument accepts; the overload's arity is args.size().
  std::vector<KindMask> args;
  FunctionImpl impl = nullptr;

  // True when the receiver and argument kinds of `call` are accepted.
  // REQUIRES: call.args.size() == args.size().
  bool Accepts(const Call& call) const {
    if (call.target != nullptr && (receiver & KindBit(call.target->kind())) == 0) return false;
    for (size_t i = 0; i < args.size(); ++i) {
      if ((args[i] & KindBit(call.args[i].kind())) == 0) return false;
    }
    return true;
  }
};

// The overloads a call site can reach (one name, style and arity) and its entry cost.
struct Candidates {
  // nullptr: the default entry cost of the call's style.
  EntryCost entry_cost = nullptr;
  absl::Span<const Overload* const> overloads;
};

class FunctionRegistry {
 public:
  // An arity for SetEntryCost that covers every arity without an entry cost of its own.
  static constexpr size_t kAnyArity = std::numeric_limits<size_t>::max();

  FunctionRegistry() = default;
  FunctionRegistry(const FunctionRegistry&) = delete;
  FunctionRegistry& operator=(const FunctionRegistry&) = delete;

  // Adds an overload of the global function `name` (operators by their cel/operators.h names,
  // namespaced functions by their qualified names). Overloads of one name and arity are tried
  // in the order they were added.
  void AddGlobal(std::string_view name, std::vector<KindMask> args, FunctionImpl impl);
  // Adds an overload of the receiver function `name` for receivers of the kinds in `receiver`.
  void AddMethod(std::string_view name, KindMask receiver, std::vector<KindMask> args,
                 FunctionImpl impl);
  // Sets the entry cost of calls of `name` in `style` with `arity` arguments (kAnyArity: every
  // arity without one of its own).
  void SetEntryCost(CallStyle style, std::string_view name, size_t arity, EntryCost cost);
  // Sets the entry cost of receiver calls on a receiver of kind `receiver` whose function has
  // no entry cost of its own, including calls of functions that are not registered at all.
  void SetReceiverCost(ValueKind receiver, EntryCost cost);

  // The candidates of a call site; empty (no overloads) for an unknown name or arity.
  Candidates Find(CallStyle style, std::string_view name, size_t arity) const;

  // Runs `call` (its style: receiver when call.target is set) with the first of `candidates`
  // that accepts it; see the top of this file. `candidates` must come from this registry's Find
  // for the call's style, function name and arity.
  Value Dispatch(EvalContext& ctx, const Candidates& candidates, const Call& call) const;

 private:
  struct Function {
    std::vector<std::unique_ptr<const Overload>> overloads;
    // Indexed by arity.
    std::vector<std::vector<const Overload*>> by_arity;
    std::vector<EntryCost> entry_cost_by_arity;
    EntryCost entry_cost = nullptr;  // kAnyArity
  };
  Function& FunctionOf(CallStyle style, std::string_view name);
  void Add(CallStyle style, std::string_view name, Overload overload);

  // Keyed by style ('g' or 'r') followed by the name.
  std::unordered_map<std::string, Function> functions_;
  // Indexed by ValueKind.
  std::vector<EntryCost> receiver_costs_;
};

// cel-go's error for a call no overload accepts: "no such overload: <function>(<arg types>)",
// with "<target type>." before the function when `target` is set.
Value NoSuchOverload(std::string_view function, const Value* target, absl::Span<const Value> args);

// Cost helpers, after cel-go's runtime cost tracker.
// ceil(n * 0.1): cel-go's common.StringTraversalCostFactor.
inline uint64_t TraversalCost(uint64_t n) { return (n + 9) / 10; }
// cel-go's actualSize(): the length of strings, bytes, lists and maps; 1 for everything else.
uint64_t ActualSize(const Value& v);

}  // namespace qm::cel
