#include "cel/checker.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>

#include "cel/checker_internal.h"
#include "cel/format_lib.h"
#include "cel/operators.h"
#include "cel/time_lib.h"

namespace qm::cel {

using namespace checker_internal;  // NOLINT(google-build-using-namespace)

namespace {

// ---------------------------------------------------------------------------------------------
// Cost arithmetic (saturating)

constexpr uint64_t kMaxCost = uint64_t{1} << 62;

uint64_t SatAdd(uint64_t a, uint64_t b) { return std::min(kMaxCost, a + std::min(b, kMaxCost)); }
uint64_t SatMul(uint64_t a, uint64_t b) {
  if (a == 0 || b == 0) return 0;
  if (a > kMaxCost / b) return kMaxCost;
  return std::min(kMaxCost, a * b);
}
uint64_t Tenth(uint64_t n) { return SatAdd(n, 9) / 10; }  // ceil(n * 0.1)

// Worst-case size of a value: its length (string code points/bytes, list elements, map entries)
// and the largest size of anything nested in it.
struct Size {
  uint64_t size = 0;
  uint64_t elem = 0;
};

constexpr uint64_t kAttrStringSize = 64;  // longest attribute string value
constexpr uint64_t kAttrListSize = 48;    // longest list attribute
constexpr uint64_t kMapEntries = 32;      // attributes/capacities per device
constexpr uint64_t kDriverSize = 63;      // longest driver name
constexpr uint64_t kAttrValueSize = std::max(kAttrStringSize, kAttrListSize);

// The result of checking one node.
struct Info {
  Type type;
  uint64_t cost = 0;
  Size size;
};

const char* const kTypeIdents[] = {"bool", "int", "uint",      "double", "string",       "bytes",
                                   "list", "map", "null_type", "type",   "optional_type"};
constexpr std::string_view kNamespaces[] = {"optional", "sets", "strings", "cel", "ip", "format"};

class Checker {
 public:
  explicit Checker(const Ast& ast) { result_.types.resize(static_cast<size_t>(ast.max_id()) + 1); }

  CheckResult Run(const Ast& ast) {
    Info root = Visit(ast.root());
    result_.result_type = result_.issues.empty() ? root.type : Type::Of(TypeKind::kError);
    result_.estimated_cost = root.cost;
    return std::move(result_);
  }

 private:
  struct Local {
    std::string name;
    Info info;
  };

  void Report(size_t offset, std::string message) {
    result_.issues.push_back(Issue{std::move(message), offset});
  }

  const Local* FindLocal(std::string_view name) const {
    for (auto it = locals_.rbegin(); it != locals_.rend(); ++it) {
      if (it->name == name) return &*it;
    }
    return nullptr;
  }

  Info Visit(const Expr& e) {
    Info info = VisitInner(e);
    if (static_cast<size_t>(e.id()) < result_.types.size()) result_.types[e.id()] = info.type;
    return info;
  }

  Info VisitInner(const Expr& e) {
    switch (e.kind()) {
      case ExprKind::kConstant:
        return VisitConstant(e.constant());
      case ExprKind::kIdent:
        return VisitIdent(e);
      case ExprKind::kSelect:
        return VisitSelect(e);
      case ExprKind::kCall:
        return VisitCall(e);
      case ExprKind::kList:
        return VisitList(e);
      case ExprKind::kMap:
        return VisitMap(e);
      case ExprKind::kComprehension:
        return VisitComprehension(e);
    }
    return Info{Type::Of(TypeKind::kError), 0, {}};
  }

  static Info VisitConstant(const Constant& c) {
    switch (c.kind()) {
      case ConstantKind::kNull:
        return {Type::Of(TypeKind::kNull), 0, {}};
      case ConstantKind::kBool:
        return {Type::Of(TypeKind::kBool), 0, {}};
      case ConstantKind::kInt:
        return {Type::Of(TypeKind::kInt), 0, {}};
      case ConstantKind::kUint:
        return {Type::Of(TypeKind::kUint), 0, {}};
      case ConstantKind::kDouble:
        return {Type::Of(TypeKind::kDouble), 0, {}};
      case ConstantKind::kString:
        return {Type::Of(TypeKind::kString), 0, {c.string_value().size(), 0}};
      case ConstantKind::kBytes:
        return {Type::Of(TypeKind::kBytes), 0, {c.bytes_value().size(), 0}};
    }
    return {Type::Of(TypeKind::kError), 0, {}};
  }

