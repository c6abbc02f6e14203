#pragma once

// Runtime values of the CEL evaluator (cel/interpreter.h).
//
// A Value is one of: null, bool, int (int64), uint (uint64), double, string (UTF-8), bytes, list,
// map, optional (empty or holding a value), Kubernetes Quantity, Semver, a type value (what
// `type(x)` and the identifiers `int`, `string`, ... evaluate to) or an error.
//
// Errors are values, as in cel-go: a runtime error (division by zero, missing key, ...) travels
// up the tree like any other result so that `&&`, `||` and the `all`/`exists` macros can absorb
// it when the other operand decides the outcome. Every strict function returns the first error
// among its arguments.
//
// Values are immutable and cheap to copy: scalars are stored inline, everything else in a shared,
// immutable payload (copying is one reference-count increment). A Value may be read from many
// threads at once.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cel/net_lib.h"
#include "cel/time_lib.h"
#include "common/quantity.h"
#include "common/semver.h"

namespace qm::cel {

enum class ValueKind {
  kNull,
  kBool,
  kInt,
  kUint,
  kDouble,
  kString,
  kBytes,
  kList,
  kMap,
  kOptional,
  kQuantity,
  kSemver,
  kType,
  kError,
  kTimestamp,  // google.protobuf.Timestamp
  kDuration,   // google.protobuf.Duration (int64 nanoseconds)
  kIp,         // net.IP
  kCidr,       // net.CIDR
  kUrl,        // kubernetes.URL
  kFormat,     // kubernetes.NamedFormat (library.Format; the format's name)
};

class Value;
class MapValue;

using ValueList = std::vector<Value>;

class Value {
 public:
  // Null.
  Value() = default;

  static Value Null() { return Value(); }
  static Value Bool(bool v);
  static Value Int(int64_t v);
  static Value Uint(uint64_t v);
  static Value Double(double v);
  static Value String(std::string v);
  static Value Bytes(std::string v);
  static Value List(ValueList elements);
  static Value Map(MapValue map);
  static Value OptionalNone();
  static Value OptionalOf(Value v);
  static Value FromQuantity(Quantity q);
  static Value FromSemver(Semver v);
  static Value FromTimestamp(Timestamp t);
  static Value Duration(int64_t nanos);
  static Value FromIp(IpAddress ip);
  static Value FromCidr(Cidr cidr);
  static Value FromUrl(Url url);
  // A library.Format value; `name` is one of the names format.named() accepts.
  static Value Format(std::string name);
  // A type value; `name` is the CEL type name ("int", "list", "kubernetes.Quantity", ...).
  static Value Type(std::string name);
  // A runtime error with cel-go's message text.
  static Value Error(std::string message);

  ValueKind kind() const { return kind_; }
  bool IsError() const { return kind_ == ValueKind::kError; }

  // Each accessor REQUIRES the matching kind(). String-like accessors serve kString, kBytes,
  // kType (the type name) and kError (the message).
  bool bool_value() const { return scalar_.b; }
  int64_t int_value() const { return scalar_.i; }
  uint64_t uint_value() const { return scalar_.u; }
  double double_value() const { return scalar_.d; }
  const std::string& string_value() const { return *static_cast<const std::string*>(ptr_.get()); }
  const std::string& bytes_value() const { return string_value(); }
  const std::string& type_name() const { return string_value(); }
  const std::string& error_message() const { return string_value(); }
  const ValueList& list_value() const { return *static_cast<const ValueList*>(ptr_.get()); }
  const MapValue& map_value() const { return *static_cast<const MapValue*>(ptr_.get()); }
  // kOptional: true when a value is present.
  bool has_optional_value() const { return ptr_ != nullptr; }
  // kOptional with has_optional_value().
  const Value& optional_value() const { return *static_cast<const Value*>(ptr_.get()); }
  const Quantity& quantity_value() const { return *static_cast<const Quantity*>(ptr_.get()); }
  const Semver& semver_value() const { return *static_cast<const Semver*>(ptr_.get()); }
  const Timestamp& timestamp_value() const { return *static_cast<const Timestamp*>(ptr_.get()); }
  // kDuration: nanoseconds.
  int64_t duration_value() const { return scalar_.i; }
  const IpAddress& ip_value() const { return *static_cast<const IpAddress*>(ptr_.get()); }
  const Cidr& cidr_value() const { return *static_cast<const Cidr*>(ptr_.get()); }
  const Url& url_value() const { return *static_cast<const Url*>(ptr_.get()); }
  // kFormat: the format's name.
  const std::string& format_name() const { return string_value(); }

