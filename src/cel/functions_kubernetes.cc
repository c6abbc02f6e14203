// Kubernetes' CEL libraries: Quantity, Semver, IP, CIDR, URL (cel/net_lib.h) and Format
// (cel/format_lib.h); see cel/functions.h.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/numeric/int128.h"
#include "absl/status/statusor.h"
#include "cel/format_lib.h"
#include "cel/function_registry.h"
#include "cel/functions.h"
#include "cel/net_lib.h"
#include "common/quantity.h"
#include "common/semver.h"

namespace qm::cel {

namespace {

constexpr KindMask kBool = KindBit(ValueKind::kBool);
constexpr KindMask kInt = KindBit(ValueKind::kInt);
constexpr KindMask kString = KindBit(ValueKind::kString);
constexpr KindMask kQuantity = KindBit(ValueKind::kQuantity);
constexpr KindMask kSemver = KindBit(ValueKind::kSemver);
constexpr KindMask kIp = KindBit(ValueKind::kIp);
constexpr KindMask kCidr = KindBit(ValueKind::kCidr);
constexpr KindMask kUrl = KindBit(ValueKind::kUrl);
constexpr KindMask kFormat = KindBit(ValueKind::kFormat);
constexpr std::string_view kFormatPrefix = "format.";

// Every method of these types charges the call.
bool ChargeOne(EvalContext& ctx, const Call&) { return ctx.Charge(1); }

// The string argument `i`, its traversal charged (parsing functions).
const std::string* ChargedText(EvalContext& ctx, const Call& call, size_t i) {
  const std::string& s = call.args[i].string_value();
  return ctx.Charge(TraversalCost(s.size())) ? &s : nullptr;
}

// ---------------------------------------------------------------------------------------------
// Quantity

const Quantity& Q(const Call& call) { return call.target->quantity_value(); }

std::optional<int64_t> QuantityAsInt(const Quantity& q) {
  const absl::int128 units = q.nanos() / Quantity::kNanosPerUnit;
  if (q.HasFraction() || units > absl::int128(std::numeric_limits<int64_t>::max()) ||
      units < absl::int128(std::numeric_limits<int64_t>::min())) {
    return std::nullopt;
  }
  return static_cast<int64_t>(units);
}

template <bool kSubtract>
Value QuantityArith(EvalContext&, const Call& call) {
  const Value& arg = call.args[0];
  const Quantity o = arg.kind() == ValueKind::kQuantity ? arg.quantity_value()
                                                        : Quantity::FromInt(arg.int_value());
  const Quantity r = kSubtract ? Q(call) - o : Q(call) + o;
  const absl::int128 mag = r.nanos() < 0 ? -r.nanos() : r.nanos();
  if (mag > Quantity::MaxMagnitudeNanos()) return Value::Error("quantity overflow");
  return Value::FromQuantity(r);
}

void RegisterQuantity(FunctionRegistry& r) {
  r.AddGlobal("quantity", {kString}, [](EvalContext&, const Call& call) {
    absl::StatusOr<Quantity> q = ParseQuantity(call.args[0].string_value());
    if (!q.ok()) return FromStatus(q.status());
    return Value::FromQuantity(std::move(*q));
  });
  r.AddGlobal("isQuantity", {kString}, [](EvalContext&, const Call& call) {
    return Value::Bool(ParseQuantity(call.args[0].string_value()).ok());
  });
  r.SetReceiverCost(ValueKind::kQuantity, &ChargeOne);
  r.AddMethod("sign", kQuantity, {},
              [](EvalContext&, const Call& call) { return Value::Int(Q(call).Sign()); });
  r.AddMethod("isInteger", kQuantity, {}, [](EvalContext&, const Call& call) {
    const Quantity& q = Q(call);
    const absl::int128 units = q.nanos() / Quantity::kNanosPerUnit;
    return Value::Bool(!q.HasFraction() &&
                       units <= absl::int128(std::numeric_limits<int64_t>::max()) &&
                       units >= absl::int128(std::numeric_limits<int64_t>::min()));
  });
  r.AddMethod("asInteger", kQuantity, {}, [](EvalContext&, const Call& call) {
    const std::optional<int64_t> i = QuantityAsInt(Q(call));
    if (!i.has_value()) return Value::Error("cannot convert value to integer");
    return Value::Int(*i);
  });
  r.AddMethod("asApproximateFloat", kQuantity, {}, [](EvalContext&, const Call& call) {
    return Value::Double(static_cast<double>(Q(call).nanos()) /
                         static_cast<double>(Quantity::kNanosPerUnit));
  });
  r.AddMethod("isGreaterThan", kQuantity, {kQuantity}, [](EvalContext&, const Call& call) {
    return Value::Bool(Q(call) > call.args[0].quantity_value());
  });
  r.AddMethod("isLessThan", kQuantity, {kQuantity}, [](EvalContext&, const Call& call) {
    return Value::Bool(Q(call) < call.args[0].quantity_value());
  });
  r.AddMethod("compareTo", kQuantity, {kQuantity}, [](EvalContext&, const Call& call) {
    const Quantity& q = Q(call);
    const Quantity& o = call.args[0].quantity_value();
    return Value::Int(q < o ? -1 : (q > o ? 1 : 0));
  });
  r.AddMethod("add", kQuantity, {kQuantity | kInt}, &QuantityArith<false>);
  r.AddMethod("sub", kQuantity, {kQuantity | kInt}, &QuantityArith<true>);
}

// ---------------------------------------------------------------------------------------------
// Semver

template <bool kIsSemver>
Value ParseSemver(EvalContext&, const Call& call) {
  const bool normalize = call.args.size() == 2 && call.args[1].bool_value();
  std::optional<Semver> v = Semver::Parse(call.args[0].string_value(), normalize);
  if (kIsSemver) return Value::Bool(v.has_value());
  if (!v.has_value()) return Value::Error("invalid semver: " + call.args[0].string_value());
  return Value::FromSemver(std::move(*v));
}

const Semver& V(const Call& call) { return call.target->semver_value(); }

void RegisterSemver(FunctionRegistry& r) {
  r.AddGlobal("semver", {kString}, &ParseSemver<false>);
  r.AddGlobal("semver", {kString, kBool}, &ParseSemver<false>);
  r.AddGlobal("isSemver", {kString}, &ParseSemver<true>);
  r.AddGlobal("isSemver", {kString, kBool}, &ParseSemver<true>);
  r.SetReceiverCost(ValueKind::kSemver, &ChargeOne);
  r.AddMethod("major", kSemver, {}, [](EvalContext&, const Call& call) {
    return Value::Int(static_cast<int64_t>(V(call).major()));
  });
  r.AddMethod("minor", kSemver, {}, [](EvalContext&, const Call& call) {
    return Value::Int(static_cast<int64_t>(V(call).minor()));
  });
  r.AddMethod("patch", kSemver, {}, [](EvalContext&, const Call& call) {
    return Value::Int(static_cast<int64_t>(V(call).patch()));
  });
  r.AddMethod("isGreaterThan", kSemver, {kSemver}, [](EvalContext&, const Call& call) {
    return Value::Bool(V(call).Compare(call.args[0].semver_value()) > 0);
  });
  r.AddMethod("isLessThan", kSemver, {kSemver}, [](EvalContext&, const Call& call) {
    return Value::Bool(V(call).Compare(call.args[0].semver_value()) < 0);
  });
  r.AddMethod("compareTo", kSemver, {kSemver}, [](EvalContext&, const Call& call) {
    return Value::Int(V(call).Compare(call.args[0].semver_value()));
  });
}

// ---------------------------------------------------------------------------------------------
// IP, CIDR, URL

enum class Parsed { kValue, kIsValid, kIsCanonical };

template <Parsed kWant>
Value ParseIpCall(EvalContext& ctx, const Call& call) {
  const std::string* s = ChargedText(ctx, call, 0);
  if (s == nullptr) return EvalContext::Cancelled();
  absl::StatusOr<IpAddress> ip = ParseIp(*s);
  if (kWant == Parsed::kIsValid) return Value::Bool(ip.ok());
  if (!ip.ok()) return FromStatus(ip.status());
  if (kWant == Parsed::kIsCanonical) return Value::Bool(FormatIp(*ip) == *s);
  return Value::FromIp(*ip);
}

template <Parsed kWant>
Value ParseCidrCall(EvalContext& ctx, const Call& call) {
  const std::string* s = ChargedText(ctx, call, 0);
  if (s == nullptr) return EvalContext::Cancelled();
  absl::StatusOr<Cidr> cidr = ParseCidr(*s);
  if (kWant == Parsed::kIsValid) return Value::Bool(cidr.ok());
  if (!cidr.ok()) return FromStatus(cidr.status());
  return Value::FromCidr(*cidr);
}

template <Parsed kWant>
Value ParseUrlCall(EvalContext& ctx, const Call& call) {
  const std::string* s = ChargedText(ctx, call, 0);
  if (s == nullptr) return EvalContext::Cancelled();
  absl::StatusOr<Url> u = ParseUrl(*s);
  if (kWant == Parsed::kIsValid) return Value::Bool(u.ok());
  if (!u.ok()) return FromStatus(u.status());
  return Value::FromUrl(*std::move(u));
}

const IpAddress& TargetIp(const Call& call) { return call.target->ip_value(); }
const Cidr& TargetCidr(const Call& call) { return call.target->cidr_value(); }
const Url& TargetUrl(const Call& call) { return call.target->url_value(); }

Value UrlQueryMap(EvalContext& ctx, const Call& call) {
  MapValue m;
  uint64_t total = 0;
  for (auto& [k, vs] : UrlQuery(TargetUrl(call))) {
    ValueList values;
    for (std::string& v : vs) {
      total += v.size();
      values.push_back(Value::String(std::move(v)));
    }
    total += k.size();
    m.Insert(Value::String(std::move(k)), Value::List(std::move(values)));
  }
  if (!ctx.Charge(TraversalCost(total))) return EvalContext::Cancelled();
  return Value::Map(std::move(m));
}

void RegisterNetwork(FunctionRegistry& r) {
  r.AddGlobal("ip", {kString}, &ParseIpCall<Parsed::kValue>);
  r.AddGlobal("isIP", {kString}, &ParseIpCall<Parsed::kIsValid>);
  r.AddGlobal("ip.isCanonical", {kString}, &ParseIpCall<Parsed::kIsCanonical>);
  r.AddGlobal("cidr", {kString}, &ParseCidrCall<Parsed::kValue>);
  r.AddGlobal("isCIDR", {kString}, &ParseCidrCall<Parsed::kIsValid>);
  r.AddGlobal("url", {kString}, &ParseUrlCall<Parsed::kValue>);
  r.AddGlobal("isURL", {kString}, &ParseUrlCall<Parsed::kIsValid>);
  r.AddGlobal("string", {kIp}, [](EvalContext&, const Call& call) {
    return Value::String(FormatIp(call.args[0].ip_value()));
  });
  r.AddGlobal("string", {kCidr}, [](EvalContext&, const Call& call) {
    return Value::String(FormatCidr(call.args[0].cidr_value()));
  });

  r.SetReceiverCost(ValueKind::kIp, &ChargeOne);
  r.AddMethod("family", kIp, {},
              [](EvalContext&, const Call& call) { return Value::Int(TargetIp(call).v6 ? 6 : 4); });
  r.AddMethod("isUnspecified", kIp, {}, [](EvalContext&, const Call& call) {
    return Value::Bool(IpIsUnspecified(TargetIp(call)));
  });
  r.AddMethod("isLoopback", kIp, {}, [](EvalContext&, const Call& call) {
    return Value::Bool(IpIsLoopback(TargetIp(call)));
  });
  r.AddMethod("isLinkLocalMulticast", kIp, {}, [](EvalContext&, const Call& call) {
    return Value::Bool(IpIsLinkLocalMulticast(TargetIp(call)));
  });
  r.AddMethod("isLinkLocalUnicast", kIp, {}, [](EvalContext&, const Call& call) {
    return Value::Bool(IpIsLinkLocalUnicast(TargetIp(call)));
  });
  r.AddMethod("isGlobalUnicast", kIp, {}, [](EvalContext&, const Call& call) {
    return Value::Bool(IpIsGlobalUnicast(TargetIp(call)));
  });

  r.SetReceiverCost(ValueKind::kCidr, &ChargeOne);
  r.AddMethod("ip", kCidr, {},
              [](EvalContext&, const Call& call) { return Value::FromIp(TargetCidr(call).addr); });
  r.AddMethod("masked", kCidr, {}, [](EvalContext&, const Call& call) {
    return Value::FromCidr(MaskedCidr(TargetCidr(call)));
  });
  r.AddMethod("prefixLength", kCidr, {},
              [](EvalContext&, const Call& call) { return Value::Int(TargetCidr(call).bits); });
  r.AddMethod("containsIP", kCidr, {kIp}, [](EvalContext&, const Call& call) {
    return Value::Bool(CidrContainsIp(TargetCidr(call), call.args[0].ip_value()));
  });
  r.AddMethod("containsIP", kCidr, {kString}, [](EvalContext& ctx, const Call& call) {
    const std::string* s = ChargedText(ctx, call, 0);
    if (s == nullptr) return EvalContext::Cancelled();
    absl::StatusOr<IpAddress> ip = ParseIp(*s);
    if (!ip.ok()) return FromStatus(ip.status());
    return Value::Bool(CidrContainsIp(TargetCidr(call), *ip));
  });
  r.AddMethod("containsCIDR", kCidr, {kCidr}, [](EvalContext&, const Call& call) {
    return Value::Bool(CidrContainsCidr(TargetCidr(call), call.args[0].cidr_value()));
  });
  r.AddMethod("containsCIDR", kCidr, {kString}, [](EvalContext& ctx, const Call& call) {
    const std::string* s = ChargedText(ctx, call, 0);
    if (s == nullptr) return EvalContext::Cancelled();
    absl::StatusOr<Cidr> other = ParseCidr(*s);
    if (!other.ok()) return FromStatus(other.status());
    return Value::Bool(CidrContainsCidr(TargetCidr(call), *other));
  });

  r.SetReceiverCost(ValueKind::kUrl, &ChargeOne);
  r.AddMethod("getScheme", kUrl, {},
              [](EvalContext&, const Call& call) { return Value::String(TargetUrl(call).scheme); });
  r.AddMethod("getHost", kUrl, {},
              [](EvalContext&, const Call& call) { return Value::String(TargetUrl(call).host); });
  r.AddMethod("getHostname", kUrl, {}, [](EvalContext&, const Call& call) {
    return Value::String(UrlHostname(TargetUrl(call)));
  });
  r.AddMethod("getPort", kUrl, {}, [](EvalContext&, const Call& call) {
    return Value::String(UrlPort(TargetUrl(call)));
  });
  r.AddMethod("getEscapedPath", kUrl, {}, [](EvalContext&, const Call& call) {
    return Value::String(UrlEscapedPath(TargetUrl(call)));
  });
  r.AddMethod("getQuery", kUrl, {}, &UrlQueryMap);
}

// ---------------------------------------------------------------------------------------------
// Format

void RegisterFormat(FunctionRegistry& r) {
  // format.dns1123Label() and the others: the format named by the function.
  for (std::string_view name : FormatNames()) {
    r.AddGlobal(std::string(kFormatPrefix) + std::string(name), {},
                [](EvalContext&, const Call& call) {
                  return Value::Format(std::string(call.function.substr(kFormatPrefix.size())));
                });
  }
  r.AddGlobal("format.named", {kString}, [](EvalContext&, const Call& call) {
    const std::string& s = call.args[0].string_value();
    if (!IsFormatName(s)) return Value::OptionalNone();
    return Value::OptionalOf(Value::Format(s));
  });
  r.SetReceiverCost(ValueKind::kFormat, &ChargeOne);
  r.AddMethod("validate", kFormat, {kString}, [](EvalContext& ctx, const Call& call) {
    const std::string& name = call.target->format_name();
    const std::string& text = call.args[0].string_value();
    // Kubernetes' cost: ceil((1 + size) * 0.1) * ceil(regex size * 0.25).
    const uint64_t str_cost = TraversalCost(1 + text.size());
    const uint64_t re_cost = (FormatRegexSize(name) + 3) / 4;
    if (!ctx.Charge(str_cost * re_cost)) return EvalContext::Cancelled();
    std::vector<std::string> errors = ValidateFormat(name, text);
    if (errors.empty()) return Value::OptionalNone();
    return Value::OptionalOf(StringList(std::move(errors)));
  });
}

}  // namespace

void RegisterKubernetesFunctions(FunctionRegistry& r) {
  RegisterQuantity(r);
  RegisterSemver(r);
  RegisterNetwork(r);
  RegisterFormat(r);
}

}  // namespace qm::cel
