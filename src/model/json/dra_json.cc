#include "model/json/dra_json.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace qm::model::json {
namespace {

using nlohmann::json;

absl::Status TypeError(const std::string& path, const char* want) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": expected ", want));
}

// The member `key` of `object`, or nullptr when absent or null.
const json* Member(const json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::Status GetString(const json& object, const char* key, const std::string& path,
                       std::string& out) {
  const json* v = Member(object, key);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_string()) return TypeError(absl::StrCat(path, ".", key), "string");
  out = v->get<std::string>();
  return absl::OkStatus();
}

absl::Status GetBool(const json& object, const char* key, const std::string& path, bool& out) {
  const json* v = Member(object, key);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_boolean()) return TypeError(absl::StrCat(path, ".", key), "boolean");
  out = v->get<bool>();
  return absl::OkStatus();
}

absl::Status GetInt(const json& object, const char* key, const std::string& path, int64_t& out) {
  const json* v = Member(object, key);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_number_integer()) return TypeError(absl::StrCat(path, ".", key), "integer");
  out = v->get<int64_t>();
  return absl::OkStatus();
}

absl::Status GetStrings(const json& object, const char* key, const std::string& path,
                        std::vector<std::string>& out) {
  const json* v = Member(object, key);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_array()) return TypeError(absl::StrCat(path, ".", key), "array");
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) return TypeError(absl::StrCat(path, ".", key, "[", i, "]"), "string");
    out.push_back((*v)[i].get<std::string>());
  }
  return absl::OkStatus();
}

absl::StatusOr<Quantity> DecodeQuantity(const json& v, const std::string& path) {
  std::string text;
  if (v.is_string()) {
    text = v.get<std::string>();
  } else if (v.is_number_integer()) {
    text = std::to_string(v.get<int64_t>());
  } else {
    return TypeError(path, "quantity");
  }
  auto q = ParseQuantity(text);
  if (!q.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", q.status().message()));
  return *q;
}

absl::Status GetQuantityMap(const json& object, const char* key, const std::string& path,
                            std::map<std::string, Quantity>& out, bool nested_value) {
  const json* v = Member(object, key);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_object()) return TypeError(absl::StrCat(path, ".", key), "object");
  for (const auto& [name, item] : v->items()) {
    std::string item_path = absl::StrCat(path, ".", key, "[", name, "]");
    const json* q = &item;
    if (nested_value) {
      q = Member(item, "value");
      if (q == nullptr) return TypeError(absl::StrCat(item_path, ".value"), "quantity");
      item_path += ".value";
    }
    QM_ASSIGN_OR_RETURN(out[name], DecodeQuantity(*q, item_path));
  }
  return absl::OkStatus();
}

const json& Empty() {
  static const json* empty = new json(json::object());
  return *empty;
}

const json& Object(const json& parent, const char* key) {
  const json* v = Member(parent, key);
  return v != nullptr && v->is_object() ? *v : Empty();
}

absl::StatusOr<NodeSelectorRequirement> DecodeRequirement(const json& r, const std::string& path) {
  NodeSelectorRequirement out;
  QM_RETURN_IF_ERROR(GetString(r, "key", path, out.key));
  QM_RETURN_IF_ERROR(GetString(r, "operator", path, out.op));
  QM_RETURN_IF_ERROR(GetStrings(r, "values", path, out.values));
  return out;
}

absl::Status DecodeRequirements(const json& term, const char* key, const std::string& path,
                                std::vector<NodeSelectorRequirement>& out) {
  const json* list = Member(term, key);
  if (list == nullptr) return absl::OkStatus();
  if (!list->is_array()) return TypeError(absl::StrCat(path, ".", key), "array");
  for (size_t i = 0; i < list->size(); ++i) {
    QM_ASSIGN_OR_RETURN(auto r,
                        DecodeRequirement((*list)[i], absl::StrCat(path, ".", key, "[", i, "]")));
    out.push_back(std::move(r));
  }
  return absl::OkStatus();
}

absl::StatusOr<DeviceTaint> DecodeTaint(const json& t, const std::string& path) {
  DeviceTaint out;
  QM_RETURN_IF_ERROR(GetString(t, "key", path, out.key));
  QM_RETURN_IF_ERROR(GetString(t, "value", path, out.value));
  QM_RETURN_IF_ERROR(GetString(t, "effect", path, out.effect));
  QM_RETURN_IF_ERROR(GetString(t, "timeAdded", path, out.time_added));
  return out;
}

