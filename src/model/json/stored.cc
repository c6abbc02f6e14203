#include "model/json/stored.h"

#include <algorithm>
#include <limits>
#include <set>

#include "common/clock.h"
#include "common/status.h"
#include "model/json/access.h"
#include "model/json/document.h"
#include "model/json/dra_json.h"
#include "model/json/fields.h"
#include "model/json/rbac_json.h"
#include "model/json/read.h"
#include "model/json/write.h"
#include "model/resource_types.h"

namespace qm::model::json {
namespace {

using nlohmann::json;

json ParseBody(const std::string& text) { return std::move(Document::Parse(text).value()); }

// The body of `obj` as JSON: the tree kept with it (Object::parsed) or, when none was kept,
// its text parsed into `scratch`.
const json& BodyJson(const Object& obj, json& scratch) {
  if (const SharedDocument* kept = ParsedBody(obj)) return (*kept)->value();
  scratch = ParseBody(obj.body);
  return scratch;
}

std::optional<int64_t> Int(const json& v) {
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return std::nullopt;  // does not fit (it read as a negative number)
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  return std::nullopt;
}

// Each array element of `j` (nothing when it is not an array).
template <typename F>
void ForEach(const json& j, F f) {
  if (!j.is_array()) return;
  for (const auto& e : j) f(e);
}

// The whole object the dra_json and rbac_json decoders take: the body and the metadata they
// read. InvalidArgument when the body is not a JSON object.
absl::StatusOr<json> Whole(const Object& obj) {
  json whole = Read(obj.body);
  if (!whole.is_object()) return absl::InvalidArgumentError("the body is not a JSON object");
  whole["metadata"] = {
      {"name", obj.meta.name}, {"namespace", obj.meta.namespace_}, {"uid", obj.meta.uid}};
  return whole;
}

template <typename T>
absl::StatusOr<T> DecodeWhole(const Object& obj, absl::StatusOr<T> (*decode)(const json&)) {
  auto whole = Whole(obj);
  if (!whole.ok()) return whole.status();
  return decode(*whole);
}

}  // namespace

absl::StatusOr<ResourceSlice> DecodeResourceSlice(const Object& slice) {
  // Of the metadata the decoder reads the name only: a kept tree is decoded as it is.
  if (const SharedDocument* kept = ParsedBody(slice)) {
    QM_ASSIGN_OR_RETURN(ResourceSlice out, DecodeResourceSlice((*kept)->value()));
    out.name = slice.meta.name;
    return out;
  }
  return DecodeWhole<ResourceSlice>(slice, &DecodeResourceSlice);
}

absl::StatusOr<DeviceClass> DecodeDeviceClass(const Object& device_class) {
  return DecodeWhole<DeviceClass>(device_class, &DecodeDeviceClass);
}

absl::StatusOr<DeviceTaintRule> DecodeDeviceTaintRule(const Object& rule) {
  return DecodeWhole<DeviceTaintRule>(rule, &DecodeDeviceTaintRule);
}

absl::StatusOr<Role> DecodeRole(const Object& role) { return DecodeWhole<Role>(role, &DecodeRole); }

absl::StatusOr<RoleBinding> DecodeRoleBinding(const Object& binding) {
  return DecodeWhole<RoleBinding>(binding, &DecodeRoleBinding);
}

std::vector<UnhealthySource> UnhealthySourcesOf(const Object& obj) {
  std::vector<UnhealthySource> out;
  const bool slice = obj.resource == "resourceslices.resource.k8s.io";
  if (!slice && obj.resource != "devicetaintrules.resource.k8s.io") return out;
  if (obj.body.find(kUnhealthyTaintKey) == std::string::npos) return out;
  const json body = ParseBody(obj.body);
  const json& spec = At(body, "spec");
  if (!slice) {
    const json& selector = At(spec, "deviceSelector");
    if (Str(At(spec, "taint"), "key") == kUnhealthyTaintKey) {
      out.push_back({Str(selector, "driver"), Str(selector, "pool"), Str(selector, "device")});
    }
    return out;
  }
  const std::string driver = Str(spec, "driver");
  const std::string pool = Str(At(spec, "pool"), "name");
  ForEach(At(spec, "devices"), [&](const json& d) {
    const json& name = At(d, "name");
    if (!name.is_string()) return;
    bool unhealthy = false;
    ForEach(At(d, "taints"),
            [&](const json& t) { unhealthy = unhealthy || Str(t, "key") == kUnhealthyTaintKey; });
    if (unhealthy) out.push_back({driver, pool, name.get<std::string>()});
  });
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

DeviceTaintRule DecodeDeviceTaintRuleSelector(const Object& rule) {
  const json body = ParseBody(rule.body);
  const json& selector = At(At(body, "spec"), "deviceSelector");
  DeviceTaintRule out;
  out.name = rule.meta.name;
  out.driver = Str(selector, "driver");
  out.pool = Str(selector, "pool");
  out.device = Str(selector, "device");
  return out;
}

Node DecodeNode(const Object& node) {
  json scratch;
  const json& body = BodyJson(node, scratch);
  Node out;
  out.name = node.meta.name;
  out.labels = node.meta.labels;
  const json& spec = At(body, "spec");
  const json& unschedulable = At(spec, "unschedulable");
  out.unschedulable = unschedulable.is_boolean() && unschedulable.get<bool>();
  ForEach(At(spec, "taints"), [&](const json& t) {
    Taint taint{Str(t, "key"), Str(t, "value"), Str(t, "effect"), std::nullopt};
    std::chrono::system_clock::time_point added;
    if (const std::string at = Str(t, "timeAdded"); !at.empty() && ParseRfc3339(at, &added)) {
      taint.time_added = added;
    }
    out.taints.push_back(std::move(taint));
  });
  ForEach(At(At(body, "status"), "conditions"), [&](const json& c) {
    if (Str(c, "type") == "Ready") out.ready = Str(c, "status") == "True";
  });
  return out;
}

namespace {

// Reads spec.terminationGracePeriodSeconds of a pod body and stops there; values of other
// fields are skipped by the parser without being stored.
class GracePeriodReader final : public json::json_sax_t {
 public:
  std::optional<int64_t> value;

  bool null() override { return Scalar(); }
  bool boolean(bool) override { return Scalar(); }
  bool number_integer(number_integer_t v) override { return Integer(v); }
  bool number_unsigned(number_unsigned_t v) override {
    if (v > static_cast<number_unsigned_t>(std::numeric_limits<int64_t>::max())) return Scalar();
    return Integer(static_cast<int64_t>(v));
  }
  bool number_float(number_float_t, const string_t&) override { return Scalar(); }
  bool string(string_t&) override { return Scalar(); }
  bool binary(binary_t&) override { return Scalar(); }
  bool start_object(std::size_t) override {
    if (depth_ == 1) in_spec_ = key_ == "spec";
    ++depth_;
    key_.clear();
    return true;
  }
  bool key(string_t& k) override {
    key_ = k;
    return true;
  }
  bool end_object() override {
    --depth_;
    return !(depth_ == 1 && in_spec_);  // leaving spec without the field: done
  }
  bool start_array(std::size_t) override {
    ++depth_;
    key_.clear();
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const json::exception&) override {
    return false;
  }

 private:
  bool Scalar() {
    if (depth_ == 2 && in_spec_ && key_ == "terminationGracePeriodSeconds") return false;
    return true;
  }
  bool Integer(int64_t v) {
    if (depth_ == 2 && in_spec_ && key_ == "terminationGracePeriodSeconds") {
      value = v;
      return false;  // found: stop
    }
    return true;
  }

  int depth_ = 0;         // 1: in the body object; 2: in one of its fields' objects
  bool in_spec_ = false;  // that field is spec
  std::string key_;       // the last key read
};

}  // namespace

std::optional<int64_t> PodTerminationGracePeriodSeconds(const Object& pod) {
  GracePeriodReader reader;
  json::sax_parse(pod.body, &reader);
  return reader.value;
}

Pod DecodePod(const Object& pod) {
  json scratch;
  return DecodePod(BodyJson(pod, scratch));
}

void DecodePodStatus(const json& body, Pod& out) {
  const json& status = At(body, "status");
  out.phase = Str(status, "phase");
  out.resource_claim_statuses.clear();
  ForEach(At(status, "resourceClaimStatuses"), [&](const json& s) {
    out.resource_claim_statuses.push_back({Str(s, "name"), Str(s, "resourceClaimName")});
  });
  const json& extended = At(status, "extendedResourceClaimStatus");
  out.extended_resource_claim_name = Str(extended, "resourceClaimName");
  out.extended_resource_request_mappings.clear();
  ForEach(At(extended, "requestMappings"), [&](const json& m) {
    out.extended_resource_request_mappings.push_back(
        {Str(m, "containerName"), Str(m, "resourceName"), Str(m, "requestName")});
  });
}

Pod DecodePod(const json& body) {
  Pod out;
  const json& spec = At(body, "spec");
  out.node_name = Str(spec, "nodeName");
  out.priority = Int(At(spec, "priority")).value_or(0);
  out.termination_grace_period_seconds = Int(At(spec, "terminationGracePeriodSeconds"));
  if (const json& selector = At(spec, "nodeSelector"); selector.is_object()) {
    for (const auto& [k, v] : selector.items()) {
      if (v.is_string()) out.node_selector[k] = v.get<std::string>();
    }
  }
  const json& required = At(At(At(spec, "affinity"), "nodeAffinity"),
                            "requiredDuringSchedulingIgnoredDuringExecution");
  if (required.is_object()) {
    auto selector = DecodeNodeSelector(required, "spec.affinity");
    if (selector.ok()) out.required_affinity = *std::move(selector);
  }
  ForEach(At(spec, "tolerations"), [&](const json& t) {
    out.tolerations.push_back({Str(t, "key"), Str(t, "operator"), Str(t, "value"), Str(t, "effect"),
                               Int(At(t, "tolerationSeconds"))});
  });
  ForEach(At(spec, "resourceClaims"), [&](const json& rc) {
    out.resource_claims.push_back(
        {Str(rc, "name"), Str(rc, "resourceClaimName"), Str(rc, "resourceClaimTemplateName")});
  });
  ForEach(At(spec, "containers"), [&](const json& c) {
    ContainerResources container{Str(c, "name"), {}};
    const json& resources = At(c, "resources");
    std::set<std::string> seen;  // a limit wins over a request, whatever its type
    for (const char* list : {"limits", "requests"}) {
      const json& amounts = At(resources, list);
      if (!amounts.is_object()) continue;
      for (const auto& [k, v] : amounts.items()) {
        if (!seen.insert(k).second) continue;
        if (v.is_string()) {
          container.amounts[k] = v.get<std::string>();
        } else if (v.is_number_integer()) {
          container.amounts[k] = std::to_string(v.get<int64_t>());
        }
      }
    }
    out.containers.push_back(std::move(container));
  });
  // The text of [nodeSelector, affinity, tolerations] (absent ones null), written without
  // building that array.
  out.placement_signature = "[";
  AppendJson(At(spec, "nodeSelector"), &out.placement_signature);
  out.placement_signature += ',';
  AppendJson(At(spec, "affinity"), &out.placement_signature);
  out.placement_signature += ',';
  AppendJson(At(spec, "tolerations"), &out.placement_signature);
  out.placement_signature += ']';
  DecodePodStatus(body, out);
  return out;
}

QuotaHard DecodeQuotaHard(const Object& quota) {
  QuotaHard out;
  const json body = ParseBody(quota.body);
  const json& hard = At(At(body, "spec"), "hard");
  if (!hard.is_object()) return out;
  for (const auto& [key, v] : hard.items()) {
    auto q = ParseQuantity(v.is_string() ? v.get<std::string>() : v.dump());
    out[key] = q.ok() ? std::optional<Quantity>(*q) : std::nullopt;
  }
  return out;
}

std::string QuotaBodyWithStatus(const Object& quota, const std::map<std::string, int64_t>& used) {
  json body = ParseBody(quota.body);
  const json& hard = At(At(body, "spec"), "hard");
  json status = {{"hard", hard.is_object() ? hard : json::object()}, {"used", json::object()}};
  for (const auto& [key, v] : status["hard"].items()) {
    auto u = used.find(key);
    status["used"][key] = std::to_string(u == used.end() ? 0 : u->second);
  }
  if (At(body, "status") == status) return "";
  body["status"] = std::move(status);
  return Write(body);
}

Object EncodeEvent(const Event& event, Object base) {
  json involved = {{"kind", event.involved.kind},
                   {"name", event.involved.name},
                   {"uid", event.involved.uid},
                   {"apiVersion", event.involved.api_version}};
  if (!event.involved.namespace_.empty()) involved["namespace"] = event.involved.namespace_;
  if (!event.involved.resource_version.empty()) {
    involved["resourceVersion"] = event.involved.resource_version;
  }
  json body = {{"involvedObject", std::move(involved)},
               {"reason", event.reason},
               {"message", event.message},
               {"type", event.type},
               {"count", 1},
               {"firstTimestamp", event.timestamp},
               {"lastTimestamp", event.timestamp},
               {"source", {{"component", event.component}}},
               {"reportingComponent", event.component}};
  base.body = Write(body);
  base.spec_digest = SpecDigestOf(body);
  if (const ResourceType* events = FindResourceTypeByKey("events")) {
    base.fields = SelectableFields(*events, body);
  }
  return base;
}

NodeRelations NodeRelationsOf(const json& hub) {
  NodeRelations out;
  out.name = Str(At(hub, "metadata"), "name");
  out.spec_node_name = Str(At(hub, "spec"), "nodeName");
  const json& terms =
      At(At(At(At(hub, "status"), "allocation"), "nodeSelector"), "nodeSelectorTerms");
  ForEach(terms, [&](const json& term) {
    for (const char* list : {"matchFields", "matchExpressions"}) {
      ForEach(At(term, list), [&](const json& req) {
        const std::string key = Str(req, "key");
        if (key != "metadata.name" && key != "kubernetes.io/hostname") return;
        if (Str(req, "operator") != "In") return;
        const json& values = At(req, "values");
        if (values.is_array() && values.size() == 1 && values[0].is_string()) {
          out.allocated_nodes.push_back(values[0].get<std::string>());
        }
      });
    }
  });
  return out;
}

NodeRelations NodeRelationsOf(const Object& obj) {
  NodeRelations out = NodeRelationsOf(ParseBody(obj.body));
  out.name = obj.meta.name;
  return out;
}

std::optional<NodeRelations> NodeRelationsOf(const json* hub) {
  if (hub == nullptr) return std::nullopt;
  return NodeRelationsOf(*hub);
}

StoredAllocation DecodeStoredAllocation(const std::string& body) {
  StoredAllocation out;
  const json parsed = Read(body);
  if (parsed.is_discarded()) {
    out.present = true;  // nothing can be read, so nothing can be taken for absent
    out.error = "the body is not JSON";
    return out;
  }
  return StoredAllocationOf(parsed);
}

StoredAllocation StoredAllocationOf(const json& body) {
  StoredAllocation out;
  const json& allocation = At(At(body, "status"), "allocation");
  if (allocation.is_null()) return out;
  out.present = true;
  if (!allocation.is_object()) {
    out.error = "status.allocation: must be an object";
    return out;
  }
  auto decoded = DecodeAllocationResult(allocation, "status.allocation");
  if (decoded.ok()) {
    out.decoded = *std::move(decoded);
  } else {
    out.error = std::string(decoded.status().message());
  }
  return out;
}

ResourceClaimStatus DecodeResourceClaimStatus(const json& body) {
  ResourceClaimStatus out;
  const json& status = At(body, "status");
  ForEach(At(status, "reservedFor"), [&](const json& r) {
    out.reserved_for.push_back(
        {Str(r, "apiGroup"), Str(r, "resource"), Str(r, "name"), Str(r, "uid")});
  });
  ForEach(At(status, "devices"), [&](const json& d) {
    ForEach(At(d, "conditions"), [&](const json& c) {
      out.prepared |= Str(c, "type") == "Ready" && Str(c, "status") == "True";
    });
  });
  return out;
}

AllocatedRefs ReadAllocatedRefs(const std::string& body) {
  AllocatedRefs out;
  const json parsed = Read(body);
  if (parsed.is_discarded()) {
    out.unreadable = true;
    return out;
  }
  const json& allocation = At(At(parsed, "status"), "allocation");
  if (allocation.is_null()) return out;
  const json& devices = At(allocation, "devices");
  const json& results = At(devices, "results");
  // No results at all is an allocation of no devices; results that cannot be read at all could
  // be anything.
  out.unreadable = !allocation.is_object() || !(devices.is_null() || devices.is_object()) ||
                   !(results.is_null() || results.is_array());
  ForEach(results, [&](const json& r) {
    const json& admin = At(r, "adminAccess");
    out.results.push_back({Str(r, "driver"), Str(r, "pool"), Str(r, "device"),
                           admin.is_boolean() && admin.get<bool>()});
  });
  return out;
}

std::string EncodeCapacityMap(const std::map<std::string, Quantity>& capacity) {
  json out = json::object();
  for (const auto& [name, q] : capacity) out[name] = q.String();
  return Write(out);
}

}  // namespace qm::model::json