  Info VisitIdent(const Expr& e) {
    std::string_view name = e.ident().name;
    const bool rooted = !name.empty() && name[0] == '.';
    if (rooted) {
      name.remove_prefix(1);
    } else if (const Local* l = FindLocal(name)) {
      Info info = l->info;
      info.cost = 1;
      return info;
    }
    if (name == "device") {
      return {Type::Of(TypeKind::kDevice), 1, {4, kAttrValueSize}};
    }
    for (const char* t : kTypeIdents) {
      if (name == t) return {Type{TypeKind::kType, {}, {}}, 1, {}};
    }
    Report(e.offset(), "undeclared reference to '" + std::string(name) + "' (in container '')");
    return {Type::Of(TypeKind::kError), 1, {}};
  }

  // The type of field `field` of a value of type `t`, or an issue.
  std::optional<Info> FieldOf(const Info& operand, const std::string& field, size_t offset) {
    const Type& t = operand.type;
    switch (t.kind) {
      case TypeKind::kDyn:
      case TypeKind::kError:
        return Info{t, 0, {kAttrValueSize, kAttrValueSize}};
      case TypeKind::kMap:
        return Info{t.params[1], 0, {operand.size.elem, operand.size.elem}};
      case TypeKind::kDevice: {
        const Type q = Type::Of(TypeKind::kQuantity);
        if (field == "driver") return Info{Type::Of(TypeKind::kString), 0, {kDriverSize, 0}};
        if (field == "allowMultipleAllocations") return Info{Type::Of(TypeKind::kBool), 0, {}};
        if (field == "attributes") {
          return Info{Type::Map(Type::Of(TypeKind::kString),
                                Type::Map(Type::Of(TypeKind::kString), Type::Of(TypeKind::kDyn))),
                      0,
                      {kMapEntries, kAttrValueSize}};
        }
        if (field == "capacity") {
          return Info{
              Type::Map(Type::Of(TypeKind::kString), Type::Map(Type::Of(TypeKind::kString), q)),
              0,
              {kMapEntries, kDriverSize}};
        }
        Report(offset, "undefined field '" + field + "'");
        return std::nullopt;
      }
      default:
        Report(offset, "type '" + FormatType(t) + "' does not support field selection");
        return std::nullopt;
    }
  }

  Info VisitSelect(const Expr& e) {
    const SelectExpr& s = e.select();
    Info operand = Visit(*s.operand);
    Info base = operand;
    bool through_optional = false;
    if (s.optional && operand.type.kind == TypeKind::kOptional) {
      base.type = operand.type.params[0];
      through_optional = true;
    }
    std::optional<Info> field = FieldOf(base, s.field, e.offset());
    const uint64_t cost = SatAdd(operand.cost, 1);
    if (!field.has_value()) return {Type::Of(TypeKind::kError), cost, {}};
    if (s.test_only) return {Type::Of(TypeKind::kBool), cost, {}};
    Info out = *field;
    out.cost = cost;
    if (s.optional || through_optional) out.type = Type::Optional(out.type);
    return out;
  }

  Info VisitList(const Expr& e) {
    const ListExpr& l = e.list();
    Info out{Type::List(Type::Of(TypeKind::kDyn)), 10, {l.elements.size(), 0}};
    std::optional<Type> elem;
    size_t next_opt = 0;
    for (size_t i = 0; i < l.elements.size(); ++i) {
      Info el = Visit(*l.elements[i]);
      out.cost = SatAdd(out.cost, el.cost);
      out.size.elem = std::max({out.size.elem, el.size.size, el.size.elem});
      Type t = el.type;
      if (next_opt < l.optional_indices.size() &&
          static_cast<size_t>(l.optional_indices[next_opt]) == i) {
        ++next_opt;
        if (t.kind == TypeKind::kOptional) t = t.params[0];
      }
      elem = Join(elem, t, l.elements[i]->offset());
    }
    if (elem.has_value()) out.type = Type::List(*elem);
    return out;
  }