absl::StatusOr<DeviceToleration> DecodeToleration(const json& t, const std::string& path) {
  DeviceToleration out;
  QM_RETURN_IF_ERROR(GetString(t, "key", path, out.key));
  QM_RETURN_IF_ERROR(GetString(t, "operator", path, out.op));
  if (out.op.empty()) out.op = "Equal";
  QM_RETURN_IF_ERROR(GetString(t, "value", path, out.value));
  QM_RETURN_IF_ERROR(GetString(t, "effect", path, out.effect));
  if (const json* s = Member(t, "tolerationSeconds")) {
    if (!s->is_number_integer()) return TypeError(path + ".tolerationSeconds", "integer");
    out.toleration_seconds = s->get<int64_t>();
  }
  return out;
}

absl::StatusOr<AttributeValue> DecodeAttribute(const json& a, const std::string& path) {
  if (!a.is_object()) return TypeError(path, "object");
  if (const json* v = Member(a, "int")) {
    if (!v->is_number_integer()) return TypeError(path + ".int", "integer");
    return AttributeValue(v->get<int64_t>());
  }
  if (const json* v = Member(a, "bool")) {
    if (!v->is_boolean()) return TypeError(path + ".bool", "boolean");
    return AttributeValue(v->get<bool>());
  }
  if (const json* v = Member(a, "string")) {
    if (!v->is_string()) return TypeError(path + ".string", "string");
    return AttributeValue(v->get<std::string>());
  }
  if (const json* v = Member(a, "version")) {
    if (!v->is_string()) return TypeError(path + ".version", "string");
    return AttributeValue(Version{v->get<std::string>()});
  }
  auto list = [&](const char* key, auto pred, auto convert) -> std::optional<absl::Status> {
    const json* v = Member(a, key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_array()) return TypeError(absl::StrCat(path, ".", key), "array");
    for (const auto& item : *v) {
      if (!pred(item)) return TypeError(absl::StrCat(path, ".", key, "[]"), key);
    }
    convert(*v);
    return absl::OkStatus();
  };
  AttributeValue out;
  for (auto result : {list(
                          "ints", [](const json& j) { return j.is_number_integer(); },
                          [&](const json& v) { out = v.get<std::vector<int64_t>>(); }),
                      list(
                          "bools", [](const json& j) { return j.is_boolean(); },
                          [&](const json& v) { out = v.get<std::vector<bool>>(); }),
                      list(
                          "strings", [](const json& j) { return j.is_string(); },
                          [&](const json& v) { out = v.get<std::vector<std::string>>(); }),
                      list(
                          "versions", [](const json& j) { return j.is_string(); },
                          [&](const json& v) {
                            std::vector<Version> versions;
                            for (const auto& s : v)
                              versions.push_back(Version{s.get<std::string>()});
                            out = std::move(versions);
                          })}) {
    if (result.has_value()) {
      QM_RETURN_IF_ERROR(*result);
      return out;
    }
  }
  return AttributeValue();  // a kind this version does not know
}

absl::StatusOr<DeviceCapacity> DecodeCapacity(const json& c, const std::string& path) {
  DeviceCapacity out;
  const json* value = Member(c, "value");
  if (value == nullptr) return TypeError(path + ".value", "quantity");
  QM_ASSIGN_OR_RETURN(out.value, DecodeQuantity(*value, path + ".value"));
  if (const json* p = Member(c, "requestPolicy")) {
    CapacityRequestPolicy policy;
    std::string ppath = path + ".requestPolicy";
    if (const json* d = Member(*p, "default")) {
      QM_ASSIGN_OR_RETURN(policy.default_value, DecodeQuantity(*d, ppath + ".default"));
    }
    if (const json* vv = Member(*p, "validValues")) {
      if (!vv->is_array()) return TypeError(ppath + ".validValues", "array");
      for (size_t i = 0; i < vv->size(); ++i) {
        QM_ASSIGN_OR_RETURN(auto q,
                            DecodeQuantity((*vv)[i], absl::StrCat(ppath, ".validValues[", i, "]")));
        policy.valid_values.push_back(q);
      }
    }
    if (const json* r = Member(*p, "validRange")) {
      CapacityRange range;
      std::string rpath = ppath + ".validRange";
      if (const json* m = Member(*r, "min")) {
        QM_ASSIGN_OR_RETURN(range.min, DecodeQuantity(*m, rpath + ".min"));
      }
      if (const json* m = Member(*r, "max")) {
        QM_ASSIGN_OR_RETURN(range.max, DecodeQuantity(*m, rpath + ".max"));
      }
      if (const json* m = Member(*r, "step")) {
        QM_ASSIGN_OR_RETURN(range.step, DecodeQuantity(*m, rpath + ".step"));
      }
      policy.valid_range = range;
    }
    out.request_policy = std::make_shared<const CapacityRequestPolicy>(std::move(policy));
  }
  return out;
}

