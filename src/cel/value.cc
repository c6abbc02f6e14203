#include "cel/value.h"

#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cel/ast.h"

namespace qm::cel {

Value Value::Bool(bool v) {
  Value r;
  r.kind_ = ValueKind::kBool;
  r.scalar_.b = v;
  return r;
}

Value Value::Int(int64_t v) {
  Value r;
  r.kind_ = ValueKind::kInt;
  r.scalar_.i = v;
  return r;
}

Value Value::Uint(uint64_t v) {
  Value r;
  r.kind_ = ValueKind::kUint;
  r.scalar_.u = v;
  return r;
}

Value Value::Double(double v) {
  Value r;
  r.kind_ = ValueKind::kDouble;
  r.scalar_.d = v;
  return r;
}

Value Value::String(std::string v) {
  Value r;
  r.kind_ = ValueKind::kString;
  r.ptr_ = std::make_shared<const std::string>(std::move(v));
  return r;
}

Value Value::Bytes(std::string v) {
  Value r = String(std::move(v));
  r.kind_ = ValueKind::kBytes;
  return r;
}

Value Value::List(ValueList elements) {
  Value r;
  r.kind_ = ValueKind::kList;
  r.ptr_ = std::make_shared<ValueList>(std::move(elements));
  return r;
}

Value Value::Map(MapValue map) {
  Value r;
  r.kind_ = ValueKind::kMap;
  r.ptr_ = std::make_shared<MapValue>(std::move(map));
  return r;
}

Value Value::OptionalNone() {
  Value r;
  r.kind_ = ValueKind::kOptional;
  return r;
}

Value Value::OptionalOf(Value v) {
  Value r;
  r.kind_ = ValueKind::kOptional;
  r.ptr_ = std::make_shared<const Value>(std::move(v));
  return r;
}

Value Value::FromQuantity(Quantity q) {
  Value r;
  r.kind_ = ValueKind::kQuantity;
  r.ptr_ = std::make_shared<const Quantity>(std::move(q));
  return r;
}

Value Value::FromSemver(Semver v) {
  Value r;
  r.kind_ = ValueKind::kSemver;
  r.ptr_ = std::make_shared<const Semver>(std::move(v));
  return r;
}

Value Value::FromTimestamp(Timestamp t) {
  Value r;
  r.kind_ = ValueKind::kTimestamp;
  r.ptr_ = std::make_shared<const Timestamp>(t);
  return r;
}

Value Value::Duration(int64_t nanos) {
  Value r;
  r.kind_ = ValueKind::kDuration;
  r.scalar_.i = nanos;
  return r;
}

Value Value::FromIp(IpAddress ip) {
  Value r;
  r.kind_ = ValueKind::kIp;
  r.ptr_ = std::make_shared<const IpAddress>(ip);
  return r;
}

Value Value::FromCidr(Cidr cidr) {
  Value r;
  r.kind_ = ValueKind::kCidr;
  r.ptr_ = std::make_shared<const Cidr>(cidr);
  return r;
}

Value Value::FromUrl(Url url) {
  Value r;
  r.kind_ = ValueKind::kUrl;
  r.ptr_ = std::make_shared<const Url>(std::move(url));
  return r;
}

Value Value::Format(std::string name) {
  Value r = String(std::move(name));
  r.kind_ = ValueKind::kFormat;
  return r;
}

Value Value::Type(std::string name) {
  Value r = String(std::move(name));
  r.kind_ = ValueKind::kType;
  return r;
}

Value Value::Error(std::string message) {
  Value r = String(std::move(message));
  r.kind_ = ValueKind::kError;
  return r;
}

std::string_view Value::TypeName() const {
  switch (kind_) {
    case ValueKind::kNull:
      return "null_type";
    case ValueKind::kBool:
      return "bool";
    case ValueKind::kInt:
      return "int";
    case ValueKind::kUint:
      return "uint";
    case ValueKind::kDouble:
      return "double";
    case ValueKind::kString:
      return "string";
    case ValueKind::kBytes:
      return "bytes";
    case ValueKind::kList:
      return "list";
    case ValueKind::kMap:
      return "map";
    case ValueKind::kOptional:
      return "optional_type";
    case ValueKind::kQuantity:
      return "kubernetes.Quantity";
    case ValueKind::kSemver:
      return "kubernetes.Semver";
    case ValueKind::kType:
      return "type";
    case ValueKind::kError:
      return "error";
    case ValueKind::kTimestamp:
      return "google.protobuf.Timestamp";
    case ValueKind::kDuration:
      return "google.protobuf.Duration";
    case ValueKind::kIp:
      return "net.IP";
    case ValueKind::kCidr:
      return "net.CIDR";
    case ValueKind::kUrl:
      return "kubernetes.URL";
    case ValueKind::kFormat:
      return "kubernetes.NamedFormat";
  }
  return "unknown";
}

namespace {

std::string DoubleDebugString(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "+Inf" : "-Inf";
  char buf[64];
  // Shortest representation that round-trips.
  for (int precision = 1; precision <= 17; ++precision) {
    snprintf(buf, sizeof(buf), "%.*g", precision, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string out = buf;
  if (out.find_first_of(".eEn") == std::string::npos) out += ".0";
  return out;
}

void AppendDebugString(const Value& v, int depth, std::string* out) {
  if (depth > 100) {
    out->append("...");
    return;
  }
  switch (v.kind()) {
    case ValueKind::kNull:
      out->append("null");
      return;
    case ValueKind::kBool:
      out->append(v.bool_value() ? "true" : "false");
      return;
    case ValueKind::kInt:
      absl::StrAppend(out, v.int_value());
      return;
    case ValueKind::kUint:
      absl::StrAppend(out, v.uint_value(), "u");
      return;
    case ValueKind::kDouble:
      out->append(DoubleDebugString(v.double_value()));
      return;
    case ValueKind::kString:
      out->append(QuoteString(v.string_value()));
      return;
    case ValueKind::kBytes:
      out->append("b");
      out->append(QuoteString(v.bytes_value()));
      return;
    case ValueKind::kList: {
      out->append("[");
      bool first = true;
      for (const Value& e : v.list_value()) {
        if (!first) out->append(", ");
        first = false;
        AppendDebugString(e, depth + 1, out);
      }
      out->append("]");
      return;
    }
    case ValueKind::kMap: {
      out->append("{");
      bool first = true;
      for (const auto& [k, e] : v.map_value().entries()) {
        if (!first) out->append(", ");
        first = false;
        AppendDebugString(k, depth + 1, out);
        out->append(": ");
        AppendDebugString(e, depth + 1, out);
      }
      out->append("}");
      return;
    }
    case ValueKind::kOptional:
      if (!v.has_optional_value()) {
        out->append("optional.none()");
        return;
      }
      out->append("optional.of(");
      AppendDebugString(v.optional_value(), depth + 1, out);
      out->append(")");
      return;
    case ValueKind::kQuantity:
      absl::StrAppend(out, "quantity(\"", v.quantity_value().String(), "\")");
      return;
    case ValueKind::kSemver:
      absl::StrAppend(out, "semver(\"", v.semver_value().ToString(), "\")");
      return;
    case ValueKind::kType:
      out->append(v.type_name());
      return;
    case ValueKind::kError:
      absl::StrAppend(out, "error(", QuoteString(v.error_message()), ")");
      return;
    case ValueKind::kTimestamp:
      absl::StrAppend(out, "timestamp(\"", FormatTimestamp(v.timestamp_value()), "\")");
      return;
    case ValueKind::kDuration:
      absl::StrAppend(out, "duration(\"", FormatDuration(v.duration_value()), "\")");
      return;
    case ValueKind::kIp:
      absl::StrAppend(out, "ip(\"", FormatIp(v.ip_value()), "\")");
      return;
    case ValueKind::kCidr:
      absl::StrAppend(out, "cidr(\"", FormatCidr(v.cidr_value()), "\")");
      return;
    case ValueKind::kUrl:
      absl::StrAppend(out, "url(", QuoteString(v.url_value().text), ")");
      return;
    case ValueKind::kFormat:
      absl::StrAppend(out, "format.named(", QuoteString(v.format_name()), ")");
      return;
  }
}

bool IsNumeric(ValueKind k) {
  return k == ValueKind::kInt || k == ValueKind::kUint || k == ValueKind::kDouble;
}

// int64 and uint64 convert exactly to the x86-64 80-bit long double, so mixed comparisons are
// exact. NaN yields nullopt.
std::optional<int> CompareNumbers(const Value& a, const Value& b) {
  if (a.kind() == b.kind()) {
    switch (a.kind()) {
      case ValueKind::kInt:
        return a.int_value() < b.int_value() ? -1 : (a.int_value() > b.int_value() ? 1 : 0);
      case ValueKind::kUint:
        return a.uint_value() < b.uint_value() ? -1 : (a.uint_value() > b.uint_value() ? 1 : 0);
      default:
        break;
    }
  }
  if (a.kind() == ValueKind::kInt && b.kind() == ValueKind::kUint) {
    if (a.int_value() < 0) return -1;
    const uint64_t x = static_cast<uint64_t>(a.int_value());
    return x < b.uint_value() ? -1 : (x > b.uint_value() ? 1 : 0);
  }
  if (a.kind() == ValueKind::kUint && b.kind() == ValueKind::kInt) {
    if (b.int_value() < 0) return 1;
    const uint64_t y = static_cast<uint64_t>(b.int_value());
    return a.uint_value() < y ? -1 : (a.uint_value() > y ? 1 : 0);
  }
  auto as_ld = [](const Value& v) -> long double {
    switch (v.kind()) {
      case ValueKind::kInt:
        return static_cast<long double>(v.int_value());
      case ValueKind::kUint:
        return static_cast<long double>(v.uint_value());
      default:
        return static_cast<long double>(v.double_value());
    }
  };
  const long double x = as_ld(a);
  const long double y = as_ld(b);
  if (std::isnan(x) || std::isnan(y)) return std::nullopt;
  return x < y ? -1 : (x > y ? 1 : 0);
}

int CompareBytes(const std::string& a, const std::string& b) {
  const int c = a.compare(b);
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

constexpr int kMaxEqualityDepth = 1000;

// Returns 1 (equal), 0 (unequal) or -1 (too deep).
int EqualsRec(const Value& a, const Value& b, int depth) {
  if (depth > kMaxEqualityDepth) return -1;
  if (IsNumeric(a.kind()) && IsNumeric(b.kind())) {
    const std::optional<int> c = CompareNumbers(a, b);
    return c.has_value() && *c == 0 ? 1 : 0;
  }
  if (a.kind() != b.kind()) return 0;
  switch (a.kind()) {
    case ValueKind::kNull:
      return 1;
    case ValueKind::kBool:
      return a.bool_value() == b.bool_value() ? 1 : 0;
    case ValueKind::kString:
    case ValueKind::kBytes:
    case ValueKind::kType:
      return a.string_value() == b.string_value() ? 1 : 0;
    case ValueKind::kQuantity:
      return a.quantity_value() == b.quantity_value() ? 1 : 0;
    case ValueKind::kSemver:
      return a.semver_value().Compare(b.semver_value()) == 0 ? 1 : 0;
    case ValueKind::kTimestamp:
      return CompareTimestamps(a.timestamp_value(), b.timestamp_value()) == 0 ? 1 : 0;
    case ValueKind::kDuration:
      return a.duration_value() == b.duration_value() ? 1 : 0;
    case ValueKind::kIp:
      return a.ip_value() == b.ip_value() ? 1 : 0;
    case ValueKind::kCidr:
      return a.cidr_value() == b.cidr_value() ? 1 : 0;
    case ValueKind::kUrl:
      return a.url_value().text == b.url_value().text ? 1 : 0;
    case ValueKind::kFormat:
      return a.format_name() == b.format_name() ? 1 : 0;
    case ValueKind::kOptional:
      if (a.has_optional_value() != b.has_optional_value()) return 0;
      if (!a.has_optional_value()) return 1;
      return EqualsRec(a.optional_value(), b.optional_value(), depth + 1);
    case ValueKind::kList: {
      const ValueList& x = a.list_value();
      const ValueList& y = b.list_value();
      if (x.size() != y.size()) return 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const int r = EqualsRec(x[i], y[i], depth + 1);
        if (r != 1) return r;
      }
      return 1;
    }
    case ValueKind::kMap: {
      const MapValue& x = a.map_value();
      const MapValue& y = b.map_value();
      if (x.size() != y.size()) return 0;
      for (const auto& [k, v] : x.entries()) {
        if (!y.Contains(k)) return 0;
        const int r = EqualsRec(v, *y.Find(k), depth + 1);
        if (r != 1) return r;
      }
      return 1;
    }
    default:
      return 0;
  }
}

// Encodes a map key so that numerically equal int and uint keys collide. REQUIRES IsValidKey.
std::string EncodeKey(const Value& key) {
  switch (key.kind()) {
    case ValueKind::kBool:
      return key.bool_value() ? "b1" : "b0";
    case ValueKind::kInt:
      return absl::StrCat("n", key.int_value());
    case ValueKind::kUint:
      return absl::StrCat("n", key.uint_value());
    default:
      return absl::StrCat("s", key.string_value());
  }
}

// A double key with an integral value looks up the int/uint entry (cel-go does the same).
std::optional<Value> NormalizeKey(const Value& key) {
  if (key.kind() != ValueKind::kDouble) {
    if (MapValue::IsValidKey(key)) return key;
    return std::nullopt;
  }
  const double d = key.double_value();
  if (!(d == std::trunc(d))) return std::nullopt;
  if (d >= -9223372036854775808.0 && d < 9223372036854775808.0) {
    return Value::Int(static_cast<int64_t>(d));
  }
  if (d >= 0 && d < 18446744073709551616.0) return Value::Uint(static_cast<uint64_t>(d));
  return std::nullopt;
}

bool KeysEqual(const Value& a, const Value& b) {
  if (IsNumeric(a.kind()) && IsNumeric(b.kind())) {
    const std::optional<int> c = CompareNumbers(a, b);
    return c.has_value() && *c == 0;
  }
  if (a.kind() != b.kind()) return false;
  if (a.kind() == ValueKind::kBool) return a.bool_value() == b.bool_value();
  return a.string_value() == b.string_value();
}

constexpr size_t kIndexThreshold = 16;

}  // namespace

std::string Value::DebugString() const {
  std::string out;
  AppendDebugString(*this, 0, &out);
  return out;
}

Value Equals(const Value& a, const Value& b) {
  if (a.IsError()) return a;
  if (b.IsError()) return b;
  const int r = EqualsRec(a, b, 0);
  if (r < 0) return Value::Error("values nest too deeply to compare");
  return Value::Bool(r == 1);
}

bool Comparable(const Value& a, const Value& b) {
  if (IsNumeric(a.kind()) && IsNumeric(b.kind())) return true;
  if (a.kind() != b.kind()) return false;
  return a.kind() == ValueKind::kString || a.kind() == ValueKind::kBytes ||
         a.kind() == ValueKind::kBool || a.kind() == ValueKind::kTimestamp ||
         a.kind() == ValueKind::kDuration;
}

std::optional<int> Compare(const Value& a, const Value& b) {
  if (IsNumeric(a.kind()) && IsNumeric(b.kind())) return CompareNumbers(a, b);
  if (a.kind() != b.kind()) return std::nullopt;
  switch (a.kind()) {
    case ValueKind::kString:
    case ValueKind::kBytes:
      return CompareBytes(a.string_value(), b.string_value());
    case ValueKind::kBool:
      return static_cast<int>(a.bool_value()) - static_cast<int>(b.bool_value());
    case ValueKind::kTimestamp:
      return CompareTimestamps(a.timestamp_value(), b.timestamp_value());
    case ValueKind::kDuration:
      return a.duration_value() < b.duration_value()
                 ? -1
                 : (a.duration_value() > b.duration_value() ? 1 : 0);
    default:
      return std::nullopt;
  }
}

MapValue::MapValue(const MapValue& other)
    : entries_(other.entries_),
      index_(other.index_ != nullptr ? std::make_unique<Index>(*other.index_) : nullptr),
      default_(other.default_) {}

MapValue& MapValue::operator=(const MapValue& other) {
  if (this != &other) *this = MapValue(other);
  return *this;
}

MapValue::~MapValue() = default;

bool MapValue::IsValidKey(const Value& key) {
  switch (key.kind()) {
    case ValueKind::kBool:
    case ValueKind::kInt:
    case ValueKind::kUint:
    case ValueKind::kString:
      return true;
    default:
      return false;
  }
}

bool MapValue::Insert(Value key, Value value) {
  if (!IsValidKey(key)) return false;
  if (FindEntry(key) != nullptr) return false;
  entries_.emplace_back(std::move(key), std::move(value));
  if (entries_.size() > kIndexThreshold) {
    if (index_ == nullptr) index_ = std::make_unique<Index>();
    const size_t from = entries_.size() == kIndexThreshold + 1 ? 0 : entries_.size() - 1;
    for (size_t i = from; i < entries_.size(); ++i) {
      const Value& k = entries_[i].first;
      if (k.kind() == ValueKind::kString) {
        index_->strings[std::string_view(k.string_value())] = i;
      } else {
        index_->others[EncodeKey(k)] = i;
      }
    }
  }
  return true;
}

const Value* MapValue::FindEntry(const Value& key) const {
  if (key.kind() == ValueKind::kDouble) {
    const std::optional<Value> k = NormalizeKey(key);
    return k.has_value() ? FindEntry(*k) : nullptr;
  }
  if (!IsValidKey(key)) return nullptr;
  if (index_ != nullptr) {
    if (key.kind() == ValueKind::kString) {
      auto it = index_->strings.find(std::string_view(key.string_value()));
      return it == index_->strings.end() ? nullptr : &entries_[it->second].second;
    }
    auto it = index_->others.find(EncodeKey(key));
    return it == index_->others.end() ? nullptr : &entries_[it->second].second;
  }
  // String keys (field selection, attribute names) are the common case: compare them directly.
  if (key.kind() == ValueKind::kString) {
    const std::string& ks = key.string_value();
    for (const auto& [ek, ev] : entries_) {
      if (ek.kind() == ValueKind::kString && ek.string_value() == ks) return &ev;
    }
    return nullptr;
  }
  for (const auto& [ek, ev] : entries_) {
    if (KeysEqual(ek, key)) return &ev;
  }
  return nullptr;
}

const Value* MapValue::Find(const Value& key) const {
  const Value* v = FindEntry(key);
  if (v == nullptr && default_ != nullptr) return default_.get();
  return v;
}

}  // namespace qm::cel
