// String functions: ext.Strings v2 (cel/strings_lib.h), matches() and Kubernetes'
// library.Regex, strings.quote and join; see cel/functions.h.
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "cel/function_registry.h"
#include "cel/functions.h"
#include "cel/interpreter.h"
#include "cel/strings_lib.h"
#include "common/mutex.h"
#include "re2/re2.h"

namespace qm::cel {

namespace {

constexpr KindMask kInt = KindBit(ValueKind::kInt);
constexpr KindMask kString = KindBit(ValueKind::kString);
constexpr KindMask kList = KindBit(ValueKind::kList);

Value FromString(absl::StatusOr<std::string> r) {
  if (!r.ok()) return FromStatus(r.status());
  return Value::String(std::move(*r));
}

Value FromInt(absl::StatusOr<int64_t> r) {
  if (!r.ok()) return FromStatus(r.status());
  return Value::Int(*r);
}

// Every method of a string charges the call and the traversal of the string.
bool ChargeStringReceiver(EvalContext& ctx, const Call& call) {
  return ctx.Charge(1) && ctx.Charge(TraversalCost(call.target->string_value().size()));
}

// `s.matches(p)` and `matches(s, p)`: Kubernetes' cost is ceil((1 + size) * 0.1) *
// ceil(pattern size * 0.25). A non-string operand is reported as the global function's.
Value Matches(EvalContext& ctx, const Value& s, const Value& pattern) {
  if (s.kind() != ValueKind::kString || pattern.kind() != ValueKind::kString) {
    return NoSuchOverload("matches", nullptr, {s, pattern});
  }
  const uint64_t str_cost = TraversalCost(1 + s.string_value().size());
  const uint64_t re_cost = (pattern.string_value().size() + 3) / 4;
  if (!ctx.Charge(str_cost * re_cost)) return EvalContext::Cancelled();
  if (ctx.regex_cache() == nullptr) {
    absl::StatusOr<bool> r = strings::Matches(s.string_value(), pattern.string_value());
    if (!r.ok()) return FromStatus(r.status());
    return Value::Bool(*r);
  }
  std::string error;
  std::shared_ptr<const RE2> re = ctx.regex_cache()->Get(pattern.string_value(), &error);
  if (re == nullptr) return Value::Error(std::move(error));
  const std::string& text = s.string_value();
  return Value::Bool(RE2::PartialMatch(re2::StringPiece(text.data(), text.size()), *re));
}

std::optional<strings::FormatArg> ToFormatArg(const Value& v, int depth) {
  using strings::FormatArg;
  if (depth > 100) return std::nullopt;
  switch (v.kind()) {
    case ValueKind::kNull:
      return FormatArg::Null();
    case ValueKind::kBool:
      return FormatArg::Bool(v.bool_value());
    case ValueKind::kInt:
      return FormatArg::Int(v.int_value());
    case ValueKind::kUint:
      return FormatArg::Uint(v.uint_value());
    case ValueKind::kDouble:
      return FormatArg::Double(v.double_value());
    case ValueKind::kString:
      return FormatArg::String(v.string_value());
    case ValueKind::kBytes:
      return FormatArg::Bytes(v.bytes_value());
    case ValueKind::kType:
      return FormatArg::Type(v.type_name());
    case ValueKind::kList: {
      std::vector<FormatArg> elems;
      for (const Value& e : v.list_value()) {
        std::optional<FormatArg> a = ToFormatArg(e, depth + 1);
        if (!a.has_value()) return std::nullopt;
        elems.push_back(std::move(*a));
      }
      return FormatArg::List(std::move(elems));
    }
    case ValueKind::kMap: {
      std::vector<FormatArg::MapEntry> entries;
      for (const auto& [k, e] : v.map_value().entries()) {
        std::optional<FormatArg> fk = ToFormatArg(k, depth + 1);
        std::optional<FormatArg> fv = ToFormatArg(e, depth + 1);
        if (!fk.has_value() || !fv.has_value()) return std::nullopt;
        entries.push_back(FormatArg::MapEntry{std::move(*fk), std::move(*fv)});
      }
      return FormatArg::Map(std::move(entries));
    }
    default:
      return FormatArg::Other(std::string(v.TypeName()));
  }
}

// The receiver and the arguments of a string method, by position.
const std::string& S(const Call& call) { return call.target->string_value(); }
const std::string& Str(const Call& call, size_t i) { return call.args[i].string_value(); }
int64_t Int(const Call& call, size_t i) { return call.args[i].int_value(); }

Value FindAll(const Call& call, int64_t limit) {
  absl::StatusOr<std::vector<std::string>> r = strings::FindAll(S(call), Str(call, 0), limit);
  if (!r.ok()) return FromStatus(r.status());
  return StringList(std::move(*r));
}

Value Join(EvalContext& ctx, const Call& call) {
  const ValueList& l = call.target->list_value();
  std::vector<std::string> parts;
  parts.reserve(l.size());
  uint64_t total = 0;
  for (const Value& e : l) {
    if (e.kind() != ValueKind::kString)
      return NoSuchOverload(call.function, call.target, call.args);
    parts.push_back(e.string_value());
    total += e.string_value().size();
  }
  if (call.args.size() == 1 && call.args[0].kind() != ValueKind::kString) {
    return NoSuchOverload(call.function, call.target, call.args);
  }
  if (!ctx.Charge(TraversalCost(total))) return EvalContext::Cancelled();
  return Value::String(call.args.empty() ? strings::Join(parts)
                                         : strings::Join(parts, call.args[0].string_value()));
}

}  // namespace

// RegexCache (cel/interpreter.h) serves matches() only, so it lives with it.
std::shared_ptr<const re2::RE2> RegexCache::Get(std::string_view pattern, std::string* error) {
  {
    qm::MutexLock lock(&mu_);
    auto it = cache_.find(std::string(pattern));
    if (it != cache_.end()) return it->second;
  }
  // strings::Matches validates the pattern with Go's rules and wording; compile our own copy
  // only once it is known to be valid.
  absl::StatusOr<bool> valid = strings::Matches("", pattern);
  if (!valid.ok()) {
    *error = std::string(valid.status().message());
    return nullptr;
  }
  RE2::Options options;
  options.set_log_errors(false);
  auto re = std::make_shared<const RE2>(re2::StringPiece(pattern.data(), pattern.size()), options);
  if (!re->ok()) {
    *error = "error parsing regexp: " + re->error();
    return nullptr;
  }
  qm::MutexLock lock(&mu_);
  if (cache_.size() >= capacity_) cache_.clear();
  cache_.emplace(std::string(pattern), re);
  return re;
}

void RegisterStringFunctions(FunctionRegistry& r) {
  r.SetReceiverCost(ValueKind::kString, &ChargeStringReceiver);
  r.AddMethod("contains", kString, {kString}, [](EvalContext&, const Call& call) {
    return Value::Bool(strings::Contains(S(call), Str(call, 0)));
  });
  r.AddMethod("startsWith", kString, {kString}, [](EvalContext&, const Call& call) {
    return Value::Bool(strings::StartsWith(S(call), Str(call, 0)));
  });
  r.AddMethod("endsWith", kString, {kString}, [](EvalContext&, const Call& call) {
    return Value::Bool(strings::EndsWith(S(call), Str(call, 0)));
  });
  r.AddMethod("matches", kString, {kAnyKind}, [](EvalContext& ctx, const Call& call) {
    return Matches(ctx, *call.target, call.args[0]);
  });
  r.AddGlobal("matches", {kAnyKind, kAnyKind}, [](EvalContext& ctx, const Call& call) {
    return Matches(ctx, call.args[0], call.args[1]);
  });
  r.AddMethod("size", kString, {},
              [](EvalContext&, const Call& call) { return Value::Int(strings::Size(S(call))); });
  r.AddMethod("charAt", kString, {kInt}, [](EvalContext&, const Call& call) {
    return FromString(strings::CharAt(S(call), Int(call, 0)));
  });
  r.AddMethod("indexOf", kString, {kString}, [](EvalContext&, const Call& call) {
    return FromInt(strings::IndexOf(S(call), Str(call, 0)));
  });
  r.AddMethod("indexOf", kString, {kString, kInt}, [](EvalContext&, const Call& call) {
    return FromInt(strings::IndexOf(S(call), Str(call, 0), Int(call, 1)));
  });
  r.AddMethod("lastIndexOf", kString, {kString}, [](EvalContext&, const Call& call) {
    return FromInt(strings::LastIndexOf(S(call), Str(call, 0)));
  });
  r.AddMethod("lastIndexOf", kString, {kString, kInt}, [](EvalContext&, const Call& call) {
    return FromInt(strings::LastIndexOf(S(call), Str(call, 0), Int(call, 1)));
  });
  r.AddMethod("lowerAscii", kString, {}, [](EvalContext&, const Call& call) {
    return Value::String(strings::LowerAscii(S(call)));
  });
  r.AddMethod("upperAscii", kString, {}, [](EvalContext&, const Call& call) {
    return Value::String(strings::UpperAscii(S(call)));
  });
  r.AddMethod("trim", kString, {},
              [](EvalContext&, const Call& call) { return Value::String(strings::Trim(S(call))); });
  r.AddMethod("replace", kString, {kString, kString}, [](EvalContext&, const Call& call) {
    return Value::String(strings::Replace(S(call), Str(call, 0), Str(call, 1)));
  });
  r.AddMethod("replace", kString, {kString, kString, kInt}, [](EvalContext&, const Call& call) {
    return Value::String(strings::Replace(S(call), Str(call, 0), Str(call, 1), Int(call, 2)));
  });
  r.AddMethod("split", kString, {kString}, [](EvalContext&, const Call& call) {
    return StringList(strings::Split(S(call), Str(call, 0)));
  });
  r.AddMethod("split", kString, {kString, kInt}, [](EvalContext&, const Call& call) {
    return StringList(strings::Split(S(call), Str(call, 0), Int(call, 1)));
  });
  r.AddMethod("substring", kString, {kInt}, [](EvalContext&, const Call& call) {
    return FromString(strings::Substring(S(call), Int(call, 0)));
  });
  r.AddMethod("substring", kString, {kInt, kInt}, [](EvalContext&, const Call& call) {
    return FromString(strings::Substring(S(call), Int(call, 0), Int(call, 1)));
  });
  r.AddMethod("format", kString, {kList}, [](EvalContext&, const Call& call) {
    std::vector<strings::FormatArg> args;
    for (const Value& a : call.args[0].list_value()) {
      std::optional<strings::FormatArg> fa = ToFormatArg(a, 0);
      if (!fa.has_value()) return Value::Error("format: argument nests too deeply");
      args.push_back(std::move(*fa));
    }
    return FromString(strings::Format(S(call), args));
  });
  r.AddMethod("find", kString, {kString}, [](EvalContext&, const Call& call) {
    return FromString(strings::Find(S(call), Str(call, 0)));
  });
  r.AddMethod("findAll", kString, {kString},
              [](EvalContext&, const Call& call) { return FindAll(call, -1); });
  r.AddMethod("findAll", kString, {kString, kInt},
              [](EvalContext&, const Call& call) { return FindAll(call, Int(call, 1)); });
  r.AddGlobal("strings.quote", {kString}, [](EvalContext& ctx, const Call& call) {
    if (!ctx.Charge(TraversalCost(Str(call, 0).size()))) return EvalContext::Cancelled();
    return Value::String(strings::Quote(Str(call, 0)));
  });
  // Either argument kind: Join reports a non-string separator after the elements.
  r.AddMethod("join", kList, {}, &Join);
  r.AddMethod("join", kList, {kAnyKind}, &Join);
}

}  // namespace qm::cel