absl::StatusOr<Device> DecodeDevice(const json& d, const std::string& path) {
  Device out;
  QM_RETURN_IF_ERROR(GetString(d, "name", path, out.name));
  if (const json* attrs = Member(d, "attributes")) {
    if (!attrs->is_object()) return TypeError(path + ".attributes", "object");
    out.attributes.reserve(attrs->size());
    for (const auto& [name, a] : attrs->items()) {
      QM_ASSIGN_OR_RETURN(out.attributes[name],
                          DecodeAttribute(a, absl::StrCat(path, ".attributes[", name, "]")));
    }
  }
  if (const json* caps = Member(d, "capacity")) {
    if (!caps->is_object()) return TypeError(path + ".capacity", "object");
    out.capacity.reserve(caps->size());
    for (const auto& [name, c] : caps->items()) {
      QM_ASSIGN_OR_RETURN(out.capacity[name],
                          DecodeCapacity(c, absl::StrCat(path, ".capacity[", name, "]")));
    }
  }
  if (const json* cc = Member(d, "consumesCounters")) {
    if (!cc->is_array()) return TypeError(path + ".consumesCounters", "array");
    for (size_t i = 0; i < cc->size(); ++i) {
      std::string cpath = absl::StrCat(path, ".consumesCounters[", i, "]");
      DeviceCounterConsumption consumption;
      QM_RETURN_IF_ERROR(GetString((*cc)[i], "counterSet", cpath, consumption.counter_set));
      QM_RETURN_IF_ERROR(
          GetQuantityMap((*cc)[i], "counters", cpath, consumption.counters, /*nested_value=*/true));
      out.consumes_counters.push_back(std::move(consumption));
    }
  }
  DeviceBinding binding;
  QM_RETURN_IF_ERROR(GetString(d, "nodeName", path, binding.node_name));
  if (const json* ns = Member(d, "nodeSelector")) {
    QM_ASSIGN_OR_RETURN(binding.node_selector, DecodeNodeSelector(*ns, path + ".nodeSelector"));
  }
  QM_RETURN_IF_ERROR(GetBool(d, "allNodes", path, binding.all_nodes));
  if (const json* taints = Member(d, "taints")) {
    if (!taints->is_array()) return TypeError(path + ".taints", "array");
    for (size_t i = 0; i < taints->size(); ++i) {
      QM_ASSIGN_OR_RETURN(auto t,
                          DecodeTaint((*taints)[i], absl::StrCat(path, ".taints[", i, "]")));
      out.taints.push_back(std::move(t));
    }
  }
  QM_RETURN_IF_ERROR(GetBool(d, "bindsToNode", path, binding.binds_to_node));
  QM_RETURN_IF_ERROR(GetStrings(d, "bindingConditions", path, binding.binding_conditions));
  QM_RETURN_IF_ERROR(
      GetStrings(d, "bindingFailureConditions", path, binding.binding_failure_conditions));
  if (!binding.Empty()) out.binding = std::make_shared<const DeviceBinding>(std::move(binding));
  QM_RETURN_IF_ERROR(GetBool(d, "allowMultipleAllocations", path, out.allow_multiple_allocations));
  return out;
}

absl::StatusOr<std::vector<std::string>> DecodeSelectors(const json& parent,
                                                         const std::string& path) {
  std::vector<std::string> out;
  const json* list = Member(parent, "selectors");
  if (list == nullptr) return out;
  if (!list->is_array()) return TypeError(path + ".selectors", "array");
  for (size_t i = 0; i < list->size(); ++i) {
    std::string spath = absl::StrCat(path, ".selectors[", i, "]");
    const json& cel = Object((*list)[i], "cel");
    std::string expression;
    QM_RETURN_IF_ERROR(GetString(cel, "expression", spath + ".cel", expression));
    out.push_back(std::move(expression));
  }
  return out;
}

