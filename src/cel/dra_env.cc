#include "cel/dra_env.h"

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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

// The default of every domain map: an unknown domain reads as an empty map. One for all maps.
const std::shared_ptr<const Value>& EmptyMapDefault() {
  static const auto* const v =
      new std::shared_ptr<const Value>(std::make_shared<const Value>(Value::Map(MapValue())));
  return *v;
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
  outer.set_default_value(EmptyMapDefault());
  return Value::Map(std::move(outer));
}

}  // namespace

// What a DeviceValueBuilder shares between devices. Every value is interned under a key that
// determines it exactly (a kind letter and its text), and gets a small id; a map is interned
// under the ids of its keys and values, so equal maps are found without comparing values.
struct DeviceValueBuilder::Shared {
  struct Interned {
    Value value;
    uint32_t id = 0;
  };

  // The interned value under `key`, made by `make` the first time.
  template <typename Make>
  absl::StatusOr<const Interned*> Intern(std::string key, Make make) {
    auto it = values.find(key);
    if (it != values.end()) return &it->second;
    absl::StatusOr<Value> v = make();
    if (!v.ok()) return v.status();
    const uint32_t id = static_cast<uint32_t>(values.size());
    return &values.emplace(std::move(key), Interned{std::move(*v), id}).first->second;
  }

  const Interned& String(const std::string& s) {
    return **Intern(absl::StrCat("s", s),
                    [&]() -> absl::StatusOr<Value> { return Value::String(s); });
  }

  absl::StatusOr<const Interned*> Attribute(const std::string& name, const AttributeValue& attr) {
    std::string key = AttributeKey(attr);
    if (key.empty()) return Unsupported(name);
    return Intern(std::move(key), [&] { return AttributeToValue(name, attr); });
  }

  // The key an attribute value is interned under ("" for one without a value, which does not
  // build). Texts in lists are length-prefixed, so different lists never share a key.
  static std::string AttributeKey(const AttributeValue& attr) {
    struct Visitor {
      std::string operator()(std::monostate) const { return ""; }
      std::string operator()(int64_t v) const { return absl::StrCat("i", v); }
      std::string operator()(bool v) const { return v ? "b1" : "b0"; }
      std::string operator()(const std::string& v) const { return absl::StrCat("s", v); }
      std::string operator()(const VersionString& v) const { return absl::StrCat("v", v.value); }
      std::string operator()(const std::vector<int64_t>& v) const {
        std::string out = "I";
        for (int64_t x : v) absl::StrAppend(&out, x, ",");
        return out;
      }
      std::string operator()(const std::vector<bool>& v) const {
        std::string out = "B";
        for (bool x : v) out.push_back(x ? '1' : '0');
        return out;
      }
      std::string operator()(const std::vector<std::string>& v) const {
        std::string out = "S";
        for (const auto& x : v) absl::StrAppend(&out, x.size(), ":", x);
        return out;
      }
      std::string operator()(const std::vector<VersionString>& v) const {
        std::string out = "V";
        for (const auto& x : v) absl::StrAppend(&out, x.value.size(), ":", x.value);
        return out;
      }
    };
    return std::visit(Visitor{}, attr);
  }

  const Interned& QuantityValue(const Quantity& q) {
    return **Intern(absl::StrCat("q", static_cast<int>(q.format()), q.String()),
                    [&]() -> absl::StatusOr<Value> { return Value::FromQuantity(q); });
  }

  // One domain's map from (interned id, interned value) pairs, shared with equal ones.
  Value DomainEntries(const std::vector<std::pair<const Interned*, const Interned*>>& entries) {
    std::string key;
    key.reserve(entries.size() * 8);
    for (const auto& [k, v] : entries) {
      key.append(reinterpret_cast<const char*>(&k->id), sizeof(uint32_t));
      key.append(reinterpret_cast<const char*>(&v->id), sizeof(uint32_t));
    }
    auto it = maps.find(key);
    if (it != maps.end()) return it->second;
    MapValue inner;
    inner.reserve(entries.size());
    for (const auto& [k, v] : entries) inner.Insert(k->value, v->value);
    return maps.emplace(std::move(key), Value::Map(std::move(inner))).first->second;
  }