  // The CEL name of this value's type: "null_type", "bool", "int", "uint", "double", "string",
  // "bytes", "list", "map", "optional_type", "kubernetes.Quantity", "kubernetes.Semver", "type",
  // "error", "google.protobuf.Timestamp", "google.protobuf.Duration", "net.IP", "net.CIDR",
  // "kubernetes.URL", "kubernetes.NamedFormat".
  std::string_view TypeName() const;

  // A CEL-like rendering for tests and messages: 1, 2u, 1.5, "s", b"x", [1, 2], {"k": 1},
  // optional.of(1), optional.none(), quantity("1Gi"), semver("1.2.3"), int, error("msg"),
  // timestamp("2024-01-02T03:04:05Z"), duration("90s"), ip("10.0.0.1"), cidr("10.0.0.0/8"),
  // url("https://x"), format.named("dns1123Label").
  std::string DebugString() const;

  // Internal: true when this list/map payload is referenced by this Value only, so the evaluator
  // may append to an accumulator in place.
  bool UniquePayload() const { return ptr_ != nullptr && ptr_.use_count() == 1; }
  ValueList* MutableListForUniqueOwner() { return static_cast<ValueList*>(mutable_ptr()); }
  MapValue* MutableMapForUniqueOwner() { return static_cast<MapValue*>(mutable_ptr()); }

 private:
  void* mutable_ptr() { return const_cast<void*>(ptr_.get()); }

  ValueKind kind_ = ValueKind::kNull;
  union Scalar {
    bool b;
    int64_t i;
    uint64_t u;
    double d;
  } scalar_{.u = 0};
  std::shared_ptr<const void> ptr_;
};

// CEL equality (heterogeneous, as cel-go with Kubernetes' options): numbers compare by value
// across int/uint/double; lists and maps compare deeply; values of different non-numeric types
// are unequal. Returns an error value if either side is an error (the left one first), or if the
// values nest deeper than 1000 levels; otherwise a bool value.
Value Equals(const Value& a, const Value& b);

// Ordering for `<`, `<=`, `>`, `>=`: -1, 0, 1, or nullopt when the values are not ordered
// against each other (different non-numeric types, or NaN). Supports int/uint/double (across
// types), string, bytes, bool, timestamp and duration.
std::optional<int> Compare(const Value& a, const Value& b);
// True when Compare() is defined for this pair of kinds.
bool Comparable(const Value& a, const Value& b);

// A map with CEL key semantics: keys are bool, int, uint or string; int and uint keys are equal
// when numerically equal (and a double with an integral value finds the same entry). Entries
// keep insertion order. A map may carry a default value returned by Find() for missing keys
// (Kubernetes' attribute/capacity maps, where an unknown domain is an empty map); Contains() (the
// `in` operator) still reports only real keys.
class MapValue {
 public:
  MapValue() = default;
  MapValue(const MapValue& other);
  MapValue& operator=(const MapValue& other);
  MapValue(MapValue&&) noexcept = default;
  MapValue& operator=(MapValue&&) noexcept = default;
  ~MapValue();

  // Adds an entry. Returns false (and changes nothing) when the key is already present or is not
  // a valid key type.
  bool Insert(Value key, Value value);
  // The value for `key`, the default value when absent and a default is set, or null.
  const Value* Find(const Value& key) const;
  bool Contains(const Value& key) const { return FindEntry(key) != nullptr; }
  size_t size() const { return entries_.size(); }
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }

  void reserve(size_t n) { entries_.reserve(n); }

  void set_default_value(Value v) { default_ = std::make_shared<const Value>(std::move(v)); }
  // As above, sharing one default between many maps (a fleet's device values).
  void set_default_value(std::shared_ptr<const Value> v) { default_ = std::move(v); }

  // True when `key` may be a map key (bool, int, uint, string).
  static bool IsValidKey(const Value& key);

 private:
  const Value* FindEntry(const Value& key) const;

  // Key -> entry index: string keys by a view of the key's own (immutable, shared) text, other
  // keys encoded.
  struct Index {
    std::unordered_map<std::string_view, size_t> strings;
    std::unordered_map<std::string, size_t> others;
  };

  std::vector<std::pair<Value, Value>> entries_;
  // Built once the map grows past a few entries (smaller maps are searched in order). Behind a
  // pointer: a fleet holds a few maps per device, nearly all of them small, and two empty hash
  // maps would triple each one's size.
  std::unique_ptr<Index> index_;
  std::shared_ptr<const Value> default_;
};

}  // namespace qm::cel
