#include "cel/dra_env.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/semver.h"

namespace qm::cel {
namespace {

// Kubernetes' parseQualifiedName: "domain/id", or the default domain for a bare id.
std::pair<std::string, std::string> SplitQualifiedName(const std::string& name,
                                                       const std::string& default_domain) {
  const size_t sep = name.find('/');
  if (sep == std::string::npos) return {default_domain, name};
  return {name.substr(0, sep), name.substr(sep + 1)};
}

absl::Status Unsupported(const std::string& name) {
  return absl::InvalidArgumentError("attribute " + name + ": unsupported attribute value");
}

absl::StatusOr<Value> VersionValue(const std::string& name, const std::string& text) {
  std::optional<Semver> v = Semver::Parse(text);
  if (!v.has_value()) {
    return absl::InvalidArgumentError("attribute " + name + ": invalid semantic version " +
                                      QuoteString(text));
  }
  return Value::FromSemver(std::move(*v));
}

absl::StatusOr<Value> AttributeToValue(const std::string& name, const AttributeValue& attr) {
  struct Visitor {
    const std::string& name;
    absl::StatusOr<Value> operator()(std::monostate) const { return Unsupported(name); }
    absl::StatusOr<Value> operator()(int64_t v) const { return Value::Int(v); }
    absl::StatusOr<Value> operator()(bool v) const { return Value::Bool(v); }
    absl::StatusOr<Value> operator()(const std::string& v) const { return Value::String(v); }
    absl::StatusOr<Value> operator()(const VersionString& v) const {
      return VersionValue(name, v.value);
    }
    absl::StatusOr<Value> operator()(const std::vector<int64_t>& v) const {
      if (v.empty()) return Unsupported(name);
      ValueList out;
      for (int64_t x : v) out.push_back(Value::Int(x));
      return Value::List(std::move(out));
    }
    absl::StatusOr<Value> operator()(const std::vector<bool>& v) const {
      if (v.empty()) return Unsupported(name);
      ValueList out;
      for (bool x : v) out.push_back(Value::Bool(x));
      return Value::List(std::move(out));
    }
    absl::StatusOr<Value> operator()(const std::vector<std::string>& v) const {
      if (v.empty()) return Unsupported(name);
      ValueList out;
      for (const std::string& x : v) out.push_back(Value::String(x));
      return Value::List(std::move(out));
    }
    absl::StatusOr<Value> operator()(const std::vector<VersionString>& v) const {
      if (v.empty()) return Unsupported(name);
      ValueList out;
      for (const VersionString& x : v) {
        absl::StatusOr<Value> s = VersionValue(name, x.value);
        if (!s.ok()) return s.status();
        out.push_back(std::move(*s));
      }
      return Value::List(std::move(out));
    }
  };
  return std::visit(Visitor{name}, attr);
}

// Groups (domain, id) -> value into map<domain, map<id, value>> whose missing domains read as
// empty maps.
Value DomainMap(std::map<std::string, std::map<std::string, Value>> grouped) {
  MapValue outer;
  for (auto& [domain, ids] : grouped) {
    MapValue inner;
    for (auto& [id, v] : ids) inner.Insert(Value::String(id), std::move(v));
    outer.Insert(Value::String(domain), Value::Map(std::move(inner)));
  }
  outer.set_default_value(Value::Map(MapValue()));
  return Value::Map(std::move(outer));
}

}  // namespace

absl::StatusOr<Value> BuildDeviceValue(const DeviceInput& device) {
  std::map<std::string, std::map<std::string, Value>> attributes;
  for (const auto& [name, attr] : device.attributes) {
    absl::StatusOr<Value> v = AttributeToValue(name, attr);
    if (!v.ok()) return v.status();
    auto [domain, id] = SplitQualifiedName(name, device.driver);
    attributes[domain][id] = std::move(*v);
  }
  std::map<std::string, std::map<std::string, Value>> capacity;
  for (const auto& [name, q] : device.capacity) {
    auto [domain, id] = SplitQualifiedName(name, device.driver);
    capacity[domain][id] = Value::FromQuantity(q);
  }
  MapValue m;
  m.Insert(Value::String("driver"), Value::String(device.driver));
  m.Insert(Value::String("attributes"), DomainMap(std::move(attributes)));
  m.Insert(Value::String("capacity"), DomainMap(std::move(capacity)));
  m.Insert(Value::String("allowMultipleAllocations"),
           Value::Bool(device.allow_multiple_allocations));
  return Value::Map(std::move(m));
}

absl::StatusOr<bool> MatchesValue(const Ast& ast, const Value& device, uint64_t cost_limit,
                                  RegexCache* regex_cache, const ConstantTable* constants) {
  Activation vars;
  vars.Insert("device", device);
  EvalOptions options;
  options.cost_limit = cost_limit;
  options.regex_cache = regex_cache;
  options.constants = constants;
  const EvalResult result = Evaluate(ast, vars, options);
  if (!result.ok()) {
    std::string message = result.error();
    if (message.rfind("no such key: ", 0) == 0) message += kNoSuchKeyHint;
    return absl::InvalidArgumentError(message);
  }
  if (result.value.kind() != ValueKind::kBool) {
    return absl::InvalidArgumentError("CEL result of type " + std::string(result.value.TypeName()) +
                                      " could not be converted to bool");
  }
  return result.value.bool_value();
}

absl::StatusOr<bool> Matches(const Ast& ast, const DeviceInput& device, uint64_t cost_limit,
                             RegexCache* regex_cache) {
  absl::StatusOr<Value> value = BuildDeviceValue(device);
  if (!value.ok()) return value.status();
  return MatchesValue(ast, *value, cost_limit, regex_cache);
}

}  // namespace qm::cel
