#include "cel/interpreter.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/numeric/int128.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "cel/format_lib.h"
#include "cel/net_lib.h"
#include "cel/operators.h"
#include "cel/source.h"
#include "cel/strings_lib.h"
#include "cel/time_lib.h"
#include "re2/re2.h"

namespace qm::cel {

// ---------------------------------------------------------------------------------------------
// Activation and RegexCache

void Activation::Insert(std::string name, Value value) {
  for (size_t i = 0; i < inline_size_; ++i) {
    if (inline_[i].first == name) {
      inline_[i].second = std::move(value);
      return;
    }
  }
  for (auto& [n, v] : more_) {
    if (n == name) {
      v = std::move(value);
      return;
    }
  }
  if (inline_size_ < kInline) {
    inline_[inline_size_++] = {std::move(name), std::move(value)};
    return;
  }
  more_.emplace_back(std::move(name), std::move(value));
}

const Value* Activation::Find(std::string_view name) const {
  for (size_t i = 0; i < inline_size_; ++i) {
    if (inline_[i].first == name) return &inline_[i].second;
  }
  for (const auto& [n, v] : more_) {
    if (n == name) return &v;
  }
  return nullptr;
}

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

namespace {

// Call arguments: most calls have one to three, kept inline to spare an allocation per call.
class Args {
 public:
  Args() = default;
  Args(std::initializer_list<Value> values) {
    for (const Value& v : values) push_back(v);
  }