  Info VisitMap(const Expr& e) {
    const MapExpr& m = e.map();
    Info out{
        Type::Map(Type::Of(TypeKind::kDyn), Type::Of(TypeKind::kDyn)), 30, {m.entries.size(), 0}};
    std::optional<Type> key;
    std::optional<Type> value;
    for (const MapEntry& entry : m.entries) {
      Info k = Visit(*entry.key);
      Info v = Visit(*entry.value);
      out.cost = SatAdd(out.cost, SatAdd(k.cost, v.cost));
      out.size.elem = std::max({out.size.elem, k.size.size, v.size.size, v.size.elem});
      Type vt = v.type;
      if (entry.optional && vt.kind == TypeKind::kOptional) vt = vt.params[0];
      key = Join(key, k.type, entry.key->offset());
      value = Join(value, vt, entry.value->offset());
    }
    if (key.has_value()) out.type = Type::Map(*key, *value);
    return out;
  }

  // Joins the element types of an aggregate literal (HomogeneousAggregateLiterals).
  Type Join(const std::optional<Type>& prev, const Type& next, size_t offset) {
    if (!prev.has_value()) return next;
    Bindings b;
    if (Assignable(*prev, next, &b)) return IsDynLike(*prev) ? next : *prev;
    Report(offset, "type '" + FormatType(next) + "' does not match previous type '" +
                       FormatType(*prev) +
                       "' in aggregate. Use 'dyn(x)' to make the aggregate dynamic.");
    return Type::Of(TypeKind::kDyn);
  }

  Info VisitComprehension(const Expr& e) {
    const ComprehensionExpr& c = e.comprehension();
    Info range = Visit(*c.iter_range);
    Info init = Visit(*c.accu_init);
    Type var1 = Type::Of(TypeKind::kDyn);
    Type var2 = Type::Of(TypeKind::kDyn);
    switch (range.type.kind) {
      case TypeKind::kList:
        if (c.iter_var2.empty()) {
          var1 = range.type.params[0];
        } else {
          var1 = Type::Of(TypeKind::kInt);
          var2 = range.type.params[0];
        }
        break;
      case TypeKind::kMap:
        var1 = range.type.params[0];
        var2 = range.type.params[1];
        break;
      case TypeKind::kDyn:
      case TypeKind::kError:
        break;
      default:
        Report(c.iter_range->offset(), "expression of type '" + FormatType(range.type) +
                                           "' cannot be range of a comprehension (must be list, "
                                           "map, or dynamic)");
        break;
    }
    const uint64_t n = range.size.size;
    const Size elem_size{range.size.elem, range.size.elem};
    const bool is_bind = c.iter_var == kUnusedIterVar;
    Info accu = init;
    if (!is_bind) {
      accu.size = {std::max(init.size.size, n),
                   std::max({init.size.elem, range.size.elem, kAttrValueSize})};
    }
    const size_t mark = locals_.size();
    locals_.push_back({c.accu_var, accu});
    locals_.push_back({c.iter_var, Info{var1, 0, elem_size}});
    if (!c.iter_var2.empty()) locals_.push_back({c.iter_var2, Info{var2, 0, elem_size}});
    Info cond = Visit(*c.loop_condition);
    Info step = Visit(*c.loop_step);
    locals_.resize(mark);
    // An empty literal accumulator ([] or {}) takes the more precise type of the step.
    if (step.type.kind == init.type.kind && !IsDynLike(step.type)) accu.type = step.type;
    locals_.push_back({c.accu_var, accu});
    Info result = Visit(*c.result);
    locals_.resize(mark);
    Info out = result;
    uint64_t cost = SatAdd(range.cost, init.cost);
    cost = SatAdd(cost, SatMul(n, SatAdd(cond.cost, step.cost)));
    out.cost = SatAdd(cost, result.cost);
    return out;
  }

  static bool IsAccumulator(const Expr& e) {
    return e.kind() == ExprKind::kIdent && e.ident().name == kAccumulatorVar;
  }