absl::StatusOr<OpaqueConfig> DecodeOpaque(const json& entry, const std::string& path) {
  OpaqueConfig out;
  const json& opaque = Object(entry, "opaque");
  QM_RETURN_IF_ERROR(GetString(opaque, "driver", path + ".opaque", out.driver));
  if (const json* p = Member(opaque, "parameters")) out.parameters = p->dump();
  return out;
}

absl::StatusOr<ExactDeviceRequest> DecodeExact(const json& r, const std::string& path) {
  ExactDeviceRequest out;
  QM_RETURN_IF_ERROR(GetString(r, "deviceClassName", path, out.device_class_name));
  QM_ASSIGN_OR_RETURN(out.selectors, DecodeSelectors(r, path));
  QM_RETURN_IF_ERROR(GetString(r, "allocationMode", path, out.allocation_mode));
  if (out.allocation_mode.empty()) out.allocation_mode = std::string(kAllocationModeExactCount);
  out.count = 0;
  QM_RETURN_IF_ERROR(GetInt(r, "count", path, out.count));
  if (out.allocation_mode == kAllocationModeExactCount && out.count == 0) out.count = 1;
  QM_RETURN_IF_ERROR(GetBool(r, "adminAccess", path, out.admin_access));
  if (const json* tols = Member(r, "tolerations")) {
    if (!tols->is_array()) return TypeError(path + ".tolerations", "array");
    for (size_t i = 0; i < tols->size(); ++i) {
      QM_ASSIGN_OR_RETURN(
          auto t, DecodeToleration((*tols)[i], absl::StrCat(path, ".tolerations[", i, "]")));
      out.tolerations.push_back(std::move(t));
    }
  }
  QM_RETURN_IF_ERROR(GetQuantityMap(Object(r, "capacity"), "requests", path + ".capacity",
                                    out.capacity_requests, /*nested_value=*/false));
  return out;
}

std::string Name(const json& object) {
  const json& meta = Object(object, "metadata");
  const json* n = Member(meta, "name");
  return n != nullptr && n->is_string() ? n->get<std::string>() : std::string();
}

}  // namespace

absl::StatusOr<NodeSelector> DecodeNodeSelector(const json& selector, const std::string& path) {
  NodeSelector out;
  const json* terms = Member(selector, "nodeSelectorTerms");
  if (terms == nullptr) return out;
  if (!terms->is_array()) return TypeError(path + ".nodeSelectorTerms", "array");
  for (size_t i = 0; i < terms->size(); ++i) {
    std::string tpath = absl::StrCat(path, ".nodeSelectorTerms[", i, "]");
    NodeSelectorTerm term;
    QM_RETURN_IF_ERROR(
        DecodeRequirements((*terms)[i], "matchExpressions", tpath, term.match_expressions));
    QM_RETURN_IF_ERROR(DecodeRequirements((*terms)[i], "matchFields", tpath, term.match_fields));
    out.terms.push_back(std::move(term));
  }
  return out;
}

absl::StatusOr<ResourceSlice> DecodeResourceSlice(const json& object) {
  ResourceSlice out;
  out.name = Name(object);
  const json& spec = Object(object, "spec");
  const std::string path = "spec";
  QM_RETURN_IF_ERROR(GetString(spec, "driver", path, out.driver));
  const json& pool = Object(spec, "pool");
  QM_RETURN_IF_ERROR(GetString(pool, "name", "spec.pool", out.pool));
  QM_RETURN_IF_ERROR(GetInt(pool, "generation", "spec.pool", out.generation));
  QM_RETURN_IF_ERROR(GetInt(pool, "resourceSliceCount", "spec.pool", out.resource_slice_count));
  QM_RETURN_IF_ERROR(GetString(spec, "nodeName", path, out.node_name));
  if (const json* ns = Member(spec, "nodeSelector")) {
    QM_ASSIGN_OR_RETURN(out.node_selector, DecodeNodeSelector(*ns, "spec.nodeSelector"));
  }
  QM_RETURN_IF_ERROR(GetBool(spec, "allNodes", path, out.all_nodes));
  QM_RETURN_IF_ERROR(GetBool(spec, "perDeviceNodeSelection", path, out.per_device_node_selection));
  if (const json* devices = Member(spec, "devices")) {
    if (!devices->is_array()) return TypeError("spec.devices", "array");
    for (size_t i = 0; i < devices->size(); ++i) {
      QM_ASSIGN_OR_RETURN(auto d,
                          DecodeDevice((*devices)[i], absl::StrCat("spec.devices[", i, "]")));
      out.devices.push_back(std::move(d));
    }
  }
  if (const json* sets = Member(spec, "sharedCounters")) {
    if (!sets->is_array()) return TypeError("spec.sharedCounters", "array");
    for (size_t i = 0; i < sets->size(); ++i) {
      std::string spath = absl::StrCat("spec.sharedCounters[", i, "]");
      CounterSet set;
      QM_RETURN_IF_ERROR(GetString((*sets)[i], "name", spath, set.name));
      QM_RETURN_IF_ERROR(
          GetQuantityMap((*sets)[i], "counters", spath, set.counters, /*nested_value=*/true));
      out.shared_counters.push_back(std::move(set));
    }
  }
  QM_RETURN_IF_ERROR(GetStrings(spec, "skipNodeOperations", path, out.skip_node_operations));
  return out;
}

