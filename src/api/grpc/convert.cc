#include "api/grpc/convert.h"

#include <algorithm>
#include <cstdio>

#include "model/json/stored.h"
#include "model/json/write.h"

namespace qm::api::nodeapi {
namespace {

using nlohmann::json;

json AttributeJson(const v1::AttributeValue& v) {
  switch (v.value_case()) {
    case v1::AttributeValue::kIntValue:
      return {{"int", v.int_value()}};
    case v1::AttributeValue::kBoolValue:
      return {{"bool", v.bool_value()}};
    case v1::AttributeValue::kStringValue:
      return {{"string", v.string_value()}};
    case v1::AttributeValue::kVersionValue:
      return {{"version", v.version_value()}};
    case v1::AttributeValue::VALUE_NOT_SET:
      break;
  }
  return json::object();
}

json CountersJson(const google::protobuf::Map<std::string, std::string>& counters) {
  json out = json::object();
  for (const auto& [name, value] : counters) out[name] = {{"value", value}};
  return out;
}

json CapacityJson(const v1::Capacity& c) {
  json out = {{"value", c.value()}};
  if (c.has_request_policy()) {
    const auto& p = c.request_policy();
    json policy = json::object();
    if (!p.default_value().empty()) policy["default"] = p.default_value();
    if (p.valid_values_size() > 0) {
      policy["validValues"] =
          json(std::vector<std::string>(p.valid_values().begin(), p.valid_values().end()));
    }
    if (p.has_valid_range()) {
      json range = {{"min", p.valid_range().min()}};
      if (!p.valid_range().max().empty()) range["max"] = p.valid_range().max();
      if (!p.valid_range().step().empty()) range["step"] = p.valid_range().step();
      policy["validRange"] = std::move(range);
    }
    out["requestPolicy"] = std::move(policy);
  }
  return out;
}

json DeviceJson(const v1::Device& d) {
  json out = {{"name", d.name()}};
  if (!d.attributes().empty()) {
    json attrs = json::object();
    for (const auto& [key, value] : d.attributes()) attrs[key] = AttributeJson(value);
    out["attributes"] = std::move(attrs);
  }
  if (!d.capacity().empty()) {
    json cap = json::object();
    for (const auto& [key, value] : d.capacity()) cap[key] = CapacityJson(value);
    out["capacity"] = std::move(cap);
  }
  if (d.consumes_counters_size() > 0) {
    json list = json::array();
    for (const auto& c : d.consumes_counters()) {
      list.push_back({{"counterSet", c.counter_set()}, {"counters", CountersJson(c.counters())}});
    }
    out["consumesCounters"] = std::move(list);
  }
  if (d.taints_size() > 0) {
    json list = json::array();
    for (const auto& t : d.taints()) {
      json taint = {{"key", t.key()}, {"effect", t.effect()}};
      if (!t.value().empty()) taint["value"] = t.value();
      list.push_back(std::move(taint));
    }
    out["taints"] = std::move(list);
  }
  if (d.allow_multiple_allocations()) out["allowMultipleAllocations"] = true;
  return out;
}

const json& At(const json& obj, const char* key) {
  static const json* const kNull = new json();
  if (!obj.is_object()) return *kNull;
  auto it = obj.find(key);
  return it == obj.end() ? *kNull : *it;
}

std::string Str(const json& obj, const char* key) {
  const json& v = At(obj, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

}  // namespace

json SliceDevicesJson(const v1::Slice& slice) {
  json spec = json::object();
  // A slice holds devices or shared counters, never both (validation refuses both fields, even
  // an empty devices list beside counters).
  if (slice.devices_size() > 0 || slice.shared_counters_size() == 0) {
    json devices = json::array();
    for (const auto& d : slice.devices()) devices.push_back(DeviceJson(d));
    spec["devices"] = std::move(devices);
  }
  if (slice.shared_counters_size() > 0) {
    json sets = json::array();
    for (const auto& s : slice.shared_counters()) {
      sets.push_back({{"name", s.name()}, {"counters", CountersJson(s.counters())}});
    }
    spec["sharedCounters"] = std::move(sets);
  }
  return spec;
}

json SliceJson(const v1::Slice& slice, const std::string& name, const std::string& node,
               const std::string& driver, const std::string& pool, int64_t generation,
               int64_t slice_count) {
  json spec = SliceDevicesJson(slice);
  spec["driver"] = driver;
  spec["nodeName"] = node;
  spec["pool"] = {{"name", pool}, {"generation", generation}, {"resourceSliceCount", slice_count}};
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", name}}},
          {"spec", std::move(spec)}};
}

std::string SliceName(const std::string& node, const std::string& driver, const std::string& pool,
                      size_t index, size_t count) {
  std::string name = node + "-" + driver;
  if (pool != node) {
    std::string clean = pool;
    for (char& c : clean) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-';
      if (c >= 'A' && c <= 'Z') {
        c = static_cast<char>(c - 'A' + 'a');
      } else if (!ok) {
        c = '-';
      }
    }
    name += "-" + clean;
  }
  if (count > 1) name += "-" + std::to_string(index);
  return name;
}

std::string AllocationId(const std::string& uid, const json& allocation) {
  // FNV-1a, 64 bits: stable across processes and versions (std::hash is not), cheap, and
  // collisions between two allocations of one claim are not a concern.
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&h](const std::string& s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ULL;
    }
  };
  mix(uid);
  mix("\n");
  mix(model::json::Write(allocation));
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