  // The domain map of a device: domain -> (id -> value), missing domains read as empty maps;
  // shared with devices whose domains hold the same (shared) maps.
  Value Domains(const std::map<std::string,
                               std::vector<std::pair<const Interned*, const Interned*>>>& grouped) {
    std::vector<std::pair<const Interned*, Value>> domains;
    domains.reserve(grouped.size());
    std::string key;
    key.reserve(grouped.size() * (sizeof(uint32_t) + sizeof(const void*)));
    for (const auto& [domain, entries] : grouped) {
      const Interned& d = String(domain);
      Value inner = DomainEntries(entries);
      // Every inner map lives in `maps` as long as this builder, so its address identifies it.
      const void* payload = &inner.map_value();
      key.append(reinterpret_cast<const char*>(&d.id), sizeof(uint32_t));
      key.append(reinterpret_cast<const char*>(&payload), sizeof(payload));
      domains.emplace_back(&d, std::move(inner));
    }
    auto it = domain_maps.find(key);
    if (it != domain_maps.end()) return it->second;
    MapValue outer;
    outer.reserve(domains.size());
    for (auto& [d, inner] : domains) outer.Insert(d->value, std::move(inner));
    outer.set_default_value(EmptyMapDefault());
    return domain_maps.emplace(std::move(key), Value::Map(std::move(outer))).first->second;
  }

  std::unordered_map<std::string, Interned> values;
  std::unordered_map<std::string, Value> maps;  // by the ids of their keys and values
  // Domain maps by their domains' ids and inner maps' addresses.
  std::unordered_map<std::string, Value> domain_maps;
  // Device values by their driver's id and their domain maps' addresses.
  std::unordered_map<std::string, Value> devices;
};

DeviceValueBuilder::DeviceValueBuilder() : shared_(std::make_unique<Shared>()) {}
DeviceValueBuilder::~DeviceValueBuilder() = default;

absl::StatusOr<Value> DeviceValueBuilder::Build(const DeviceInput& device) {
  using Entries = std::vector<std::pair<const Shared::Interned*, const Shared::Interned*>>;
  Shared& s = *shared_;
  std::map<std::string, Entries> attributes;
  for (const auto& [name, attr] : device.attributes) {
    absl::StatusOr<const Shared::Interned*> v = s.Attribute(name, attr);
    if (!v.ok()) return v.status();
    auto [domain, id] = SplitQualifiedName(name, device.driver);
    attributes[domain].emplace_back(&s.String(id), *v);
  }
  std::map<std::string, Entries> capacity;
  for (const auto& [name, q] : device.capacity) {
    auto [domain, id] = SplitQualifiedName(name, device.driver);
    capacity[domain].emplace_back(&s.String(id), &s.QuantityValue(q));
  }
  // BuildDeviceValue's maps hold each domain's ids in order, and of two names for one id
  // ("gpu.nvidia.com/a" and "a" under driver gpu.nvidia.com) the later one; these come in name
  // order, which differs when qualified and bare names of one domain mix.
  for (auto* grouped : {&attributes, &capacity}) {
    for (auto& [domain, entries] : *grouped) {
      auto id_less = [](const auto& a, const auto& b) {
        return a.first->value.string_value() < b.first->value.string_value();
      };
      std::stable_sort(entries.begin(), entries.end(), id_less);
      Entries unique;
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i + 1 < entries.size() && entries[i].first == entries[i + 1].first) continue;
        unique.push_back(entries[i]);
      }
      entries = std::move(unique);
    }
  }
  const Shared::Interned& driver = s.String(device.driver);
  Value attribute_map = s.Domains(attributes);
  Value capacity_map = s.Domains(capacity);
  // Devices that differ only in name (no uuid or bus id among their attributes) share one value.
  std::string key;
  const void* payloads[] = {&attribute_map.map_value(), &capacity_map.map_value()};
  key.append(reinterpret_cast<const char*>(&driver.id), sizeof(uint32_t));
  key.append(reinterpret_cast<const char*>(payloads), sizeof(payloads));
  key.push_back(device.allow_multiple_allocations ? '1' : '0');
  auto it = s.devices.find(key);
  if (it != s.devices.end()) return it->second;
  MapValue m;
  m.reserve(4);
  m.Insert(s.String("driver").value, driver.value);
  m.Insert(s.String("attributes").value, std::move(attribute_map));
  m.Insert(s.String("capacity").value, std::move(capacity_map));
  m.Insert(s.String("allowMultipleAllocations").value,
           Value::Bool(device.allow_multiple_allocations));
  return s.devices.emplace(std::move(key), Value::Map(std::move(m))).first->second;
}

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