absl::StatusOr<DeviceClass> DecodeDeviceClass(const json& object) {
  DeviceClass out;
  out.name = Name(object);
  const json& spec = Object(object, "spec");
  QM_ASSIGN_OR_RETURN(out.selectors, DecodeSelectors(spec, "spec"));
  if (const json* config = Member(spec, "config")) {
    if (!config->is_array()) return TypeError("spec.config", "array");
    for (size_t i = 0; i < config->size(); ++i) {
      QM_ASSIGN_OR_RETURN(auto c, DecodeOpaque((*config)[i], absl::StrCat("spec.config[", i, "]")));
      out.config.push_back(std::move(c));
    }
  }
  QM_RETURN_IF_ERROR(GetString(spec, "extendedResourceName", "spec", out.extended_resource_name));
  return out;
}

absl::StatusOr<DeviceTaintRule> DecodeDeviceTaintRule(const json& object) {
  DeviceTaintRule out;
  out.name = Name(object);
  const json& spec = Object(object, "spec");
  const json& sel = Object(spec, "deviceSelector");
  QM_RETURN_IF_ERROR(GetString(sel, "driver", "spec.deviceSelector", out.driver));
  QM_RETURN_IF_ERROR(GetString(sel, "pool", "spec.deviceSelector", out.pool));
  QM_RETURN_IF_ERROR(GetString(sel, "device", "spec.deviceSelector", out.device));
  QM_ASSIGN_OR_RETURN(out.taint, DecodeTaint(Object(spec, "taint"), "spec.taint"));
  return out;
}

absl::StatusOr<ResourceClaimSpec> DecodeResourceClaimSpec(const json& spec,
                                                          const std::string& path) {
  ResourceClaimSpec out;
  const json& devices = Object(spec, "devices");
  const std::string dpath = path + ".devices";
  if (const json* requests = Member(devices, "requests")) {
    if (!requests->is_array()) return TypeError(dpath + ".requests", "array");
    for (size_t i = 0; i < requests->size(); ++i) {
      const json& r = (*requests)[i];
      std::string rpath = absl::StrCat(dpath, ".requests[", i, "]");
      DeviceRequest request;
      QM_RETURN_IF_ERROR(GetString(r, "name", rpath, request.name));
      if (const json* exactly = Member(r, "exactly")) {
        QM_ASSIGN_OR_RETURN(request.exactly, DecodeExact(*exactly, rpath + ".exactly"));
      }
      if (const json* subs = Member(r, "firstAvailable")) {
        if (!subs->is_array()) return TypeError(rpath + ".firstAvailable", "array");
        for (size_t j = 0; j < subs->size(); ++j) {
          std::string spath = absl::StrCat(rpath, ".firstAvailable[", j, "]");
          DeviceSubRequest sub;
          QM_RETURN_IF_ERROR(GetString((*subs)[j], "name", spath, sub.name));
          QM_ASSIGN_OR_RETURN(sub.request, DecodeExact((*subs)[j], spath));
          sub.request.admin_access = false;
          request.first_available.push_back(std::move(sub));
        }
      }
      out.requests.push_back(std::move(request));
    }
  }
  if (const json* constraints = Member(devices, "constraints")) {
    if (!constraints->is_array()) return TypeError(dpath + ".constraints", "array");
    for (size_t i = 0; i < constraints->size(); ++i) {
      std::string cpath = absl::StrCat(dpath, ".constraints[", i, "]");
      DeviceConstraint c;
      QM_RETURN_IF_ERROR(GetStrings((*constraints)[i], "requests", cpath, c.requests));
      QM_RETURN_IF_ERROR(GetString((*constraints)[i], "matchAttribute", cpath, c.match_attribute));
      QM_RETURN_IF_ERROR(
          GetString((*constraints)[i], "distinctAttribute", cpath, c.distinct_attribute));
      out.constraints.push_back(std::move(c));
    }
  }
  if (const json* config = Member(devices, "config")) {
    if (!config->is_array()) return TypeError(dpath + ".config", "array");
    for (size_t i = 0; i < config->size(); ++i) {
      std::string cpath = absl::StrCat(dpath, ".config[", i, "]");
      DeviceClaimConfiguration c;
      QM_RETURN_IF_ERROR(GetStrings((*config)[i], "requests", cpath, c.requests));
      QM_ASSIGN_OR_RETURN(c.opaque, DecodeOpaque((*config)[i], cpath));
      out.config.push_back(std::move(c));
    }
  }
  return out;
}