bool MayHaveAssignment(std::string_view body_text) {
  return body_text.find("\"allocation\"") != std::string_view::npos &&
         body_text.find("\"reservedFor\"") != std::string_view::npos;
}

std::optional<ClaimAssignment> AssignmentOf(const std::string& namespace_, const std::string& name,
                                            const std::string& uid, const json& body) {
  const json& status = At(body, "status");
  const json& allocation = At(status, "allocation");
  const json& reserved = At(status, "reservedFor");
  if (!allocation.is_object() || !reserved.is_array() || reserved.empty()) return std::nullopt;
  auto node = model::AllocatedNode(model::json::NodeRelationsOf(body));
  if (!node.has_value()) return std::nullopt;
  ClaimAssignment out;
  out.node = *node;
  v1::Assignment& a = out.assignment;
  a.mutable_claim()->set_namespace_(namespace_);
  a.mutable_claim()->set_name(name);
  a.mutable_claim()->set_uid(uid);
  a.set_allocation_id(AllocationId(uid, allocation));
  const json& devices = At(allocation, "devices");
  const json& results = At(devices, "results");
  for (size_t i = 0; results.is_array() && i < results.size(); ++i) {
    const json& r = results[i];
    v1::AllocatedDevice* d = a.add_devices();
    d->set_request(Str(r, "request"));
    d->set_driver(Str(r, "driver"));
    d->set_pool(Str(r, "pool"));
    d->set_device(Str(r, "device"));
    d->set_share_id(Str(r, "shareID"));
    const json& admin = At(r, "adminAccess");
    d->set_admin_access(admin.is_boolean() && admin.get<bool>());
    const json& consumed = At(r, "consumedCapacity");
    if (consumed.is_object()) {
      for (const auto& [key, value] : consumed.items()) {
        if (value.is_string()) (*d->mutable_consumed_capacity())[key] = value.get<std::string>();
      }
    }
  }
  const json& configs = At(devices, "config");
  for (size_t i = 0; configs.is_array() && i < configs.size(); ++i) {
    const json& c = configs[i];
    const json& opaque = At(c, "opaque");
    if (!opaque.is_object()) continue;
    v1::OpaqueConfig* o = a.add_configs();
    o->set_source(Str(c, "source"));
    const json& requests = At(c, "requests");
    for (size_t j = 0; requests.is_array() && j < requests.size(); ++j) {
      if (requests[j].is_string()) o->add_requests(requests[j].get<std::string>());
    }
    o->set_driver(Str(opaque, "driver"));
    const json& params = At(opaque, "parameters");
    o->set_parameters_json(params.is_null() ? "" : params.dump());
  }
  SetConsumers(body, a);
  return out;
}

std::optional<std::string> AssignmentAllocationId(const std::string& uid, const json& body) {
  const json& status = At(body, "status");
  const json& allocation = At(status, "allocation");
  const json& reserved = At(status, "reservedFor");
  if (!allocation.is_object() || !reserved.is_array() || reserved.empty()) return std::nullopt;
  return AllocationId(uid, allocation);
}

void SetConsumers(const json& body, v1::Assignment& assignment) {
  assignment.clear_consumers();
  for (const auto& r : At(At(body, "status"), "reservedFor")) {
    if (Str(r, "resource") != "pods") continue;
    v1::PodRef* p = assignment.add_consumers();
    p->set_name(Str(r, "name"));
    p->set_uid(Str(r, "uid"));
  }
}

std::optional<v1::Assignment> ForDrivers(const v1::Assignment& assignment,
                                         const std::vector<std::string>& drivers) {
  if (drivers.empty()) {
    if (assignment.devices_size() == 0) return std::nullopt;
    return assignment;
  }
  auto wanted = [&](const std::string& d) {
    return std::find(drivers.begin(), drivers.end(), d) != drivers.end();
  };
  v1::Assignment out = assignment;
  out.clear_devices();
  out.clear_configs();
  for (const auto& d : assignment.devices()) {
    if (wanted(d.driver())) *out.add_devices() = d;
  }
  if (out.devices_size() == 0) return std::nullopt;
  for (const auto& c : assignment.configs()) {
    if (wanted(c.driver())) *out.add_configs() = c;
  }
  return out;
}

}  // namespace qm::api::nodeapi