  void reserve(size_t n) {
    if (n > kInline) heap_.reserve(n);
  }
  void push_back(Value v) {
    if (size_ < kInline) {
      inline_[size_++] = std::move(v);
      return;
    }
    if (size_ == kInline) {
      heap_.assign(std::make_move_iterator(inline_.begin()),
                   std::make_move_iterator(inline_.end()));
    }
    heap_.push_back(std::move(v));
    ++size_;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  Value& operator[](size_t i) { return data()[i]; }
  const Value& operator[](size_t i) const { return data()[i]; }
  Value* begin() { return data(); }
  Value* end() { return data() + size_; }
  const Value* begin() const { return data(); }
  const Value* end() const { return data() + size_; }

 private:
  static constexpr size_t kInline = 4;
  Value* data() { return size_ > kInline ? heap_.data() : inline_.data(); }
  const Value* data() const { return size_ > kInline ? heap_.data() : inline_.data(); }

  std::array<Value, kInline> inline_;
  size_t size_ = 0;
  std::vector<Value> heap_;  // all elements once there are more than kInline
};

// ---------------------------------------------------------------------------------------------
// Small helpers

Value Err(std::string message) { return Value::Error(std::move(message)); }

std::string Str(std::string_view s) { return std::string(s); }

std::string IntText(int64_t v) { return std::to_string(v); }

// The text cel-go prints for a map key in "no such key" errors (Go's %v).
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

Value NoSuchOverload(std::string_view fn, const Value* target, const Args& args) {
  std::string out = "no such overload: ";
  if (target != nullptr) out += Str(target->TypeName()) + ".";
  out += Str(fn) + "(";
  for (size_t i = 0; i < args.size(); ++i) {
    if (i > 0) out += ", ";
    out += Str(args[i].TypeName());
  }
  out += ")";
  return Err(std::move(out));
}

bool IsBool(const Value& v, bool b) { return v.kind() == ValueKind::kBool && v.bool_value() == b; }

// ceil(n * 0.1): cel-go's common.StringTraversalCostFactor.
uint64_t TraversalCost(uint64_t n) { return (n + 9) / 10; }

// cel-go's actualSize(): the length of strings, bytes, lists and maps; 1 for everything else.
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

// Go's Go-syntax type names, for cel-go's "got 'types.Int', expected iterable type".
std::string GoTypeName(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kNull:
      return "types.Null";
    case ValueKind::kBool:
      return "types.Bool";
    case ValueKind::kInt:
      return "types.Int";
    case ValueKind::kUint:
      return "types.Uint";
    case ValueKind::kDouble:
      return "types.Double";
    case ValueKind::kString:
      return "types.String";
    case ValueKind::kBytes:
      return "types.Bytes";
    case ValueKind::kOptional:
      return "*types.Optional";
    case ValueKind::kQuantity:
      return "cel.Quantity";
    case ValueKind::kSemver:
      return "cel.Semver";
    case ValueKind::kType:
      return "*types.Type";
    default:
      return Str(v.TypeName());
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

Value FromStatus(const absl::Status& s) { return Err(std::string(s.message())); }

template <typename T>
Value FromStatusOr(absl::StatusOr<T> r, Value (*wrap)(T)) {
  if (!r.ok()) return FromStatus(r.status());
  return wrap(std::move(*r));
}

Value WrapString(std::string s) { return Value::String(std::move(s)); }
Value WrapInt(int64_t i) { return Value::Int(i); }
Value WrapBool(bool b) { return Value::Bool(b); }

Value StringList(std::vector<std::string> parts) {
  ValueList out;
  out.reserve(parts.size());
  for (std::string& p : parts) out.push_back(Value::String(std::move(p)));
  return Value::List(std::move(out));
}

// ---------------------------------------------------------------------------------------------
// Arithmetic

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

template <typename T>
Value FromTimeResult(absl::StatusOr<T> r) {
  if (!r.ok()) return FromStatus(r.status());
  if constexpr (std::is_same_v<T, Timestamp>) {
    return Value::FromTimestamp(*r);
  } else {
    return Value::Duration(*r);
  }
}

// timestamp/duration arithmetic; nullopt when neither operand is a time value.
std::optional<Value> TimeArith(std::string_view fn, const Value& a, const Value& b) {
  const ValueKind ka = a.kind(), kb = b.kind();
  const bool ts_a = ka == ValueKind::kTimestamp, ts_b = kb == ValueKind::kTimestamp;
  const bool du_a = ka == ValueKind::kDuration, du_b = kb == ValueKind::kDuration;
  if (!(ts_a || ts_b || du_a || du_b)) return std::nullopt;
  if (fn == op::kAdd) {
    if (ts_a && du_b) return FromTimeResult(AddDuration(a.timestamp_value(), b.duration_value()));
    if (du_a && ts_b) return FromTimeResult(AddDuration(b.timestamp_value(), a.duration_value()));
    if (du_a && du_b) return FromTimeResult(AddDurations(a.duration_value(), b.duration_value()));
  } else if (fn == op::kSubtract) {
    if (ts_a && du_b) {
      return FromTimeResult(SubtractDuration(a.timestamp_value(), b.duration_value()));
    }
    if (ts_a && ts_b) {
      return FromTimeResult(SubtractTimestamps(a.timestamp_value(), b.timestamp_value()));
    }
    if (du_a && du_b) {
      return FromTimeResult(SubtractDurations(a.duration_value(), b.duration_value()));
    }
  }
  return NoSuchOverload(fn, nullptr, {a, b});
}

Value Arith(std::string_view fn, const Value& a, const Value& b) {
  if (std::optional<Value> t = TimeArith(fn, a, b)) return *std::move(t);
  if (fn == op::kAdd) return Add(a, b);
  if (a.kind() != b.kind()) return NoSuchOverload(fn, nullptr, {a, b});
  switch (a.kind()) {
    case ValueKind::kInt: {
      const int64_t x = a.int_value(), y = b.int_value();
      int64_t r = 0;
      if (fn == op::kSubtract) {
        if (__builtin_sub_overflow(x, y, &r)) return Err("integer overflow");
      } else if (fn == op::kMultiply) {
        if (__builtin_mul_overflow(x, y, &r)) return Err("integer overflow");
      } else if (fn == op::kDivide) {
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
    case ValueKind::kUint: {
      const uint64_t x = a.uint_value(), y = b.uint_value();
      uint64_t r = 0;
      if (fn == op::kSubtract) {
        if (__builtin_sub_overflow(x, y, &r)) return Err("unsigned integer overflow");
      } else if (fn == op::kMultiply) {
        if (__builtin_mul_overflow(x, y, &r)) return Err("unsigned integer overflow");
      } else if (fn == op::kDivide) {
        if (y == 0) return Err("division by zero");
        r = x / y;
      } else {
        if (y == 0) return Err("modulus by zero");
        r = x % y;
      }
      return Value::Uint(r);
    }
    case ValueKind::kDouble: {
      const double x = a.double_value(), y = b.double_value();
      if (fn == op::kSubtract) return Value::Double(x - y);
      if (fn == op::kMultiply) return Value::Double(x * y);
      if (fn == op::kDivide) return Value::Double(x / y);
      return NoSuchOverload(fn, nullptr, {a, b});
    }
    default:
      return NoSuchOverload(fn, nullptr, {a, b});
  }
}

// ---------------------------------------------------------------------------------------------
// Conversions (cel-go's error texts, which quote Go's strconv errors)

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

Value DoubleToInt(double d) {
  if (!(d > -9223372036854775808.0 && d < 9223372036854775808.0)) {
    return Err("integer overflow");
  }
  return Value::Int(static_cast<int64_t>(d));
}

Value DoubleToUint(double d) {
  if (!(d >= 0 && d < 18446744073709551616.0)) return Err("unsigned integer overflow");
  return Value::Uint(static_cast<uint64_t>(d));
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

Value Convert(std::string_view fn, const Value& v) {
  const Args args = {v};
  if (fn == "int") {
    switch (v.kind()) {
      case ValueKind::kInt:
        return v;
      case ValueKind::kUint:
        if (v.uint_value() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          return Err("integer overflow");
        }
        return Value::Int(static_cast<int64_t>(v.uint_value()));
      case ValueKind::kDouble:
        return DoubleToInt(v.double_value());
      case ValueKind::kString:
        return ParseIntText(v.string_value());
      case ValueKind::kTimestamp:
        return Value::Int(v.timestamp_value().seconds);
      case ValueKind::kDuration:
        return Value::Int(v.duration_value());
      default:
        break;
    }
  } else if (fn == "uint") {
    switch (v.kind()) {
      case ValueKind::kUint:
        return v;
      case ValueKind::kInt:
        if (v.int_value() < 0) return Err("unsigned integer overflow");
        return Value::Uint(static_cast<uint64_t>(v.int_value()));
      case ValueKind::kDouble:
        return DoubleToUint(v.double_value());
      case ValueKind::kString:
        return ParseUintText(v.string_value());
      default:
        break;
    }
  } else if (fn == "double") {
    switch (v.kind()) {
      case ValueKind::kDouble:
        return v;
      case ValueKind::kInt:
        return Value::Double(static_cast<double>(v.int_value()));
      case ValueKind::kUint:
        return Value::Double(static_cast<double>(v.uint_value()));
      case ValueKind::kString:
        return ParseDoubleText(v.string_value());
      default:
        break;
    }
  } else if (fn == "string") {
    switch (v.kind()) {
      case ValueKind::kString:
        return v;
      case ValueKind::kInt:
        return Value::String(std::to_string(v.int_value()));
      case ValueKind::kUint:
        return Value::String(std::to_string(v.uint_value()));
      case ValueKind::kDouble:
        return Value::String(DoubleToString(v.double_value()));
      case ValueKind::kBool:
        return Value::String(v.bool_value() ? "true" : "false");
      case ValueKind::kBytes:
        if (!ValidUtf8(v.bytes_value())) {
          return Err("invalid UTF-8 in bytes, cannot convert to string");
        }
        return Value::String(v.bytes_value());
      case ValueKind::kType:
        return Value::String(v.type_name());
      case ValueKind::kTimestamp:
        return Value::String(FormatTimestamp(v.timestamp_value()));
      case ValueKind::kDuration:
        return Value::String(FormatDuration(v.duration_value()));
      case ValueKind::kIp:
        return Value::String(FormatIp(v.ip_value()));
      case ValueKind::kCidr:
        return Value::String(FormatCidr(v.cidr_value()));
      default:
        break;
    }
  } else if (fn == "timestamp") {
    switch (v.kind()) {
      case ValueKind::kTimestamp:
        return v;
      case ValueKind::kString: {
        absl::StatusOr<Timestamp> t = ParseTimestamp(v.string_value());
        if (!t.ok()) return FromStatus(t.status());
        return Value::FromTimestamp(*t);
      }
      case ValueKind::kInt: {
        absl::StatusOr<Timestamp> t = TimestampFromUnixSeconds(v.int_value());
        if (!t.ok()) return FromStatus(t.status());
        return Value::FromTimestamp(*t);
      }
      default:
        break;
    }
  } else if (fn == "duration") {
    switch (v.kind()) {
      case ValueKind::kDuration:
        return v;
      case ValueKind::kString: {
        absl::StatusOr<int64_t> d = ParseDuration(v.string_value());
        if (!d.ok()) return FromStatus(d.status());
        return Value::Duration(*d);
      }
      case ValueKind::kInt:
        return Value::Duration(v.int_value());
      default:
        break;
    }
  } else if (fn == "bool") {
    switch (v.kind()) {
      case ValueKind::kBool:
        return v;
      case ValueKind::kString: {
        const std::string& s = v.string_value();
        if (s == "1" || s == "t" || s == "T" || s == "true" || s == "TRUE" || s == "True") {
          return Value::Bool(true);
        }
        if (s == "0" || s == "f" || s == "F" || s == "false" || s == "FALSE" || s == "False") {
          return Value::Bool(false);
        }
        return Err("strconv.ParseBool: parsing " + QuoteString(s) + ": invalid syntax");
      }
      default:
        break;
    }
  } else if (fn == "bytes") {
    switch (v.kind()) {
      case ValueKind::kBytes:
        return v;
      case ValueKind::kString:
        return Value::Bytes(v.string_value());
      default:
        break;
    }
  } else if (fn == "type") {
    return Value::Type(Str(v.TypeName()));
  } else if (fn == "dyn") {
    return v;
  }
  return NoSuchOverload(fn, nullptr, args);
}

// ---------------------------------------------------------------------------------------------
// format() arguments

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
      return FormatArg::Other(Str(v.TypeName()));
  }
}

// ---------------------------------------------------------------------------------------------
// The evaluator

constexpr std::string_view kNamespaces[] = {"optional", "sets", "strings", "lists",
                                            "cel",      "ip",   "format"};
constexpr size_t kMaxIncludesElements = 48;

class Evaluator {
 public:
  Evaluator(const Activation& vars, const EvalOptions& options) : vars_(vars), options_(options) {}

  Value Eval(const Expr& e);
  uint64_t cost() const { return cost_; }
  bool cancelled() const { return cancelled_; }

 private:
  // Adds `c` to the cost; false once the limit is passed (evaluation is then cancelled).
  bool Charge(uint64_t c) {
    cost_ += c;
    if (cost_ > options_.cost_limit) cancelled_ = true;
    return !cancelled_;
  }
  static Value Cancelled() { return Err(Str(kCostLimitExceeded)); }

  // Evaluates `e` without copying a value that already exists: returns a pointer to a value
  // that outlives the evaluation (a variable of the activation, a literal of the plan, or
  // something inside those immutable values), or stores the result in *scratch and returns
  // scratch. Comprehension variables are always copied (their storage moves as scopes open).
  const Value* EvalRef(const Expr& e, Value* scratch);
  const Value* IdentRef(const Expr& e, Value* scratch);
  const Value* SelectRef(const Expr& e, Value* scratch);
  const Value* IndexRef(const CallExpr& c, Value* scratch);
  // The precomputed value of a kFolded call, its cost charged; nullptr (nothing charged) when
  // that cost would pass the limit, so that the call runs and stops where it would unplanned.
  const Value* FoldedRef(const Expr& e) {
    const uint64_t c = options_.constants->folded_cost(e.id());
    if (c > options_.cost_limit || cost_ > options_.cost_limit - c) return nullptr;
    const Value* v = options_.constants->FoldedValue(e.id());
    if (v != nullptr) cost_ += c;
    return v;
  }
  CallPlan PlanOf(const Expr& e) const {
    return options_.constants != nullptr ? options_.constants->call_plan(e.id())
                                         : PlanCall(e.call());
  }
  Value EvalCall(const Expr& e);
  Value EvalList(const Expr& e);
  Value EvalMap(const Expr& e);
  Value EvalComprehension(const Expr& e);
  Value EvalLogical(const CallExpr& c, bool is_and);
  Value EvalAccumulate(const CallExpr& c, std::string_view fn, Value* slot);

  Value Dispatch(std::string_view fn, const Value* target, Args& args);
  Value EqualsOp(bool negate, const Value& a, const Value& b);
  Value Index(const Value& container, const Value& key, bool optional);
  // `key` is the field as a string Value (built from `field` when nullptr).
  Value SelectField(const Value& operand, const std::string& field, const Value* key,
                    bool optional);
  Value StringMethod(std::string_view fn, const Value& t, Args& args, bool* handled);
  Value ListMethod(std::string_view fn, const Value& t, Args& args, bool* handled);
  Value QuantityMethod(std::string_view fn, const Value& t, Args& args, bool* handled);
  Value SemverMethod(std::string_view fn, const Value& t, Args& args, bool* handled);
  // Timestamps, durations, IPs, CIDRs, URLs and formats (cel/time_lib.h, cel/net_lib.h).
  Value LibraryMethod(std::string_view fn, const Value& t, Args& args, bool* handled);
  Value LibraryFunction(std::string_view fn, Args& args, bool* handled);
  Value Matches(const Value& s, const Value& pattern);

  const Value* FindLocal(std::string_view name) const {
    for (auto it = locals_.rbegin(); it != locals_.rend(); ++it) {
      if (it->first == name) return &it->second;
    }
    return nullptr;
  }
  Value* FindLocalMutable(std::string_view name) {
    for (auto it = locals_.rbegin(); it != locals_.rend(); ++it) {
      if (it->first == name) return &it->second;
    }
    return nullptr;
  }
  bool IsBound(std::string_view name) const {
    return FindLocal(name) != nullptr || vars_.Find(name) != nullptr;
  }

  const Activation& vars_;
  const EvalOptions& options_;
  uint64_t cost_ = 0;
  bool cancelled_ = false;
  // Comprehension variables, innermost last.
  std::vector<std::pair<std::string_view, Value>> locals_;
};

// `v` is what an EvalRef call with scratch `local` returned; the result stays valid after `local`
// is gone (moved into *scratch when it is `local`).
const Value* Keep(const Value* v, Value* local, Value* scratch) {
  if (v != local) return v;
  *scratch = std::move(*local);
  return scratch;
}

Value Evaluator::Eval(const Expr& e) {
  if (cancelled_) return Cancelled();
  switch (e.kind()) {
    case ExprKind::kConstant:
    case ExprKind::kIdent:
    case ExprKind::kSelect: {
      Value scratch;
      const Value* v = EvalRef(e, &scratch);
      return v == &scratch ? std::move(scratch) : *v;
    }
    case ExprKind::kCall:
      return EvalCall(e);
    case ExprKind::kList:
      return EvalList(e);
    case ExprKind::kMap:
      return EvalMap(e);
    case ExprKind::kComprehension:
      return EvalComprehension(e);
  }
  return Err("unknown expression kind");
}

const Value* Evaluator::EvalRef(const Expr& e, Value* scratch) {
  if (cancelled_) {
    *scratch = Cancelled();
    return scratch;
  }
  switch (e.kind()) {
    case ExprKind::kConstant:
      if (options_.constants != nullptr) {
        if (const Value* v = options_.constants->Find(e.id())) return v;
      }
      *scratch = ConstantValue(e.constant());
      return scratch;
    case ExprKind::kIdent:
      return IdentRef(e, scratch);
    case ExprKind::kSelect:
      return SelectRef(e, scratch);
    case ExprKind::kCall: {
      const CallPlan plan = PlanOf(e);
      if (plan == CallPlan::kIndex) return IndexRef(e.call(), scratch);
      if (plan == CallPlan::kFolded) {
        if (const Value* v = FoldedRef(e)) return v;
      }
      *scratch = EvalCall(e);
      return scratch;
    }
    default:
      *scratch = Eval(e);
      return scratch;
  }
}

const Value* Evaluator::IdentRef(const Expr& e, Value* scratch) {
  if (!Charge(1)) {
    *scratch = Cancelled();
    return scratch;
  }
  std::string_view name = e.ident().name;
  const bool rooted = !name.empty() && name[0] == '.';
  if (rooted) {
    name.remove_prefix(1);
  } else if (const Value* v = FindLocal(name)) {
    *scratch = *v;
    return scratch;
  }
  if (const Value* v = vars_.Find(name)) return v;
  static constexpr std::string_view kTypeNames[] = {"bool",      "int",   "uint",         "double",
                                                    "string",    "bytes", "list",         "map",
                                                    "null_type", "type",  "optional_type"};
  for (std::string_view t : kTypeNames) {
    if (name == t) {
      *scratch = Value::Type(Str(t));
      return scratch;
    }
  }
  *scratch = Err("no such attribute(s): " + Str(e.ident().name));
  return scratch;
}

Value Evaluator::SelectField(const Value& operand, const std::string& field, const Value* key,
                             bool optional) {
  switch (operand.kind()) {
    case ValueKind::kMap: {
      const Value* v = key != nullptr ? operand.map_value().Find(*key)
                                      : operand.map_value().Find(Value::String(field));
      if (v == nullptr) return optional ? Value::OptionalNone() : Err("no such key: " + field);
      return optional ? Value::OptionalOf(*v) : *v;
    }
    case ValueKind::kOptional:
      // Selection on an optional value stays optional (cel-go's optional chaining).
      if (!operand.has_optional_value()) return operand;
      return SelectField(operand.optional_value(), field, key, /*optional=*/true);
    default:
      return Err("type '" + Str(operand.TypeName()) + "' does not support field selection");
  }
}

const Value* Evaluator::SelectRef(const Expr& e, Value* scratch) {
  const SelectExpr& s = e.select();
  Value local;
  const Value* operand = EvalRef(*s.operand, &local);
  if (operand->IsError()) return Keep(operand, &local, scratch);
  if (!Charge(1)) {
    *scratch = Cancelled();
    return scratch;
  }
  const Value* key = options_.constants != nullptr ? options_.constants->FieldKey(e.id()) : nullptr;
  if (s.test_only) {
    if (operand->kind() == ValueKind::kMap) {
      const MapValue& m = operand->map_value();
      *scratch =
          Value::Bool((key != nullptr ? m.Find(*key) : m.Find(Value::String(s.field))) != nullptr);
    } else {
      *scratch = Err("invalid type for field selection: " + Str(operand->TypeName()));
    }
    return scratch;
  }
  if (!s.optional && key != nullptr && operand->kind() == ValueKind::kMap) {
    // SelectField's map case, without copying the entry out of a map that outlives this call.
    if (const Value* v = operand->map_value().Find(*key); v != nullptr && operand != &local) {
      return v;
    }
  }
  *scratch = SelectField(*operand, s.field, key, s.optional);
  return scratch;
}

const Value* Evaluator::IndexRef(const CallExpr& c, Value* scratch) {
  Value local_a;
  Value local_b;
  const Value* a = EvalRef(*c.args[0], &local_a);
  if (cancelled_) {
    *scratch = Cancelled();
    return scratch;
  }
  const Value* b = EvalRef(*c.args[1], &local_b);
  if (cancelled_) {
    *scratch = Cancelled();
    return scratch;
  }
  if (a->IsError()) return Keep(a, &local_a, scratch);
  if (b->IsError()) return Keep(b, &local_b, scratch);
  if (!Charge(1)) {
    *scratch = Cancelled();
    return scratch;
  }
  if (a != &local_a && a->kind() == ValueKind::kMap && MapValue::IsValidKey(*b)) {
    // Index's map case, without copying the entry out of a map that outlives this call.
    if (const Value* v = a->map_value().Find(*b)) return v;
  }
  *scratch = Index(*a, *b, /*optional=*/false);
  return scratch;
}

Value Evaluator::Index(const Value& container, const Value& key, bool optional) {
  switch (container.kind()) {
    case ValueKind::kList: {
      const std::optional<int64_t> i = IndexValue(key);
      if (!i.has_value())
        return NoSuchOverload(optional ? op::kOptIndex : op::kIndex, nullptr, {container, key});
      const ValueList& l = container.list_value();
      if (*i < 0 || *i >= static_cast<int64_t>(l.size())) {
        if (optional) return Value::OptionalNone();
        return Err("index out of bounds: " + IntText(*i));
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

Value Evaluator::EvalLogical(const CallExpr& c, bool is_and) {
  const std::string_view fn = is_and ? op::kLogicalAnd : op::kLogicalOr;
  if (c.args.size() != 2) return NoSuchOverload(fn, nullptr, {});
  // The decisive value: false for &&, true for ||.
  const bool decisive = !is_and;
  Value l = Eval(*c.args[0]);
  if (cancelled_) return Cancelled();
  if (IsBool(l, decisive)) return l;
  Value r = Eval(*c.args[1]);
  if (cancelled_) return Cancelled();
  if (IsBool(r, decisive)) return r;
  if (l.kind() == ValueKind::kBool && r.kind() == ValueKind::kBool) return r;
  if (l.IsError()) return l;
  if (r.IsError()) return r;
  return NoSuchOverload(fn, nullptr, {l, r});
}

// `@result + [x]` and `cel.@mapInsert(@result, ...)` inside a comprehension: the accumulator is
// about to be replaced by this step's value, so it is moved out of its slot and, when nothing
// else shares it, extended in place. This keeps map()/filter() linear instead of quadratic.
Value Evaluator::EvalAccumulate(const CallExpr& c, std::string_view fn, Value* slot) {
  if (!Charge(1)) return Cancelled();
  Value accu = std::move(*slot);
  *slot = Value::Null();
  Args rest;
  for (size_t i = 1; i < c.args.size(); ++i) {
    rest.push_back(Eval(*c.args[i]));
    if (cancelled_) return Cancelled();
  }
  if (accu.IsError()) return accu;
  for (const Value& v : rest) {
    if (v.IsError()) return v;
  }
  if (fn == op::kAdd && rest.size() == 1 && accu.kind() == ValueKind::kList &&
      rest[0].kind() == ValueKind::kList) {
    if (!Charge(TraversalCost(rest[0].list_value().size()))) return Cancelled();
    if (accu.UniquePayload()) {
      ValueList* l = accu.MutableListForUniqueOwner();
      l->insert(l->end(), rest[0].list_value().begin(), rest[0].list_value().end());
      return accu;
    }
    return Add(accu, rest[0]);
  }
  if (fn == op::kMapInsert && accu.kind() == ValueKind::kMap && accu.UniquePayload()) {
    MapValue* m = accu.MutableMapForUniqueOwner();
    if (rest.size() == 2) {
      if (!MapValue::IsValidKey(rest[0])) return NoSuchOverload(fn, nullptr, {accu, rest[0]});
      if (!m->Insert(rest[0], rest[1])) {
        return Err("insert failed: key " + KeyText(rest[0]) + " already exists");
      }
      return accu;
    }
    if (rest.size() == 1 && rest[0].kind() == ValueKind::kMap) {
      for (const auto& [k, v] : rest[0].map_value().entries()) {
        if (!m->Insert(k, v)) return Err("insert failed: key " + KeyText(k) + " already exists");
      }
      return accu;
    }
  }
  Args all;
  all.push_back(std::move(accu));
  for (Value& v : rest) all.push_back(std::move(v));
  cost_ -= 1;  // Dispatch charges the call itself.
  return Dispatch(fn, nullptr, all);
}

Value Evaluator::EqualsOp(bool negate, const Value& a, const Value& b) {
  if (!Charge(TraversalCost(std::min(ActualSize(a), ActualSize(b))))) return Cancelled();
  Value eq = Equals(a, b);
  if (eq.IsError() || !negate) return eq;
  return Value::Bool(!eq.bool_value());
}

Value Evaluator::EvalCall(const Expr& e) {
  const CallExpr& c = e.call();
  std::string_view fn = c.function;
  const CallPlan plan = PlanOf(e);
  switch (plan) {
    case CallPlan::kAnd:
      return EvalLogical(c, /*is_and=*/true);
    case CallPlan::kOr:
      return EvalLogical(c, /*is_and=*/false);
    case CallPlan::kConditional: {
      Value cond = Eval(*c.args[0]);
      if (cond.IsError()) return cond;
      if (cond.kind() != ValueKind::kBool) return NoSuchOverload(fn, nullptr, {cond});
      return Eval(*c.args[cond.bool_value() ? 1 : 2]);
    }
    case CallPlan::kNotStrictlyFalse: {
      Value v = Eval(*c.args[0]);
      if (cancelled_) return Cancelled();
      return Value::Bool(!IsBool(v, false));
    }
    case CallPlan::kIndex: {
      Value scratch;
      const Value* v = IndexRef(c, &scratch);
      return v == &scratch ? std::move(scratch) : *v;
    }
    case CallPlan::kEquals:
    case CallPlan::kNotEquals: {
      // The generic path below without copies of the operands, the argument vector and the
      // dispatch by name.
      Value local_a;
      Value local_b;
      const Value* a = EvalRef(*c.args[0], &local_a);
      if (cancelled_) return Cancelled();
      const Value* b = EvalRef(*c.args[1], &local_b);
      if (cancelled_) return Cancelled();
      if (a->IsError()) return *a;
      if (b->IsError()) return *b;
      return EqualsOp(plan == CallPlan::kNotEquals, *a, *b);
    }
    case CallPlan::kFolded:
      if (const Value* v = FoldedRef(e)) return *v;
      break;
    case CallPlan::kGeneric:
      break;
  }
  const Expr* target_expr = c.target.get();
  std::string qualified;
  if (target_expr != nullptr && target_expr->kind() == ExprKind::kIdent) {
    const std::string& ns = target_expr->ident().name;
    for (std::string_view n : kNamespaces) {
      if (ns == n && !IsBound(ns)) {
        qualified = ns + "." + c.function;
        fn = qualified;
        target_expr = nullptr;
        break;
      }
    }
  }
  if (target_expr == nullptr && (fn == op::kAdd || fn == op::kMapInsert) && !c.args.empty() &&
      c.args[0]->kind() == ExprKind::kIdent && c.args[0]->ident().name == kAccumulatorVar) {
    if (Value* slot = FindLocalMutable(kAccumulatorVar)) {
      if (!Charge(1)) return Cancelled();  // the identifier
      return EvalAccumulate(c, fn, slot);
    }
  }
  Value target;
  if (target_expr != nullptr) {
    target = Eval(*target_expr);
    if (cancelled_) return Cancelled();
  }
  Args args;
  args.reserve(c.args.size());
  for (const auto& a : c.args) {
    args.push_back(Eval(*a));
    if (cancelled_) return Cancelled();
  }
  if (target_expr != nullptr && target.IsError()) return target;
  for (const Value& a : args) {
    if (a.IsError()) return a;
  }
  return Dispatch(fn, target_expr != nullptr ? &target : nullptr, args);
}

Value Evaluator::EvalList(const Expr& e) {
  const ListExpr& l = e.list();
  if (!Charge(10)) return Cancelled();
  ValueList out;
  out.reserve(l.elements.size());
  size_t next_opt = 0;
  for (size_t i = 0; i < l.elements.size(); ++i) {
    Value v = Eval(*l.elements[i]);
    if (v.IsError()) return v;
    const bool optional = next_opt < l.optional_indices.size() &&
                          l.optional_indices[next_opt] == static_cast<int32_t>(i);
    if (optional) {
      ++next_opt;
      if (v.kind() != ValueKind::kOptional) {
        return Err("cannot initialize optional list element from non-optional value " +
                   v.DebugString());
      }
      if (!v.has_optional_value()) continue;
      out.push_back(v.optional_value());
      continue;
    }
    out.push_back(std::move(v));
  }
  return Value::List(std::move(out));
}

Value Evaluator::EvalMap(const Expr& e) {
  const MapExpr& m = e.map();
  if (!Charge(30)) return Cancelled();
  MapValue out;
  for (const MapEntry& entry : m.entries) {
    Value k = Eval(*entry.key);
    if (k.IsError()) return k;
    Value v = Eval(*entry.value);
    if (v.IsError()) return v;
    if (!MapValue::IsValidKey(k)) return Err("unsupported key type: " + Str(k.TypeName()));
    if (entry.optional) {
      if (v.kind() != ValueKind::kOptional) {
        return Err("cannot initialize optional entry '" + KeyText(k) +
                   "' from non-optional value " + v.DebugString());
      }
      if (!v.has_optional_value()) continue;
      v = v.optional_value();
    }
    if (!out.Insert(k, std::move(v))) {
      return Err("insert failed: key " + KeyText(k) + " already exists");
    }
  }
  return Value::Map(std::move(out));
}

Value Evaluator::EvalComprehension(const Expr& e) {
  const ComprehensionExpr& c = e.comprehension();
  Value range = Eval(*c.iter_range);
  if (range.IsError()) return range;
  if (range.kind() != ValueKind::kList && range.kind() != ValueKind::kMap) {
    return Err("got '" + GoTypeName(range) + "', expected iterable type");
  }
  Value init = Eval(*c.accu_init);
  if (cancelled_) return Cancelled();
  const size_t base = locals_.size();
  locals_.emplace_back(c.accu_var, std::move(init));
  const bool two = !c.iter_var2.empty();
  locals_.emplace_back(c.iter_var, Value());
  if (two) locals_.emplace_back(c.iter_var2, Value());
  auto restore = [&] { locals_.resize(base); };
  const size_t n = range.kind() == ValueKind::kList ? range.list_value().size()
                                                    : range.map_value().entries().size();
  for (size_t i = 0; i < n; ++i) {
    if (range.kind() == ValueKind::kList) {
      const Value& elem = range.list_value()[i];
      if (two) {
        locals_[base + 1].second = Value::Int(static_cast<int64_t>(i));
        locals_[base + 2].second = elem;
      } else {
        locals_[base + 1].second = elem;
      }
    } else {
      const auto& [k, v] = range.map_value().entries()[i];
      locals_[base + 1].second = k;
      if (two) locals_[base + 2].second = v;
    }
    Value cond = Eval(*c.loop_condition);
    if (cancelled_) {
      restore();
      return Cancelled();
    }
    if (IsBool(cond, false)) break;
    if (cond.IsError()) {
      restore();
      return cond;
    }
    Value step = Eval(*c.loop_step);
    if (cancelled_) {
      restore();
      return Cancelled();
    }
    locals_[base].second = std::move(step);
  }
  // The result sees the accumulator but not the iteration variables.
  locals_.resize(base + 1);
  Value result = Eval(*c.result);
  restore();
  return result;
}

Value Evaluator::Matches(const Value& s, const Value& pattern) {
  if (s.kind() != ValueKind::kString || pattern.kind() != ValueKind::kString) {
    return NoSuchOverload("matches", nullptr, {s, pattern});
  }
  const uint64_t str_cost = TraversalCost(1 + s.string_value().size());
  const uint64_t re_cost = (pattern.string_value().size() + 3) / 4;
  if (!Charge(str_cost * re_cost)) return Cancelled();
  if (options_.regex_cache == nullptr) {
    return FromStatusOr<bool>(strings::Matches(s.string_value(), pattern.string_value()), WrapBool);
  }
  std::string error;
  std::shared_ptr<const RE2> re = options_.regex_cache->Get(pattern.string_value(), &error);
  if (re == nullptr) return Err(error);
  const std::string& text = s.string_value();
  return Value::Bool(RE2::PartialMatch(re2::StringPiece(text.data(), text.size()), *re));
}

Value Evaluator::StringMethod(std::string_view fn, const Value& t, Args& args, bool* handled) {
  *handled = true;
  const std::string& s = t.string_value();
  const size_t n = args.size();
  auto is = [&](size_t i, ValueKind k) { return i < n && args[i].kind() == k; };
  auto all_str = [&]() {
    for (const Value& a : args) {
      if (a.kind() != ValueKind::kString) return false;
    }
    return true;
  };
  if (!Charge(TraversalCost(s.size()))) return Cancelled();
  if (fn == "contains" && n == 1 && all_str()) {
    return Value::Bool(strings::Contains(s, args[0].string_value()));
  }
  if (fn == "startsWith" && n == 1 && all_str()) {
    return Value::Bool(strings::StartsWith(s, args[0].string_value()));
  }
  if (fn == "endsWith" && n == 1 && all_str()) {
    return Value::Bool(strings::EndsWith(s, args[0].string_value()));
  }
  if (fn == "matches" && n == 1) return Matches(t, args[0]);
  if (fn == "size" && n == 0) return Value::Int(strings::Size(s));
  if (fn == "charAt" && n == 1 && is(0, ValueKind::kInt)) {
    return FromStatusOr<std::string>(strings::CharAt(s, args[0].int_value()), WrapString);
  }
  if (fn == "indexOf" && is(0, ValueKind::kString)) {
    if (n == 1) return FromStatusOr<int64_t>(strings::IndexOf(s, args[0].string_value()), WrapInt);
    if (n == 2 && is(1, ValueKind::kInt)) {
      return FromStatusOr<int64_t>(strings::IndexOf(s, args[0].string_value(), args[1].int_value()),
                                   WrapInt);
    }
  }
  if (fn == "lastIndexOf" && is(0, ValueKind::kString)) {
    if (n == 1) {
      return FromStatusOr<int64_t>(strings::LastIndexOf(s, args[0].string_value()), WrapInt);
    }
    if (n == 2 && is(1, ValueKind::kInt)) {
      return FromStatusOr<int64_t>(
          strings::LastIndexOf(s, args[0].string_value(), args[1].int_value()), WrapInt);
    }
  }
  if (fn == "lowerAscii" && n == 0) return Value::String(strings::LowerAscii(s));
  if (fn == "upperAscii" && n == 0) return Value::String(strings::UpperAscii(s));
  if (fn == "trim" && n == 0) return Value::String(strings::Trim(s));
  if (fn == "replace" && is(0, ValueKind::kString) && is(1, ValueKind::kString)) {
    if (n == 2) {
      return Value::String(strings::Replace(s, args[0].string_value(), args[1].string_value()));
    }
    if (n == 3 && is(2, ValueKind::kInt)) {
      return Value::String(
          strings::Replace(s, args[0].string_value(), args[1].string_value(), args[2].int_value()));
    }
  }
  if (fn == "split" && is(0, ValueKind::kString)) {
    if (n == 1) return StringList(strings::Split(s, args[0].string_value()));
    if (n == 2 && is(1, ValueKind::kInt)) {
      return StringList(strings::Split(s, args[0].string_value(), args[1].int_value()));
    }
  }
  if (fn == "substring" && is(0, ValueKind::kInt)) {
    if (n == 1) {
      return FromStatusOr<std::string>(strings::Substring(s, args[0].int_value()), WrapString);
    }
    if (n == 2 && is(1, ValueKind::kInt)) {
      return FromStatusOr<std::string>(
          strings::Substring(s, args[0].int_value(), args[1].int_value()), WrapString);
    }
  }
  if (fn == "format" && n == 1 && is(0, ValueKind::kList)) {
    std::vector<strings::FormatArg> fargs;
    for (const Value& a : args[0].list_value()) {
      std::optional<strings::FormatArg> fa = ToFormatArg(a, 0);
      if (!fa.has_value()) return Err("format: argument nests too deeply");
      fargs.push_back(std::move(*fa));
    }
    return FromStatusOr<std::string>(strings::Format(s, fargs), WrapString);
  }
  if (fn == "find" && n == 1 && all_str()) {
    return FromStatusOr<std::string>(strings::Find(s, args[0].string_value()), WrapString);
  }
  if (fn == "findAll" && is(0, ValueKind::kString)) {
    int64_t limit = -1;
    if (n == 2 && is(1, ValueKind::kInt)) {
      limit = args[1].int_value();
    } else if (n != 1) {
      *handled = false;
      return Value();
    }
    absl::StatusOr<std::vector<std::string>> r = strings::FindAll(s, args[0].string_value(), limit);
    if (!r.ok()) return FromStatus(r.status());
    return StringList(std::move(*r));
  }
  *handled = false;
  return Value();
}

Value Evaluator::ListMethod(std::string_view fn, const Value& t, Args& args, bool* handled) {
  *handled = true;
  const ValueList& l = t.list_value();
  const size_t n = args.size();
  if (!Charge(l.size())) return Cancelled();
  if (fn == "size" && n == 0) return Value::Int(static_cast<int64_t>(l.size()));
  if ((fn == "indexOf" || fn == "lastIndexOf") && n == 1) {
    const bool last = fn == "lastIndexOf";
    for (size_t k = 0; k < l.size(); ++k) {
      const size_t i = last ? l.size() - 1 - k : k;
      Value eq = Equals(l[i], args[0]);
      if (eq.IsError()) return eq;
      if (eq.bool_value()) return Value::Int(static_cast<int64_t>(i));
    }
    return Value::Int(-1);
  }
  if (fn == "includes" && n == 1) {
    if (l.size() > kMaxIncludesElements) {
      return Err("includes() supports lists of at most " + std::to_string(kMaxIncludesElements) +
                 " elements, got " + std::to_string(l.size()));
    }
    for (const Value& e : l) {
      Value eq = Equals(e, args[0]);
      if (eq.IsError() || eq.bool_value()) return eq;
    }
    return Value::Bool(false);
  }
  if (fn == "isSorted" && n == 0) {
    for (size_t i = 1; i < l.size(); ++i) {
      if (!Comparable(l[i - 1], l[i])) return NoSuchOverload("isSorted", &t, args);
      const std::optional<int> c = Compare(l[i - 1], l[i]);
      if (c.has_value() && *c > 0) return Value::Bool(false);
    }
    return Value::Bool(true);
  }
  if ((fn == "min" || fn == "max") && n == 0) {
    if (l.empty()) return Err(Str(fn) + " called on empty list");
    const bool is_min = fn == "min";
    Value best = l[0];
    for (size_t i = 1; i < l.size(); ++i) {
      if (!Comparable(best, l[i])) return NoSuchOverload(fn, &t, args);
      const std::optional<int> c = Compare(l[i], best);
      if (c.has_value() && (is_min ? *c < 0 : *c > 0)) best = l[i];
    }
    if (!Comparable(best, best)) return NoSuchOverload(fn, &t, args);
    return best;
  }
  if (fn == "sum" && n == 0) {
    if (l.empty()) return Value::Int(0);
    Value acc = l[0];
    if (acc.kind() != ValueKind::kInt && acc.kind() != ValueKind::kUint &&
        acc.kind() != ValueKind::kDouble) {
      return NoSuchOverload(fn, &t, args);
    }
    for (size_t i = 1; i < l.size(); ++i) {
      acc = Add(acc, l[i]);
      if (acc.IsError()) return acc;
    }
    return acc;
  }
  if (fn == "slice" && n == 2 && args[0].kind() == ValueKind::kInt &&
      args[1].kind() == ValueKind::kInt) {
    const int64_t s = args[0].int_value(), e = args[1].int_value();
    const std::string prefix = "cannot slice(" + IntText(s) + ", " + IntText(e) + "), ";
    if (s < 0 || e < 0) return Err(prefix + "negative indexes not supported");
    if (s > e) return Err(prefix + "start index must be less than or equal to end index");
    if (e > static_cast<int64_t>(l.size())) {
      return Err(prefix + "list is length " + std::to_string(l.size()));
    }
    return Value::List(ValueList(l.begin() + s, l.begin() + e));
  }
  if (fn == "flatten" && (n == 0 || (n == 1 && args[0].kind() == ValueKind::kInt))) {
    const int64_t depth = n == 0 ? 1 : args[0].int_value();
    if (depth < 0) return Err("level must be non-negative");
    // Iterative flattening by levels keeps the recursion bounded.
    ValueList cur = l;
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
      if (!Charge(cur.size())) return Cancelled();
    }
    return Value::List(std::move(cur));
  }
  if (fn == "distinct" && n == 0) {
    ValueList out;
    for (const Value& e : l) {
      if (!Charge(out.size())) return Cancelled();
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
  if (fn == "reverse" && n == 0) return Value::List(ValueList(l.rbegin(), l.rend()));
  if (fn == "sort" && n == 0) {
    for (size_t i = 1; i < l.size(); ++i) {
      if (l[i].kind() != l[0].kind() || !Comparable(l[0], l[i])) {
        return Err("list elements must have the same type");
      }
    }
    if (!l.empty() && !Comparable(l[0], l[0])) return NoSuchOverload(fn, &t, args);
    uint64_t log = 1;
    while ((uint64_t{1} << log) < l.size()) ++log;
    if (!Charge(l.size() * log)) return Cancelled();
    ValueList out = l;
    std::stable_sort(out.begin(), out.end(), [](const Value& a, const Value& b) {
      const std::optional<int> c = Compare(a, b);
      return c.has_value() && *c < 0;
    });
    return Value::List(std::move(out));
  }
  if (fn == "join" && n <= 1) {
    std::vector<std::string> parts;
    parts.reserve(l.size());
    uint64_t total = 0;
    for (const Value& e : l) {
      if (e.kind() != ValueKind::kString) return NoSuchOverload(fn, &t, args);
      parts.push_back(e.string_value());
      total += e.string_value().size();
    }
    if (n == 1 && args[0].kind() != ValueKind::kString) return NoSuchOverload(fn, &t, args);
    if (!Charge(TraversalCost(total))) return Cancelled();
    return Value::String(n == 0 ? strings::Join(parts)
                                : strings::Join(parts, args[0].string_value()));
  }
  *handled = false;
  return Value();
}

Value Evaluator::QuantityMethod(std::string_view fn, const Value& t, Args& args, bool* handled) {
  *handled = true;
  const Quantity& q = t.quantity_value();
  const size_t n = args.size();
  if (fn == "sign" && n == 0) return Value::Int(q.Sign());
  if (fn == "isInteger" && n == 0) {
    return Value::Bool(
        !q.HasFraction() &&
        q.nanos() / Quantity::kNanosPerUnit <= absl::int128(std::numeric_limits<int64_t>::max()) &&
        q.nanos() / Quantity::kNanosPerUnit >= absl::int128(std::numeric_limits<int64_t>::min()));
  }
  if (fn == "asInteger" && n == 0) {
    const absl::int128 units = q.nanos() / Quantity::kNanosPerUnit;
    if (q.HasFraction() || units > absl::int128(std::numeric_limits<int64_t>::max()) ||
        units < absl::int128(std::numeric_limits<int64_t>::min())) {
      return Err("cannot convert value to integer");
    }
    return Value::Int(static_cast<int64_t>(units));
  }
  if (fn == "asApproximateFloat" && n == 0) {
    return Value::Double(static_cast<double>(q.nanos()) /
                         static_cast<double>(Quantity::kNanosPerUnit));
  }
  if (n == 1 && args[0].kind() == ValueKind::kQuantity) {
    const Quantity& o = args[0].quantity_value();
    if (fn == "isGreaterThan") return Value::Bool(q > o);
    if (fn == "isLessThan") return Value::Bool(q < o);
    if (fn == "compareTo") return Value::Int(q < o ? -1 : (q > o ? 1 : 0));
  }
  if ((fn == "add" || fn == "sub") && n == 1 &&
      (args[0].kind() == ValueKind::kQuantity || args[0].kind() == ValueKind::kInt)) {
    const Quantity o = args[0].kind() == ValueKind::kQuantity
                           ? args[0].quantity_value()
                           : Quantity::FromInt(args[0].int_value());
    const Quantity r = fn == "add" ? q + o : q - o;
    const absl::int128 mag = r.nanos() < 0 ? -r.nanos() : r.nanos();
    if (mag > Quantity::MaxMagnitudeNanos()) return Err("quantity overflow");
    return Value::FromQuantity(r);
  }
  *handled = false;
  return Value();
}

Value Evaluator::SemverMethod(std::string_view fn, const Value& t, Args& args, bool* handled) {
  *handled = true;
  const Semver& v = t.semver_value();
  const size_t n = args.size();
  if (n == 0) {
    if (fn == "major") return Value::Int(static_cast<int64_t>(v.major()));
    if (fn == "minor") return Value::Int(static_cast<int64_t>(v.minor()));
    if (fn == "patch") return Value::Int(static_cast<int64_t>(v.patch()));
  }
  if (n == 1 && args[0].kind() == ValueKind::kSemver) {
    const int c = v.Compare(args[0].semver_value());
    if (fn == "isGreaterThan") return Value::Bool(c > 0);
    if (fn == "isLessThan") return Value::Bool(c < 0);
    if (fn == "compareTo") return Value::Int(c);
  }
  *handled = false;
  return Value();
}

Value Evaluator::LibraryMethod(std::string_view fn, const Value& t, Args& args, bool* handled) {
  *handled = true;
  const size_t n = args.size();
  auto is = [&](size_t i, ValueKind k) { return i < n && args[i].kind() == k; };
  switch (t.kind()) {
    case ValueKind::kTimestamp:
      if (IsTimestampAccessor(fn) && (n == 0 || (n == 1 && is(0, ValueKind::kString)))) {
        absl::StatusOr<int64_t> r =
            TimestampAccessor(t.timestamp_value(), fn, n == 0 ? "UTC" : args[0].string_value());
        if (!r.ok()) return FromStatus(r.status());
        return Value::Int(*r);
      }
      break;
    case ValueKind::kDuration:
      if (IsDurationAccessor(fn) && n == 0) {
        return Value::Int(DurationAccessor(t.duration_value(), fn));
      }
      break;
    case ValueKind::kIp: {
      const IpAddress& ip = t.ip_value();
      if (n != 0) break;
      if (fn == "family") return Value::Int(ip.v6 ? 6 : 4);
      if (fn == "isUnspecified") return Value::Bool(IpIsUnspecified(ip));
      if (fn == "isLoopback") return Value::Bool(IpIsLoopback(ip));
      if (fn == "isLinkLocalMulticast") return Value::Bool(IpIsLinkLocalMulticast(ip));
      if (fn == "isLinkLocalUnicast") return Value::Bool(IpIsLinkLocalUnicast(ip));
      if (fn == "isGlobalUnicast") return Value::Bool(IpIsGlobalUnicast(ip));
      break;
    }
    case ValueKind::kCidr: {
      const Cidr& cidr = t.cidr_value();
      if (n == 0) {
        if (fn == "ip") return Value::FromIp(cidr.addr);
        if (fn == "masked") return Value::FromCidr(MaskedCidr(cidr));
        if (fn == "prefixLength") return Value::Int(cidr.bits);
        break;
      }
      if (n != 1) break;
      if (fn == "containsIP" && (is(0, ValueKind::kIp) || is(0, ValueKind::kString))) {
        if (args[0].kind() == ValueKind::kIp)
          return Value::Bool(CidrContainsIp(cidr, args[0].ip_value()));
        if (!Charge(TraversalCost(args[0].string_value().size()))) return Cancelled();
        absl::StatusOr<IpAddress> ip = ParseIp(args[0].string_value());
        if (!ip.ok()) return FromStatus(ip.status());
        return Value::Bool(CidrContainsIp(cidr, *ip));
      }
      if (fn == "containsCIDR" && (is(0, ValueKind::kCidr) || is(0, ValueKind::kString))) {
        if (args[0].kind() == ValueKind::kCidr) {
          return Value::Bool(CidrContainsCidr(cidr, args[0].cidr_value()));
        }
        if (!Charge(TraversalCost(args[0].string_value().size()))) return Cancelled();
        absl::StatusOr<Cidr> other = ParseCidr(args[0].string_value());
        if (!other.ok()) return FromStatus(other.status());
        return Value::Bool(CidrContainsCidr(cidr, *other));
      }
      break;
    }
    case ValueKind::kUrl: {
      const Url& u = t.url_value();
      if (n != 0) break;
      if (fn == "getScheme") return Value::String(u.scheme);
      if (fn == "getHost") return Value::String(u.host);
      if (fn == "getHostname") return Value::String(UrlHostname(u));
      if (fn == "getPort") return Value::String(UrlPort(u));
      if (fn == "getEscapedPath") return Value::String(UrlEscapedPath(u));
      if (fn == "getQuery") {
        MapValue m;
        uint64_t total = 0;
        for (auto& [k, vs] : UrlQuery(u)) {
          ValueList values;
          for (std::string& v : vs) {
            total += v.size();
            values.push_back(Value::String(std::move(v)));
          }
          total += k.size();
          m.Insert(Value::String(std::move(k)), Value::List(std::move(values)));
        }
        if (!Charge(TraversalCost(total))) return Cancelled();
        return Value::Map(std::move(m));
      }
      break;
    }
    case ValueKind::kFormat:
      if (fn == "validate" && n == 1 && is(0, ValueKind::kString)) {
        // Kubernetes' cost: ceil((1 + size) * 0.1) * ceil(regex size * 0.25).
        const uint64_t str_cost = TraversalCost(1 + args[0].string_value().size());
        const uint64_t re_cost = (FormatRegexSize(t.format_name()) + 3) / 4;
        if (!Charge(str_cost * re_cost)) return Cancelled();
        std::vector<std::string> errors = ValidateFormat(t.format_name(), args[0].string_value());
        if (errors.empty()) return Value::OptionalNone();
        return Value::OptionalOf(StringList(std::move(errors)));
      }
      break;
    default:
      break;
  }
  *handled = false;
  return Value();
}

Value Evaluator::LibraryFunction(std::string_view fn, Args& args, bool* handled) {
  *handled = true;
  constexpr std::string_view kFormatPrefix = "format.";
  if (args.empty() && fn.substr(0, kFormatPrefix.size()) == kFormatPrefix &&
      IsFormatName(fn.substr(kFormatPrefix.size()))) {
    return Value::Format(std::string(fn.substr(kFormatPrefix.size())));
  }
  if (args.size() == 1 && args[0].kind() == ValueKind::kString) {
    const std::string& s = args[0].string_value();
    if (fn == "format.named") {
      if (!IsFormatName(s)) return Value::OptionalNone();
      return Value::OptionalOf(Value::Format(s));
    }
    const bool parse = fn == "ip" || fn == "isIP" || fn == "ip.isCanonical" || fn == "cidr" ||
                       fn == "isCIDR" || fn == "url" || fn == "isURL";
    if (parse && !Charge(TraversalCost(s.size()))) return Cancelled();
    if (fn == "ip" || fn == "isIP" || fn == "ip.isCanonical") {
      absl::StatusOr<IpAddress> ip = ParseIp(s);
      if (fn == "isIP") return Value::Bool(ip.ok());
      if (!ip.ok()) return FromStatus(ip.status());
      if (fn == "ip.isCanonical") return Value::Bool(FormatIp(*ip) == s);
      return Value::FromIp(*ip);
    }
    if (fn == "cidr" || fn == "isCIDR") {
      absl::StatusOr<Cidr> cidr = ParseCidr(s);
      if (fn == "isCIDR") return Value::Bool(cidr.ok());
      if (!cidr.ok()) return FromStatus(cidr.status());
      return Value::FromCidr(*cidr);
    }
    if (fn == "url" || fn == "isURL") {
      absl::StatusOr<Url> u = ParseUrl(s);
      if (fn == "isURL") return Value::Bool(u.ok());
      if (!u.ok()) return FromStatus(u.status());
      return Value::FromUrl(*std::move(u));
    }
  }
  *handled = false;
  return Value();
}

Value Evaluator::Dispatch(std::string_view fn, const Value* target, Args& args) {
  const size_t n = args.size();
  if (target != nullptr) {
    const Value& t = *target;
    // Methods every value has.
    if (fn == "includes" && n == 1 && t.kind() != ValueKind::kList) {
      if (!Charge(1)) return Cancelled();
      return Equals(t, args[0]);
    }
    bool handled = false;
    Value r;
    switch (t.kind()) {
      case ValueKind::kString:
        if (!Charge(1)) return Cancelled();
        r = StringMethod(fn, t, args, &handled);
        break;
      case ValueKind::kList:
        if (!Charge(1)) return Cancelled();
        r = ListMethod(fn, t, args, &handled);
        break;
      case ValueKind::kQuantity:
        if (!Charge(1)) return Cancelled();
        r = QuantityMethod(fn, t, args, &handled);
        break;
      case ValueKind::kSemver:
        if (!Charge(1)) return Cancelled();
        r = SemverMethod(fn, t, args, &handled);
        break;
      case ValueKind::kTimestamp:
      case ValueKind::kDuration:
      case ValueKind::kIp:
      case ValueKind::kCidr:
      case ValueKind::kUrl:
      case ValueKind::kFormat:
        if (!Charge(1)) return Cancelled();
        r = LibraryMethod(fn, t, args, &handled);
        break;
      case ValueKind::kBytes:
      case ValueKind::kMap:
        if (fn == "size" && n == 0) {
          if (!Charge(1)) return Cancelled();
          return Value::Int(static_cast<int64_t>(ActualSize(t)));
        }
        break;
      case ValueKind::kOptional:
        if (!Charge(1)) return Cancelled();
        if (fn == "hasValue" && n == 0) return Value::Bool(t.has_optional_value());
        if (fn == "value" && n == 0) {
          if (!t.has_optional_value()) return Err("optional.none() dereference");
          return t.optional_value();
        }
        if (fn == "orValue" && n == 1) return t.has_optional_value() ? t.optional_value() : args[0];
        if (fn == "or" && n == 1 && args[0].kind() == ValueKind::kOptional) {
          return t.has_optional_value() ? t : args[0];
        }
        break;
      default:
        break;
    }
    if (cancelled_) return Cancelled();
    if (handled) return r;
    return NoSuchOverload(fn, target, args);
  }

  // Operators.
  if (n == 2 && (fn == op::kEquals || fn == op::kNotEquals)) {
    return EqualsOp(fn == op::kNotEquals, args[0], args[1]);
  }
  if (n == 2 && (fn == op::kLess || fn == op::kLessEquals || fn == op::kGreater ||
                 fn == op::kGreaterEquals)) {
    if (!Charge(TraversalCost(std::min(ActualSize(args[0]), ActualSize(args[1]))))) {
      return Cancelled();
    }
    if (!Comparable(args[0], args[1])) return NoSuchOverload(fn, nullptr, args);
    const std::optional<int> c = Compare(args[0], args[1]);
    if (!c.has_value()) return Value::Bool(false);  // NaN is unordered
    if (fn == op::kLess) return Value::Bool(*c < 0);
    if (fn == op::kLessEquals) return Value::Bool(*c <= 0);
    if (fn == op::kGreater) return Value::Bool(*c > 0);
    return Value::Bool(*c >= 0);
  }
  if (n == 2 && (fn == op::kAdd || fn == op::kSubtract || fn == op::kMultiply ||
                 fn == op::kDivide || fn == op::kModulo)) {
    uint64_t c = 1;
    if (fn == op::kAdd &&
        (args[0].kind() == ValueKind::kString || args[0].kind() == ValueKind::kBytes ||
         args[0].kind() == ValueKind::kList)) {
      c = TraversalCost(ActualSize(args[0]) + ActualSize(args[1]));
    }
    if (!Charge(c)) return Cancelled();
    return Arith(fn, args[0], args[1]);
  }
  if (n == 1 && fn == op::kNegate) {
    if (!Charge(1)) return Cancelled();
    if (args[0].kind() == ValueKind::kInt) {
      if (args[0].int_value() == std::numeric_limits<int64_t>::min()) {
        return Err("integer overflow");
      }
      return Value::Int(-args[0].int_value());
    }
    if (args[0].kind() == ValueKind::kDouble) return Value::Double(-args[0].double_value());
    return NoSuchOverload(fn, nullptr, args);
  }
  if (n == 1 && fn == op::kLogicalNot) {
    if (!Charge(1)) return Cancelled();
    if (args[0].kind() == ValueKind::kBool) return Value::Bool(!args[0].bool_value());
    return NoSuchOverload(fn, nullptr, args);
  }
  if (n == 2 && (fn == op::kIndex || fn == op::kOptIndex)) {
    if (!Charge(1)) return Cancelled();
    return Index(args[0], args[1], fn == op::kOptIndex);
  }
  if (n == 2 && fn == op::kIn) {
    const Value& elem = args[0];
    const Value& coll = args[1];
    if (coll.kind() == ValueKind::kList) {
      if (!Charge(coll.list_value().size())) return Cancelled();
      for (const Value& e : coll.list_value()) {
        Value eq = Equals(e, elem);
        if (eq.IsError() || eq.bool_value()) return eq;
      }
      return Value::Bool(false);
    }
    if (!Charge(1)) return Cancelled();
    if (coll.kind() == ValueKind::kMap) return Value::Bool(coll.map_value().Contains(elem));
    return NoSuchOverload(fn, nullptr, args);
  }
  if (fn == op::kMapInsert && !args.empty() && args[0].kind() == ValueKind::kMap) {
    if (!Charge(1 + args[0].map_value().size())) return Cancelled();
    MapValue m = args[0].map_value();
    if (n == 3) {
      if (!MapValue::IsValidKey(args[1])) return NoSuchOverload(fn, nullptr, args);
      if (!m.Insert(args[1], args[2])) {
        return Err("insert failed: key " + KeyText(args[1]) + " already exists");
      }
      return Value::Map(std::move(m));
    }
    if (n == 2 && args[1].kind() == ValueKind::kMap) {
      for (const auto& [k, v] : args[1].map_value().entries()) {
        if (!m.Insert(k, v)) return Err("insert failed: key " + KeyText(k) + " already exists");
      }
      return Value::Map(std::move(m));
    }
    return NoSuchOverload(fn, nullptr, args);
  }

  if (!Charge(1)) return Cancelled();
  // Global functions.
  if (n == 1 &&
      (fn == "int" || fn == "uint" || fn == "double" || fn == "string" || fn == "bool" ||
       fn == "bytes" || fn == "type" || fn == "dyn" || fn == "timestamp" || fn == "duration")) {
    if (fn == "string" || fn == "bytes") {
      if (!Charge(TraversalCost(ActualSize(args[0])))) return Cancelled();
    }
    return Convert(fn, args[0]);
  }
  if (fn == "size" && n == 1) {
    switch (args[0].kind()) {
      case ValueKind::kString:
        return Value::Int(strings::Size(args[0].string_value()));
      case ValueKind::kBytes:
      case ValueKind::kList:
      case ValueKind::kMap:
        return Value::Int(static_cast<int64_t>(ActualSize(args[0])));
      default:
        return NoSuchOverload(fn, nullptr, args);
    }
  }
  if (fn == "matches" && n == 2) return Matches(args[0], args[1]);
  if (fn == "quantity" && n == 1 && args[0].kind() == ValueKind::kString) {
    absl::StatusOr<Quantity> q = ParseQuantity(args[0].string_value());
    if (!q.ok()) return FromStatus(q.status());
    return Value::FromQuantity(std::move(*q));
  }
  if (fn == "isQuantity" && n == 1 && args[0].kind() == ValueKind::kString) {
    return Value::Bool(ParseQuantity(args[0].string_value()).ok());
  }
  if ((fn == "semver" || fn == "isSemver") && (n == 1 || n == 2) &&
      args[0].kind() == ValueKind::kString && (n == 1 || args[1].kind() == ValueKind::kBool)) {
    const bool normalize = n == 2 && args[1].bool_value();
    std::optional<Semver> v = Semver::Parse(args[0].string_value(), normalize);
    if (fn == "isSemver") return Value::Bool(v.has_value());
    if (!v.has_value()) return Err("invalid semver: " + args[0].string_value());
    return Value::FromSemver(std::move(*v));
  }
  {
    bool handled = false;
    Value r = LibraryFunction(fn, args, &handled);
    if (cancelled_) return Cancelled();
    if (handled) return r;
  }
  if (fn == "optional.of" && n == 1) return Value::OptionalOf(args[0]);
  if (fn == "optional.none" && n == 0) return Value::OptionalNone();
  if (fn == "optional.ofNonZeroValue" && n == 1) {
    return IsZeroValue(args[0]) ? Value::OptionalNone() : Value::OptionalOf(args[0]);
  }
  if (fn == "strings.quote" && n == 1 && args[0].kind() == ValueKind::kString) {
    if (!Charge(TraversalCost(args[0].string_value().size()))) return Cancelled();
    return Value::String(strings::Quote(args[0].string_value()));
  }
  if (fn == "lists.range" && n == 1 && args[0].kind() == ValueKind::kInt) {
    const int64_t count = std::max<int64_t>(0, args[0].int_value());
    if (!Charge(static_cast<uint64_t>(count))) return Cancelled();
    ValueList out;
    out.reserve(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) out.push_back(Value::Int(i));
    return Value::List(std::move(out));
  }
  if ((fn == "sets.contains" || fn == "sets.equivalent" || fn == "sets.intersects") && n == 2 &&
      args[0].kind() == ValueKind::kList && args[1].kind() == ValueKind::kList) {
    const ValueList& a = args[0].list_value();
    const ValueList& b = args[1].list_value();
    if (!Charge(static_cast<uint64_t>(a.size()) * b.size())) return Cancelled();
    // Every element of `sub` equals some element of `super`.
    auto contains_all = [](const ValueList& super, const ValueList& sub) -> Value {
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
    };
    if (fn == "sets.contains") return contains_all(a, b);
    if (fn == "sets.equivalent") {
      Value r = contains_all(a, b);
      if (r.IsError() || !r.bool_value()) return r;
      return contains_all(b, a);
    }
    for (const Value& x : a) {
      for (const Value& y : b) {
        Value eq = Equals(x, y);
        if (eq.IsError() || eq.bool_value()) return eq;
      }
    }
    return Value::Bool(false);
  }
  return NoSuchOverload(fn, nullptr, args);
}

}  // namespace

Value ConstantValue(const Constant& c) {
  switch (c.kind()) {
    case ConstantKind::kNull:
      return Value::Null();
    case ConstantKind::kBool:
      return Value::Bool(c.bool_value());
    case ConstantKind::kInt:
      return Value::Int(c.int_value());
    case ConstantKind::kUint:
      return Value::Uint(c.uint_value());
    case ConstantKind::kDouble:
      return Value::Double(c.double_value());
    case ConstantKind::kString:
      return Value::String(c.string_value());
    case ConstantKind::kBytes:
      return Value::Bytes(c.bytes_value());
  }
  return Value::Null();
}

namespace {

struct PlanOut {
  std::vector<std::optional<Value>>* values;
  std::vector<std::optional<Value>>* fields;
  std::vector<CallPlan>* plans;
  std::vector<std::optional<Value>>* folded;
  std::vector<uint64_t>* folded_costs;
};

// A global call whose value depends on its literal arguments only (see CallPlan::kFolded).
bool Foldable(const CallExpr& c) {
  static constexpr std::string_view kPure[] = {"quantity", "isQuantity", "semver",    "isSemver",
                                               "ip",       "isIP",       "cidr",      "isCIDR",
                                               "url",      "isURL",      "timestamp", "duration"};
  if (c.target != nullptr || c.args.empty()) return false;
  if (std::find(std::begin(kPure), std::end(kPure), c.function) == std::end(kPure)) return false;
  for (const auto& a : c.args) {
    if (a->kind() != ExprKind::kConstant) return false;
  }
  return true;
}

// Visits every node; the tree height is bounded by the parser, so recursion is bounded.
void CollectPlan(const Expr& e, const PlanOut& out) {
  const bool in_range = e.id() > 0 && static_cast<size_t>(e.id()) < out.values->size();
  switch (e.kind()) {
    case ExprKind::kConstant:
      if (in_range) (*out.values)[e.id()] = ConstantValue(e.constant());
      return;
    case ExprKind::kIdent:
      return;
    case ExprKind::kSelect:
      if (in_range) (*out.fields)[e.id()] = Value::String(e.select().field);
      CollectPlan(*e.select().operand, out);
      return;
    case ExprKind::kCall:
      if (in_range) {
        (*out.plans)[e.id()] = PlanCall(e.call());
        if (Foldable(e.call())) {
          // Evaluate it once, unplanned and without variables or limit, as every run would.
          const Activation no_vars;
          const EvalOptions unlimited{.cost_limit = std::numeric_limits<uint64_t>::max()};
          Evaluator evaluator(no_vars, unlimited);
          (*out.folded)[e.id()] = evaluator.Eval(e);
          (*out.folded_costs)[e.id()] = evaluator.cost();
          (*out.plans)[e.id()] = CallPlan::kFolded;
        }
      }
      if (e.call().target != nullptr) CollectPlan(*e.call().target, out);
      for (const auto& a : e.call().args) CollectPlan(*a, out);
      return;
    case ExprKind::kList:
      for (const auto& el : e.list().elements) CollectPlan(*el, out);
      return;
    case ExprKind::kMap:
      for (const auto& entry : e.map().entries) {
        CollectPlan(*entry.key, out);
        CollectPlan(*entry.value, out);
      }
      return;
    case ExprKind::kComprehension: {
      const ComprehensionExpr& c = e.comprehension();
      for (const Expr* sub : {c.iter_range.get(), c.accu_init.get(), c.loop_condition.get(),
                              c.loop_step.get(), c.result.get()}) {
        CollectPlan(*sub, out);
      }
      return;
    }
  }
}

}  // namespace

CallPlan PlanCall(const CallExpr& call) {
  const std::string& fn = call.function;
  const size_t n = call.args.size();
  if (fn == op::kLogicalAnd) return CallPlan::kAnd;
  if (fn == op::kLogicalOr) return CallPlan::kOr;
  if (fn == op::kConditional && n == 3) return CallPlan::kConditional;
  if (fn == op::kNotStrictlyFalse && n == 1) return CallPlan::kNotStrictlyFalse;
  if (call.target == nullptr && n == 2) {
    if (fn == op::kEquals) return CallPlan::kEquals;
    if (fn == op::kNotEquals) return CallPlan::kNotEquals;
    if (fn == op::kIndex) return CallPlan::kIndex;
  }
  return CallPlan::kGeneric;
}

ConstantTable::ConstantTable(const Ast& ast)
    : values_(static_cast<size_t>(ast.max_id()) + 1),
      fields_(values_.size()),
      plans_(values_.size(), CallPlan::kGeneric),
      folded_(values_.size()),
      folded_costs_(values_.size(), 0) {
  CollectPlan(ast.root(), PlanOut{&values_, &fields_, &plans_, &folded_, &folded_costs_});
}

EvalResult Evaluate(const Ast& ast, const Activation& vars, const EvalOptions& options) {
  Evaluator evaluator(vars, options);
  EvalResult result;
  result.value = evaluator.Eval(ast.root());
  if (evaluator.cancelled()) result.value = Value::Error(std::string(kCostLimitExceeded));
  result.cost = evaluator.cost();
  return result;
}

}  // namespace qm::cel