absl::StatusOr<AllocationResult> DecodeAllocationResult(const json& allocation,
                                                        const std::string& path) {
  AllocationResult out;
  const json& devices = Object(allocation, "devices");
  if (const json* results = Member(devices, "results")) {
    if (!results->is_array()) return TypeError(path + ".devices.results", "array");
    for (size_t i = 0; i < results->size(); ++i) {
      const json& r = (*results)[i];
      std::string rpath = absl::StrCat(path, ".devices.results[", i, "]");
      DeviceRequestAllocationResult res;
      QM_RETURN_IF_ERROR(GetString(r, "request", rpath, res.request));
      QM_RETURN_IF_ERROR(GetString(r, "driver", rpath, res.driver));
      QM_RETURN_IF_ERROR(GetString(r, "pool", rpath, res.pool));
      QM_RETURN_IF_ERROR(GetString(r, "device", rpath, res.device));
      QM_RETURN_IF_ERROR(GetBool(r, "adminAccess", rpath, res.admin_access));
      if (const json* tols = Member(r, "tolerations")) {
        if (!tols->is_array()) return TypeError(rpath + ".tolerations", "array");
        for (size_t j = 0; j < tols->size(); ++j) {
          QM_ASSIGN_OR_RETURN(
              auto t, DecodeToleration((*tols)[j], absl::StrCat(rpath, ".tolerations[", j, "]")));
          res.tolerations.push_back(std::move(t));
        }
      }
      QM_RETURN_IF_ERROR(GetStrings(r, "bindingConditions", rpath, res.binding_conditions));
      QM_RETURN_IF_ERROR(
          GetStrings(r, "bindingFailureConditions", rpath, res.binding_failure_conditions));
      QM_RETURN_IF_ERROR(GetString(r, "shareID", rpath, res.share_id));
      QM_RETURN_IF_ERROR(GetQuantityMap(r, "consumedCapacity", rpath, res.consumed_capacity,
                                        /*nested_value=*/false));
      QM_RETURN_IF_ERROR(GetStrings(r, "skipNodeOperations", rpath, res.skip_node_operations));
      out.results.push_back(std::move(res));
    }
  }
  if (const json* config = Member(devices, "config")) {
    if (!config->is_array()) return TypeError(path + ".devices.config", "array");
    for (size_t i = 0; i < config->size(); ++i) {
      std::string cpath = absl::StrCat(path, ".devices.config[", i, "]");
      DeviceAllocationConfiguration c;
      QM_RETURN_IF_ERROR(GetString((*config)[i], "source", cpath, c.source));
      QM_RETURN_IF_ERROR(GetStrings((*config)[i], "requests", cpath, c.requests));
      QM_ASSIGN_OR_RETURN(c.opaque, DecodeOpaque((*config)[i], cpath));
      out.config.push_back(std::move(c));
    }
  }
  if (const json* ns = Member(allocation, "nodeSelector")) {
    QM_ASSIGN_OR_RETURN(out.node_selector, DecodeNodeSelector(*ns, path + ".nodeSelector"));
  }
  return out;
}