  Info VisitCall(const Expr& e) {
    const CallExpr& c = e.call();
    std::string fn = c.function;
    const Expr* target = c.target.get();
    if (target != nullptr && target->kind() == ExprKind::kIdent) {
      const std::string& ns = target->ident().name;
      for (std::string_view n : kNamespaces) {
        if (ns == n && FindLocal(ns) == nullptr) {
          fn = ns + "." + fn;
          target = nullptr;
          break;
        }
      }
    }
    std::vector<Info> args;
    if (target != nullptr) args.push_back(Visit(*target));
    for (const auto& a : c.args) args.push_back(Visit(*a));
    uint64_t cost = 1;
    for (const Info& a : args) cost = SatAdd(cost, a.cost);
    if (fn == op::kLogicalAnd || fn == op::kLogicalOr || fn == op::kConditional) --cost;

    Info out{Type::Of(TypeKind::kError), cost, {}};
    const bool member = target != nullptr;
    std::vector<Type> arg_types;
    for (const Info& a : args) arg_types.push_back(a.type);

    if ((fn == op::kEquals || fn == op::kNotEquals) && !member && args.size() == 2) {
      Bindings b;
      if (Assignable(arg_types[0], arg_types[1], &b)) {
        out.type = Type::Of(TypeKind::kBool);
      } else {
        ReportNoOverload(e, fn, arg_types, member);
      }
      out.cost = SatAdd(out.cost, CompareCost(args[0], args[1]));
      return out;
    }

    const OverloadTable& table = Overloads();
    auto it = table.find(fn);
    if (it == table.end()) {
      Report(e.offset(), "undeclared reference to '" + fn + "' (in container '')");
      return out;
    }
    std::optional<Type> result;
    bool ambiguous = false;
    for (const Overload& o : it->second) {
      if (o.member != member || o.args.size() != arg_types.size()) continue;
      Bindings b;
      bool ok = true;
      for (size_t i = 0; i < o.args.size() && ok; ++i) ok = Assignable(o.args[i], arg_types[i], &b);
      if (!ok) continue;
      Type r = Substitute(o.result, b);
      if (!result.has_value()) {
        result = r;
      } else if (!(*result == r)) {
        ambiguous = true;
      }
    }
    if (!result.has_value()) {
      bool any_error = false;
      for (const Type& t : arg_types) any_error = any_error || t.kind == TypeKind::kError;
      if (!any_error) ReportNoOverload(e, fn, arg_types, member);
      return out;
    }
    out.type = ambiguous ? Type::Of(TypeKind::kDyn) : *result;
    ValidateLiteralArgument(fn, c, member);
    EstimateCall(fn, c, args, &out);
    return out;
  }

  // cel.ValidateTimestampLiterals / ValidateDurationLiterals (Kubernetes' base environment since
  // 1.29): a literal argument that would fail at runtime is a compile error.
  void ValidateLiteralArgument(const std::string& fn, const CallExpr& c, bool member) {
    if (member || c.args.size() != 1 || (fn != "timestamp" && fn != "duration")) return;
    const Expr& arg = *c.args[0];
    if (arg.kind() != ExprKind::kConstant) return;
    const Constant& k = arg.constant();
    bool ok = true;
    if (k.kind() == ConstantKind::kString) {
      ok = fn == "timestamp" ? ParseTimestamp(k.string_value()).ok()
                             : ParseDuration(k.string_value()).ok();
    } else if (k.kind() == ConstantKind::kInt && fn == "timestamp") {
      ok = TimestampFromUnixSeconds(k.int_value()).ok();
    }
    if (!ok) Report(arg.offset(), "invalid " + fn + " argument");
  }

  static uint64_t CompareCost(const Info& a, const Info& b) {
    const uint64_t m = std::min(a.size.size, b.size.size);
    if (a.type.kind == TypeKind::kList || a.type.kind == TypeKind::kMap) return m;
    return Tenth(m);
  }