absl::StatusOr<ResourceClaim> DecodeResourceClaim(const json& object) {
  ResourceClaim out;
  const json& meta = Object(object, "metadata");
  QM_RETURN_IF_ERROR(GetString(meta, "name", "metadata", out.name));
  QM_RETURN_IF_ERROR(GetString(meta, "namespace", "metadata", out.namespace_));
  QM_RETURN_IF_ERROR(GetString(meta, "uid", "metadata", out.uid));
  QM_ASSIGN_OR_RETURN(out.spec, DecodeResourceClaimSpec(Object(object, "spec"), "spec"));
  if (const json* allocation = Member(Object(object, "status"), "allocation")) {
    QM_ASSIGN_OR_RETURN(out.allocation, DecodeAllocationResult(*allocation, "status.allocation"));
  }
  return out;
}

absl::StatusOr<NodeInfo> DecodeNodeInfo(const json& object) {
  NodeInfo out;
  out.name = Name(object);
  if (const json* labels = Member(Object(object, "metadata"), "labels")) {
    if (!labels->is_object()) return TypeError("metadata.labels", "object");
    for (const auto& [k, v] : labels->items()) {
      if (!v.is_string()) return TypeError("metadata.labels[" + k + "]", "string");
      out.labels[k] = v.get<std::string>();
    }
  }
  return out;
}

json EncodeNodeSelector(const NodeSelector& selector) {
  auto requirements = [](const std::vector<NodeSelectorRequirement>& list) {
    json out = json::array();
    for (const auto& r : list) {
      json e = {{"key", r.key}, {"operator", r.op}};
      if (!r.values.empty()) e["values"] = r.values;
      out.push_back(std::move(e));
    }
    return out;
  };
  json terms = json::array();
  for (const auto& t : selector.terms) {
    json term = json::object();
    if (!t.match_expressions.empty()) term["matchExpressions"] = requirements(t.match_expressions);
    if (!t.match_fields.empty()) term["matchFields"] = requirements(t.match_fields);
    terms.push_back(std::move(term));
  }
  return {{"nodeSelectorTerms", std::move(terms)}};
}

json EncodeToleration(const DeviceToleration& t) {
  json out = json::object();
  if (!t.key.empty()) out["key"] = t.key;
  if (!t.op.empty()) out["operator"] = t.op;
  if (!t.value.empty()) out["value"] = t.value;
  if (!t.effect.empty()) out["effect"] = t.effect;
  if (t.toleration_seconds.has_value()) out["tolerationSeconds"] = *t.toleration_seconds;
  return out;
}

json EncodeAllocationResult(const AllocationResult& allocation) {
  json results = json::array();
  for (const auto& r : allocation.results) {
    json e = {{"request", r.request}, {"driver", r.driver}, {"pool", r.pool}, {"device", r.device}};
    if (r.admin_access) e["adminAccess"] = true;
    if (!r.tolerations.empty()) {
      json tols = json::array();
      for (const auto& t : r.tolerations) tols.push_back(EncodeToleration(t));
      e["tolerations"] = std::move(tols);
    }
    if (!r.binding_conditions.empty()) e["bindingConditions"] = r.binding_conditions;
    if (!r.binding_failure_conditions.empty()) {
      e["bindingFailureConditions"] = r.binding_failure_conditions;
    }
    if (!r.share_id.empty()) e["shareID"] = r.share_id;
    if (!r.consumed_capacity.empty()) {
      json caps = json::object();
      for (const auto& [name, q] : r.consumed_capacity) caps[name] = q.String();
      e["consumedCapacity"] = std::move(caps);
    }
    if (!r.skip_node_operations.empty()) e["skipNodeOperations"] = r.skip_node_operations;
    results.push_back(std::move(e));
  }
  json devices = {{"results", std::move(results)}};
  if (!allocation.config.empty()) {
    json config = json::array();
    for (const auto& c : allocation.config) {
      json opaque = {{"driver", c.opaque.driver}};
      if (!c.opaque.parameters.empty()) {
        opaque["parameters"] =
            json::parse(c.opaque.parameters, nullptr, /*allow_exceptions=*/false);
      }
      json e = {{"source", c.source}};
      if (!c.requests.empty()) e["requests"] = c.requests;
      e["opaque"] = std::move(opaque);
      config.push_back(std::move(e));
    }
    devices["config"] = std::move(config);
  }
  json out = {{"devices", std::move(devices)}};
  if (allocation.node_selector.has_value()) {
    out["nodeSelector"] = EncodeNodeSelector(*allocation.node_selector);
  }
  return out;
}

}  // namespace qm::model::json