  // Adds the size-dependent part of a call's cost and sets the result's size.
  void EstimateCall(const std::string& fn, const CallExpr& c, const std::vector<Info>& args,
                    Info* out) {
    auto size = [&](size_t i) { return i < args.size() ? args[i].size.size : 0; };
    auto elem = [&](size_t i) { return i < args.size() ? args[i].size.elem : 0; };
    uint64_t extra = 0;
    Size result_size{kAttrValueSize, kAttrValueSize};
    const TypeKind rk = out->type.kind;
    if (rk != TypeKind::kString && rk != TypeKind::kBytes && rk != TypeKind::kList &&
        rk != TypeKind::kMap && !IsDynLike(out->type) && rk != TypeKind::kOptional) {
      result_size = {};
    }
    if (fn == op::kLess || fn == op::kLessEquals || fn == op::kGreater ||
        fn == op::kGreaterEquals) {
      extra = CompareCost(args[0], args[1]);
    } else if (fn == op::kAdd) {
      if (!c.args.empty() && IsAccumulator(*c.args[0])) {
        extra = 0;  // the evaluator appends in place
      } else if (rk == TypeKind::kList) {
        extra = Tenth(SatAdd(size(0), size(1)));
      } else {
        extra = Tenth(SatAdd(size(0), size(1)));
      }
      result_size = {SatAdd(size(0), size(1)), std::max(elem(0), elem(1))};
    } else if (fn == op::kIndex || fn == op::kOptIndex) {
      result_size = {elem(0), elem(0)};
    } else if (fn == op::kIn) {
      if (args[1].type.kind != TypeKind::kMap) extra = size(1);
    } else if (fn == "contains") {
      extra = Tenth(SatMul(size(0), std::max<uint64_t>(size(1), 1)));
    } else if (fn == "startsWith" || fn == "endsWith") {
      extra = Tenth(size(1));
    } else if (fn == "matches") {
      extra = SatMul(Tenth(SatAdd(1, size(0))), SatAdd(size(1), 3) / 4);
    } else if (fn == "lowerAscii" || fn == "upperAscii" || fn == "trim" || fn == "substring" ||
               fn == "charAt" || fn == "indexOf" || fn == "lastIndexOf" || fn == "find" ||
               fn == "strings.quote" || fn == "string" || fn == "bytes") {
      if (args[0].type.kind == TypeKind::kList) {
        extra = size(0);
      } else {
        extra = Tenth(size(0));
        result_size = {SatMul(size(0), 2), 0};
      }
    } else if (fn == "ip" || fn == "isIP" || fn == "ip.isCanonical" || fn == "cidr" ||
               fn == "isCIDR" || fn == "url" || fn == "isURL" ||
               ((fn == "containsIP" || fn == "containsCIDR") &&
                args[1].type.kind == TypeKind::kString)) {
      extra = Tenth(size(args.size() - 1));
    } else if (fn == "validate") {
      extra = SatMul(Tenth(SatAdd(1, size(1))), (MaxFormatRegexSize() + 3) / 4);
      result_size = {size(1), kAttrValueSize};
    } else if (fn == "getQuery") {
      extra = Tenth(size(0));
      result_size = {kAttrValueSize, kAttrValueSize};
    } else if (fn == "replace") {
      extra = Tenth(size(0));
      result_size = {SatMul(size(0), std::max<uint64_t>(size(2), 1)), 0};
    } else if (fn == "split" || fn == "findAll") {
      extra = Tenth(size(0));
      result_size = {size(0), size(0)};
    } else if (fn == "format") {
      extra = Tenth(SatAdd(size(0), SatMul(size(1), elem(1))));
      result_size = {SatAdd(size(0), SatMul(size(1), elem(1))), 0};
    } else if (fn == "join") {
      extra = Tenth(SatMul(size(0), SatAdd(elem(0), size(1))));
      result_size = {SatMul(size(0), SatAdd(elem(0), size(1))), 0};
    } else if (fn == "includes" || fn == "isSorted" || fn == "min" || fn == "max" || fn == "sum") {
      extra = args[0].type.kind == TypeKind::kList ? size(0) : 1;
      result_size = {elem(0), elem(0)};
    } else if (fn == "sets.contains" || fn == "sets.equivalent" || fn == "sets.intersects") {
      extra = SatMul(size(0), size(1));
    } else if (fn == op::kMapInsert) {
      extra = size(0);
      result_size = {SatAdd(size(0), 1), std::max({elem(0), size(2), elem(2)})};
    } else if (fn == op::kConditional) {
      result_size = {std::max(size(1), size(2)), std::max(elem(1), elem(2))};
    } else if (fn == "orValue" || fn == "value" || fn == "optional.of" ||
               fn == "optional.ofNonZeroValue" || fn == "dyn" || fn == "or") {
      result_size = {std::max(size(0), size(1)), std::max(elem(0), elem(1))};
    }
    out->cost = SatAdd(out->cost, extra);
    out->size = result_size;
  }

  void ReportNoOverload(const Expr& e, const std::string& fn, const std::vector<Type>& args,
                        bool member) {
    std::string sig;
    size_t first = 0;
    if (member && !args.empty()) {
      sig = FormatType(args[0]) + ".";
      first = 1;
    }
    sig += "(";
    for (size_t i = first; i < args.size(); ++i) {
      if (i > first) sig += ", ";
      sig += FormatType(args[i]);
    }
    sig += ")";
    Report(e.offset(), "found no matching overload for '" + fn + "' applied to '" + sig + "'");
  }

  CheckResult result_;
  std::vector<Local> locals_;
};

}  // namespace

CheckResult Check(const Ast& ast) { return Checker(ast).Run(ast); }

}  // namespace qm::cel
