#include "api/grpc/node_agent_api.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <optional>
#include <set>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "api/rest/codec.h"
#include "api/rest/validation.h"
#include "common/quantity.h"
#include "common/status.h"
#include "common/utf8.h"
#include "model/json/stored.h"
#include "model/names.h"
#include "model/resource_types.h"
#include "service/audit_log.h"
#include "service/graceful_deletion.h"
#include "service/node_restriction.h"
#include "spdlog/spdlog.h"

namespace qm::api::nodeapi {
namespace {

using nlohmann::json;

constexpr int kMaxAttempts = 8;
constexpr size_t kMaxMessage = 1024;  // condition and health messages kept (DRA's health limit)
constexpr size_t kMaxErrorsShown = 20;

const model::ResourceType& NodeType() { return *model::FindResourceType("", "nodes"); }
const model::ResourceType& PodType() { return *model::FindResourceType("", "pods"); }
const model::ResourceType& SliceType() {
  return *model::FindResourceType(model::kResourceGroup, "resourceslices");
}
const model::ResourceType& ClaimType() {
  return *model::FindResourceType(model::kResourceGroup, "resourceclaims");
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

std::string Truncate(const std::string& s, size_t max) {
  if (s.size() <= max) return SanitizeUtf8(s);
  return SanitizeUtf8(s.substr(0, max - 3)) + "...";
}

// "prefix.field: message; ..." for a list of validation problems.
absl::Status InvalidFields(const std::string& prefix, const model::FieldErrors& errors) {
  std::vector<std::string> parts;
  for (const auto& e : errors) {
    if (parts.size() == kMaxErrorsShown) {
      parts.push_back("and " + std::to_string(errors.size() - kMaxErrorsShown) + " more");
      break;
    }
    std::string path = prefix;
    if (!e.field.empty()) path += (path.empty() ? "" : ".") + e.field;
    parts.push_back(path + ": " + e.Message());
  }
  return absl::InvalidArgumentError(absl::StrJoin(parts, "; "));
}

// Kubernetes' NewForbidden wording for an admission refusal.
absl::Status Forbidden(const model::ResourceType& type, const std::string& name,
                       const absl::Status& st) {
  if (!absl::IsPermissionDenied(st)) return st;
  return absl::PermissionDeniedError(type.GroupResource() + " \"" + name +
                                     "\" is forbidden: " + std::string(st.message()));
}

enum class ConditionStyle { kPod, kNode, kMeta };

// Sets condition `type` in obj.status.conditions (or in the array `conditions`). The transition
// time moves only when the status does. Returns whether anything but a heartbeat time changed.
bool SetCondition(json& conditions, const std::string& type, const std::string& status,
                  const std::string& reason, const std::string& message, const std::string& now,
                  ConditionStyle style) {
  if (!conditions.is_array()) conditions = json::array();
  for (auto& c : conditions) {
    if (Str(c, "type") != type) continue;
    if (style == ConditionStyle::kNode) c["lastHeartbeatTime"] = now;
    if (Str(c, "status") == status && Str(c, "reason") == reason && Str(c, "message") == message) {
      return false;
    }
    if (Str(c, "status") != status) c["lastTransitionTime"] = now;
    c["status"] = status;
    c["reason"] = reason;
    if (message.empty()) {
      c.erase("message");
    } else {
      c["message"] = message;
    }
    return true;
  }
  json c = {{"type", type}, {"status", status}, {"lastTransitionTime", now}, {"reason", reason}};
  if (!message.empty()) c["message"] = message;
  if (style == ConditionStyle::kNode) c["lastHeartbeatTime"] = now;
  if (style == ConditionStyle::kPod) c["lastProbeTime"] = nullptr;
  conditions.push_back(std::move(c));
  return true;
}

// The key a claim's allocation result and its status.devices entry share.
std::string DeviceKey(const json& entry) {
  std::string key = Str(entry, "driver") + "/" + Str(entry, "pool") + "/" + Str(entry, "device");
  if (std::string share = Str(entry, "shareID"); !share.empty()) key += "/" + share;
  return key;
}

// The names of the claims a pod uses: direct references, claims generated from templates
// (status.resourceClaimStatuses) and the extended-resource claim.
std::vector<std::string> PodClaimNames(const json& pod) {
  std::vector<std::string> out;
  const json& status = At(pod, "status");
  const json& statuses = At(status, "resourceClaimStatuses");
  const json& claims = At(At(pod, "spec"), "resourceClaims");
  for (size_t i = 0; claims.is_array() && i < claims.size(); ++i) {
    std::string direct = Str(claims[i], "resourceClaimName");
    if (!direct.empty()) {
      out.push_back(direct);
      continue;
    }
    for (size_t j = 0; statuses.is_array() && j < statuses.size(); ++j) {
      if (Str(statuses[j], "name") == Str(claims[i], "name")) {
        std::string generated = Str(statuses[j], "resourceClaimName");
        if (!generated.empty()) out.push_back(generated);
      }
    }
  }
  std::string extended = Str(At(status, "extendedResourceClaimStatus"), "resourceClaimName");
  if (!extended.empty()) out.push_back(extended);
  return out;
}

// How far a claim's devices are prepared: every allocated device has a Ready=True entry in
// status.devices (kReady), some device has Ready=False (kFailed, with the message), or neither.
enum class Prepared { kReady, kFailed, kPending };
Prepared ClaimPrepared(const json& claim, std::string* message) {
  const json& status = At(claim, "status");
  const json& results = At(At(At(status, "allocation"), "devices"), "results");
  if (!results.is_array() || results.empty()) return Prepared::kPending;
  std::map<std::string, const json*> entries;
  const json& devices = At(status, "devices");
  for (size_t i = 0; devices.is_array() && i < devices.size(); ++i) {
    entries[DeviceKey(devices[i])] = &devices[i];
  }
  bool pending = false;
  for (const auto& r : results) {
    auto it = entries.find(DeviceKey(r));
    if (it == entries.end()) {
      pending = true;
      continue;
    }
    const json& conditions = At(*it->second, "conditions");
    std::string ready;
    for (size_t i = 0; conditions.is_array() && i < conditions.size(); ++i) {
      if (Str(conditions[i], "type") == "Ready") {
        ready = Str(conditions[i], "status");
        if (ready == "False") *message = DeviceKey(r) + ": " + Str(conditions[i], "message");
      }
    }
    if (ready == "False") return Prepared::kFailed;
    if (ready != "True") pending = true;
  }
  return pending ? Prepared::kPending : Prepared::kReady;
}

// Splits "a,b" (an annotation value) into its non-empty parts.
std::set<std::string> SplitList(const std::string& s) {
  std::set<std::string> out;
  for (absl::string_view part : absl::StrSplit(s, ',')) {
    if (!part.empty()) out.insert(std::string(part));
  }
  return out;
}

// How an object is written: the main resource, or its status subresource.
enum class Scope { kObject, kStatus };

}  // namespace

NodeAgentApi::NodeAgentApi(service::ObjectService& objects, service::WatchHub& hub,
                           AssignmentRouter& router, const service::Authorizer& authorizer,
                           const Clock& clock, service::AuditLog* audit,
                           NodeAgentApiOptions options)
    : objects_(objects),
      hub_(hub),
      router_(router),
      authorizer_(authorizer),
      clock_(clock),
      audit_(audit),
      options_(options) {}

store::AuditRecord NodeAgentApi::Record(const Caller& caller, const std::string& verb,
                                        const std::string& group, const std::string& resource,
                                        const std::string& subresource,
                                        const std::string& namespace_,
                                        const std::string& name) const {
  store::AuditRecord r;
  r.time = clock_.Now();
  r.request_id = caller.request_id;
  r.user = caller.user.name;
  r.groups = caller.user.groups;
  r.verb = verb;
  r.api_group = group;
  r.resource = resource;
  r.subresource = subresource;
  r.namespace_ = namespace_;
  r.name = name;
  r.code = verb == "create" ? 201 : 200;
  r.source = caller.peer;
  r.user_agent = SanitizeUtf8(caller.user_agent.substr(0, 256));
  return r;
}

absl::Status NodeAgentApi::Authorize(const Caller& caller, const std::string& verb,
                                     const std::string& group, const std::string& resource,
                                     const std::string& subresource, const std::string& namespace_,
                                     const std::string& name) {
  service::AuthzAttributes a;
  a.verb = verb;
  a.api_group = group;
  a.resource = resource;
  a.subresource = subresource;
  a.namespace_name = namespace_;
  a.name = name;
  if (authorizer_.Authorize(caller.user, a).allowed) return absl::OkStatus();
  if (audit_ != nullptr) {
    store::AuditRecord r = Record(caller, verb, group, resource, subresource, namespace_, name);
    r.code = 403;
    audit_->Record(std::move(r));
  }
  return absl::PermissionDeniedError(service::ForbiddenMessage(caller.user, a));
}

absl::Status NodeAgentApi::CheckNode(const Caller& caller, const std::string& node) {
  if (node.empty()) return absl::InvalidArgumentError("node_name: Required value");
  if (auto errors = model::IsDns1123Subdomain(node); !errors.empty()) {
    return absl::InvalidArgumentError("node_name: Invalid value: " + model::Quote(node) + ": " +
                                      errors.front());
  }
  auto own = service::NodeNameOf(caller.user);
  if (own.has_value() && *own != node) {
    if (audit_ != nullptr) {
      store::AuditRecord r = Record(caller, "update", "", "nodes", "", "", node);
      r.code = 403;
      audit_->Record(std::move(r));
    }
    return absl::PermissionDeniedError("node \"" + *own +
                                       "\" may only act for itself, not for node \"" + node + "\"");
  }
  return absl::OkStatus();
}

namespace {

// Applies `change` to `current`'s hub JSON and, when that changed something, returns the object
// to store as REST would write it: validated (the object's rules, or the status rules for a
// status write) and admitted by node restriction for `user`. nullopt when nothing changed.
absl::StatusOr<std::optional<model::Object>> Revise(
    const auth::UserInfo& user, const model::ResourceType& type, const model::Object& current,
    Scope scope, const std::function<absl::StatusOr<bool>(json&)>& change) {
  const json old = FromObject(type, current);
  json next = old;
  QM_ASSIGN_OR_RETURN(bool changed, change(next));
  if (!changed) return std::nullopt;
  next["metadata"].erase("resourceVersion");
  model::FieldErrors errors;
  if (scope == Scope::kStatus) {
    errors = ValidateStatusUpdate(type, next, old);
  } else {
    errors = ValidateObject(type, next, &old);
    if (type.has_status && errors.empty()) errors = ValidateStatusUpdate(type, next, old);
  }
  if (!errors.empty()) return InvalidFields("", errors);
  QM_RETURN_IF_ERROR(
      Forbidden(type, current.meta.name,
                service::AdmitNodeWrite(user, type.kind, scope == Scope::kStatus ? "status" : "",
                                        model::json::NodeRelationsOf(old),
                                        model::json::NodeRelationsOf(next))));
  QM_ASSIGN_OR_RETURN(model::Object revised, ToObject(type, std::move(next)));
  return std::optional<model::Object>(std::move(revised));
}

// Reads `key`, applies `change` (Revise) and, when that changed something, writes the result
// with optimistic concurrency (a concurrent write makes `change` run again on the fresh
// object). Returns the stored object, or nullopt when nothing changed. The caller holds the
// AuditScope.
absl::StatusOr<std::optional<model::Object>> WriteChange(
    service::ObjectService& objects, const auth::UserInfo& user, const model::ResourceType& type,
    const model::ResourceKey& key, Scope scope,
    const std::function<absl::StatusOr<bool>(json&)>& change) {
  QM_ASSIGN_OR_RETURN(model::Object got, objects.Get(key));
  QM_ASSIGN_OR_RETURN(auto probe, Revise(user, type, got, scope, change));
  if (!probe.has_value()) return std::nullopt;
  QM_ASSIGN_OR_RETURN(
      model::Object updated,
      objects.Update(
          key,
          [&](const model::Object& current) -> absl::StatusOr<model::Object> {
            QM_ASSIGN_OR_RETURN(auto next, Revise(user, type, current, scope, change));
            if (next.has_value()) return std::move(*next);
            model::Object same = current;  // changed back meanwhile: write it as it is
            same.meta.resource_version = 0;
            return same;
          },
          /*dry_run=*/false));
  return std::optional<model::Object>(std::move(updated));
}

}  // namespace

// ---- Register ------------------------------------------------------------------------------

absl::StatusOr<v1::RegisterResponse> NodeAgentApi::Register(const Caller& caller,
                                                            const v1::RegisterRequest& request) {
  const std::string& node = request.node_name();
  QM_RETURN_IF_ERROR(CheckNode(caller, node));
  for (const auto& [name, value] : request.capacity()) {
    if (auto q = ParseQuantity(value); !q.ok()) {
      return absl::InvalidArgumentError("capacity[" + name +
                                        "]: Invalid value: " + model::Quote(value) + ": " +
                                        std::string(q.status().message()));
    }
  }
  const model::ResourceType& type = NodeType();
  // Labels the agent owns: what it reports now plus the hostname label, as the kubelet sets it.
  std::map<std::string, std::string> labels(request.labels().begin(), request.labels().end());
  labels["kubernetes.io/hostname"] = node;
  std::vector<std::string> keys;
  for (const auto& [k, v] : labels) keys.push_back(k);
  const std::string managed = absl::StrJoin(keys, ",");

  auto apply = [&](json& obj) -> absl::StatusOr<bool> {
    const json before = obj;
    const std::string now = FormatRfc3339(clock_.Now());
    json& meta = obj["metadata"];
    if (!meta["labels"].is_object()) meta["labels"] = json::object();
    if (!meta["annotations"].is_object()) meta["annotations"] = json::object();
    json& lbl = meta["labels"];
    json& ann = meta["annotations"];
    // Merged, not replaced: labels an admin set stay; labels this agent set before and no
    // longer reports go (node-feature-discovery does the same with its annotation).
    for (const auto& k : SplitList(Str(ann, kAgentLabelsAnnotation))) {
      if (!labels.contains(k)) lbl.erase(k);
    }
    for (const auto& [k, v] : labels) lbl[k] = v;
    ann[kAgentLabelsAnnotation] = managed;
    if (!request.agent_version().empty()) ann[kAgentVersionAnnotation] = request.agent_version();
    json& status = obj["status"];
    if (!status.is_object()) status = json::object();
    if (!request.capacity().empty()) {
      json cap = json::object();
      for (const auto& [k, v] : request.capacity()) cap[k] = v;
      status["capacity"] = cap;
      status["allocatable"] = cap;
    }
    const auto& info = request.node_info();
    json& ni = status["nodeInfo"];
    if (!ni.is_object()) ni = json::object();
    for (const auto& [field, value] :
         {std::pair<const char*, std::string>{"operatingSystem", info.operating_system()},
          {"architecture", info.architecture()},
          {"kernelVersion", info.kernel_version()},
          {"osImage", info.os_image()},
          {"machineID", info.machine_id()},
          {"bootID", info.boot_id()}}) {
      if (!value.empty()) ni[field] = value;
    }
    // What `kubectl get nodes` shows as VERSION: the node daemon's, as a kubelet's would be.
    if (!request.agent_version().empty())
      ni["kubeletVersion"] = "qm-agent/" + request.agent_version();
    SetCondition(status["conditions"], "Ready", "True", "AgentReady",
                 "qm-agent is posting ready status", now, ConditionStyle::kNode);
    return obj != before;
  };

  for (int attempt = 0;; ++attempt) {
    auto existing = objects_.Get(model::ResourceKey{"nodes", "", node});
    if (absl::IsNotFound(existing.status())) {
      QM_RETURN_IF_ERROR(Authorize(caller, "create", "", "nodes", "", "", node));
      json obj = {{"apiVersion", "v1"},
                  {"kind", "Node"},
                  {"metadata", {{"name", node}}},
                  {"spec", json::object()}};
      QM_RETURN_IF_ERROR(apply(obj).status());
      json hub = ToHub(type, "v1", std::move(obj), clock_);
      if (auto errors = ValidateObject(type, hub, nullptr); !errors.empty()) {
        return InvalidFields("", errors);
      }
      QM_RETURN_IF_ERROR(Forbidden(type, node,
                                   service::AdmitNodeWrite(caller.user, "Node", "", std::nullopt,
                                                           model::json::NodeRelationsOf(hub))));
      QM_ASSIGN_OR_RETURN(model::Object o, ToObject(type, std::move(hub)));
      store::AuditRecord record = Record(caller, "create", "", "nodes", "", "", node);
      absl::StatusOr<model::Object> created;
      {
        store::AuditScope scope(&record);
        created = objects_.Create(std::move(o), false);
      }
      if (absl::IsAlreadyExists(created.status()) && attempt + 1 < kMaxAttempts) continue;
      QM_RETURN_IF_ERROR(created.status());
      {
        qm::MutexLock lock(&mu_);
        ready_written_[node] = std::chrono::steady_clock::now();
        last_heard_[node] = clock_.Now();
        if (leases_kept_) unflushed_[node] = last_heard_[node];
      }
      v1::RegisterResponse resp;
      resp.set_node_uid(created->meta.uid);
      resp.set_resource_version(created->meta.resource_version);
      resp.set_heartbeat_interval_seconds(options_.heartbeat_interval_seconds);
      return resp;
    }
    QM_RETURN_IF_ERROR(existing.status());
    QM_RETURN_IF_ERROR(Authorize(caller, "update", "", "nodes", "", "", node));
    QM_RETURN_IF_ERROR(Authorize(caller, "update", "", "nodes", "status", "", node));
    store::AuditRecord record = Record(caller, "update", "", "nodes", "", "", node);
    store::AuditScope scope(&record);
    auto written = WriteChange(objects_, caller.user, type, existing->Key(), Scope::kObject, apply);
    if (absl::IsNotFound(written.status()) && attempt + 1 < kMaxAttempts) continue;
    QM_RETURN_IF_ERROR(written.status());
    {
      qm::MutexLock lock(&mu_);
      ready_written_[node] = std::chrono::steady_clock::now();
      last_heard_[node] = clock_.Now();
      if (leases_kept_) unflushed_[node] = last_heard_[node];
    }
    const model::Object& now = written->has_value() ? **written : *existing;
    v1::RegisterResponse resp;
    resp.set_node_uid(now.meta.uid);
    resp.set_resource_version(now.meta.resource_version);
    resp.set_heartbeat_interval_seconds(options_.heartbeat_interval_seconds);
    return resp;
  }
}

// ---- PublishResources ----------------------------------------------------------------------

absl::StatusOr<v1::PublishResourcesResponse> NodeAgentApi::PublishResources(
    const Caller& caller, const v1::PublishResourcesRequest& request) {
  const std::string& node = request.node_name();
  const std::string& driver = request.driver();
  QM_RETURN_IF_ERROR(CheckNode(caller, node));
  if (driver.empty()) return absl::InvalidArgumentError("driver: Required value");
  if (auto errors = model::IsDns1123Subdomain(driver); !errors.empty()) {
    return absl::InvalidArgumentError("driver: Invalid value: " + model::Quote(driver) + ": " +
                                      errors.front());
  }
  std::set<std::string> pool_names;
  for (int i = 0; i < request.pools_size(); ++i) {
    const auto& pool = request.pools(i);
    const std::string path = "pools[" + std::to_string(i) + "]";
    if (pool.name().empty()) return absl::InvalidArgumentError(path + ".name: Required value");
    if (!pool_names.insert(pool.name()).second) {
      return absl::InvalidArgumentError(path +
                                        ".name: Duplicate value: " + model::Quote(pool.name()));
    }
    if (pool.slices_size() == 0) {
      return absl::InvalidArgumentError(path +
                                        ".slices: Required value: a pool has at least "
                                        "one slice");
    }
    if (pool.generation() < 0) {
      return absl::InvalidArgumentError(
          path + ".generation: Invalid value: " + std::to_string(pool.generation()) +
          ": must be greater than or equal to 0");
    }
  }
  for (const char* verb : {"create", "update", "delete"}) {
    QM_RETURN_IF_ERROR(
        Authorize(caller, verb, model::kResourceGroup, "resourceslices", "", "", ""));
  }
  const model::ResourceType& type = SliceType();

  for (int attempt = 0;; ++attempt) {
    service::ListRequest list_request;
    list_request.store.resource = type.GroupResource();
    QM_ASSIGN_OR_RETURN(list_request.fields,
                        model::FieldSelector::Parse("spec.nodeName=" + node, type.field_selectors));
    QM_ASSIGN_OR_RETURN(store::ListResult list, objects_.List(list_request));
    std::map<std::string, std::pair<const model::Object*, json>> existing;  // this driver's
    std::map<std::string, int64_t> stored_generation;                       // by pool
    for (const auto& obj : list.items) {
      auto it = obj.fields.find("spec.driver");
      if (it == obj.fields.end() || it->second != driver) continue;
      json hub = FromObject(type, obj);
      const json& pool = At(At(hub, "spec"), "pool");
      const json& gen = At(pool, "generation");
      int64_t& g = stored_generation[Str(pool, "name")];
      if (gen.is_number_integer()) g = std::max(g, gen.get<int64_t>());
      existing.emplace(obj.meta.name, std::make_pair(&obj, std::move(hub)));
    }

    struct Desired {
      std::string name;
      json hub;
      const model::Object* current = nullptr;
      const json* current_hub = nullptr;
    };
    std::vector<Desired> desired;
    std::set<std::string> desired_names;
    v1::PublishResourcesResponse resp;
    model::FieldErrors all_errors;
    std::string first_prefix;
    for (int i = 0; i < request.pools_size(); ++i) {
      const auto& pool = request.pools(i);
      const size_t count = static_cast<size_t>(pool.slices_size());
      const int64_t stored =
          stored_generation.contains(pool.name()) ? stored_generation[pool.name()] : 0;
      // Compare the published content with what is stored, generations aside.
      bool changed = false;
      const size_t first = desired.size();
      for (size_t j = 0; j < count; ++j) {
        Desired d;
        d.name = SliceName(node, driver, pool.name(), j, count);
        d.hub = ToHub(type, "v1",
                      SliceJson(pool.slices(static_cast<int>(j)), d.name, node, driver, pool.name(),
                                stored, static_cast<int64_t>(count)),
                      clock_);
        auto it = existing.find(d.name);
        if (it != existing.end()) {
          d.current = it->second.first;
          d.current_hub = &it->second.second;
          json a = At(d.hub, "spec"), b = At(*d.current_hub, "spec");
          a["pool"].erase("generation");
          if (b.is_object() && b.contains("pool") && b["pool"].is_object()) {
            b["pool"].erase("generation");
          }
          if (a != b) changed = true;
        } else {
          changed = true;
        }
        desired_names.insert(d.name);
        desired.push_back(std::move(d));
      }
      for (const auto& [name, entry] : existing) {
        if (Str(At(At(entry.second, "spec"), "pool"), "name") == pool.name() &&
            !desired_names.contains(name)) {
          changed = true;
        }
      }
      int64_t generation = pool.generation();
      const std::string path = "pools[" + std::to_string(i) + "]";
      if (generation == 0) {
        generation = changed || stored == 0 ? stored + 1 : stored;
      } else if (generation < stored) {
        return absl::FailedPreconditionError(
            path + ".generation: stale: " + std::to_string(generation) +
            " is older than the stored generation " + std::to_string(stored) + " of pool " +
            model::Quote(pool.name()));
      } else if (generation == stored && changed) {
        return absl::FailedPreconditionError(
            path + ".generation: " + std::to_string(generation) + " of pool " +
            model::Quote(pool.name()) +
            " is already published with different devices; publish a higher generation (or 0)");
      }
      auto* published = resp.add_pools();
      published->set_name(pool.name());
      published->set_generation(generation);
      for (size_t j = first; j < desired.size(); ++j) {
        Desired& d = desired[j];
        d.hub["spec"]["pool"]["generation"] = generation;
        // Metadata others may have set (labels, annotations) stays as it is.
        if (d.current_hub != nullptr) d.hub["metadata"] = (*d.current_hub)["metadata"];
        auto errors = ValidateObject(type, d.hub, d.current_hub);
        const std::string prefix = path + ".slices[" + std::to_string(j - first) + "]";
        for (auto& e : errors) {
          e.field = prefix + (e.field.empty() ? "" : "." + e.field);
          all_errors.push_back(std::move(e));
        }
        published->add_slice_names(d.name);
      }
    }
    if (!all_errors.empty()) return InvalidFields("", all_errors);

    std::vector<service::BatchWrite> writes;
    for (auto& d : desired) {
      QM_RETURN_IF_ERROR(
          Forbidden(type, d.name,
                    service::AdmitNodeWrite(caller.user, "ResourceSlice", "",
                                            model::json::NodeRelationsOf(d.current_hub),
                                            model::json::NodeRelationsOf(d.hub))));
      if (d.current_hub != nullptr && At(d.hub, "spec") == At(*d.current_hub, "spec")) continue;
      d.hub["metadata"].erase("resourceVersion");
      QM_ASSIGN_OR_RETURN(model::Object obj, ToObject(type, d.hub));
      service::BatchWrite w;
      w.object = std::move(obj);
      if (d.current != nullptr) {
        w.kind = service::BatchWrite::Kind::kUpdate;
        w.current = *d.current;
      } else {
        w.kind = service::BatchWrite::Kind::kCreate;
      }
      writes.push_back(std::move(w));
    }
    for (const auto& [name, entry] : existing) {
      if (desired_names.contains(name)) continue;
      QM_RETURN_IF_ERROR(Forbidden(
          type, name,
          service::AdmitNodeWrite(caller.user, "ResourceSlice", "",
                                  model::json::NodeRelationsOf(entry.second), std::nullopt)));
      service::BatchWrite w;
      w.kind = service::BatchWrite::Kind::kDelete;
      w.current = *entry.first;
      writes.push_back(std::move(w));
    }
    resp.set_resource_version(list.resource_version);
    if (writes.empty()) {
      resp.set_changed(false);
      return resp;
    }
    store::AuditRecord record =
        Record(caller, "update", model::kResourceGroup, "resourceslices", "", "", "");
    absl::StatusOr<std::vector<model::Object>> committed;
    {
      store::AuditScope scope(&record);
      committed = objects_.CommitBatch(std::move(writes));
    }
    if ((absl::IsAborted(committed.status()) || absl::IsAlreadyExists(committed.status()) ||
         absl::IsNotFound(committed.status())) &&
        attempt + 1 < kMaxAttempts) {
      continue;  // a concurrent writer: recompute from the fresh state
    }
    QM_RETURN_IF_ERROR(committed.status());
    int64_t rv = 0;
    for (const auto& o : *committed) rv = std::max(rv, o.meta.resource_version);
    resp.set_resource_version(rv);
    resp.set_changed(true);
    return resp;
  }
}

// ---- Assignments and reports ---------------------------------------------------------------

absl::StatusOr<std::shared_ptr<AssignmentFeed>> NodeAgentApi::WatchAssignments(
    const Caller& caller, const v1::WatchAssignmentsRequest& request) {
  QM_RETURN_IF_ERROR(CheckNode(caller, request.node_name()));
  QM_RETURN_IF_ERROR(Authorize(caller, "get", model::kResourceGroup, "resourceclaims", "", "", ""));
  for (int i = 0; i < request.prepared_size(); ++i) {
    if (request.prepared(i).claim().uid().empty()) {
      return absl::InvalidArgumentError("prepared[" + std::to_string(i) +
                                        "].claim.uid: Required value");
    }
  }
  std::vector<std::string> drivers(request.drivers().begin(), request.drivers().end());
  std::vector<v1::PreparedRef> prepared(request.prepared().begin(), request.prepared().end());
  return router_.Open(request.node_name(), drivers, prepared, request.resource_version());
}

namespace {

absl::Status CheckClaimRef(const v1::ClaimRef& claim) {
  if (claim.namespace_().empty())
    return absl::InvalidArgumentError("claim.namespace: Required value");
  if (claim.name().empty()) return absl::InvalidArgumentError("claim.name: Required value");
  if (claim.uid().empty()) return absl::InvalidArgumentError("claim.uid: Required value");
  return absl::OkStatus();
}

absl::Status NotThisClaim(const v1::ClaimRef& claim) {
  return absl::NotFoundError("resourceclaim " + claim.namespace_() + "/" + claim.name() +
                             " with uid " + claim.uid() + " not found");
}

}  // namespace

absl::StatusOr<v1::ReportPreparedResponse> NodeAgentApi::ReportPrepared(
    const Caller& caller, const v1::ReportPreparedRequest& request) {
  const std::string& node = request.node_name();
  const v1::ClaimRef& claim = request.claim();
  QM_RETURN_IF_ERROR(CheckNode(caller, node));
  QM_RETURN_IF_ERROR(CheckClaimRef(claim));
  if (request.driver().empty()) return absl::InvalidArgumentError("driver: Required value");
  QM_RETURN_IF_ERROR(Authorize(caller, "update", model::kResourceGroup, "resourceclaims", "status",
                               claim.namespace_(), claim.name()));
  const model::ResourceType& type = ClaimType();
  const model::ResourceKey key{type.GroupResource(), claim.namespace_(), claim.name()};
  std::vector<std::string> consumers;

  auto change = [&](json& obj) -> absl::StatusOr<bool> {
    if (Str(At(obj, "metadata"), "uid") != claim.uid()) return NotThisClaim(claim);
    if (model::AllocatedNode(model::json::NodeRelationsOf(obj)) != node) {
      return absl::PermissionDeniedError(type.GroupResource() + " \"" + claim.name() +
                                         "\" is forbidden: it is not allocated to node \"" + node +
                                         "\"");
    }
    json& status = obj["status"];
    const json& allocation = At(status, "allocation");
    if (!request.allocation_id().empty() &&
        AllocationId(claim.uid(), allocation) != request.allocation_id()) {
      return absl::FailedPreconditionError("resourceclaim " + claim.namespace_() + "/" +
                                           claim.name() + " was allocated anew since allocation " +
                                           request.allocation_id() +
                                           " was assigned; prepare the current assignment");
    }
    consumers.clear();
    const json& reserved = At(status, "reservedFor");
    for (size_t i = 0; reserved.is_array() && i < reserved.size(); ++i) {
      if (Str(reserved[i], "resource") == "pods") consumers.push_back(Str(reserved[i], "name"));
    }
    // This driver's allocated devices.
    std::map<std::string, const json*> allocated;
    const json& results = At(At(allocation, "devices"), "results");
    for (size_t i = 0; results.is_array() && i < results.size(); ++i) {
      if (Str(results[i], "driver") == request.driver()) {
        allocated[DeviceKey(results[i])] = &results[i];
      }
    }
    const std::string now = FormatRfc3339(clock_.Now());
    const json& gen = At(At(obj, "metadata"), "generation");
    const json before = At(status, "devices");
    std::map<std::string, json> old_entries;
    json devices = json::array();
    for (size_t i = 0; before.is_array() && i < before.size(); ++i) {
      if (Str(before[i], "driver") == request.driver()) {
        old_entries[DeviceKey(before[i])] = before[i];
      } else {
        devices.push_back(before[i]);
      }
    }
    auto entry_for = [&](const std::string& dkey, const json& result) -> json& {
      json e = {{"driver", request.driver()},
                {"pool", Str(result, "pool")},
                {"device", Str(result, "device")}};
      if (std::string share = Str(result, "shareID"); !share.empty()) e["shareID"] = share;
      auto old = old_entries.find(dkey);
      e["conditions"] = old != old_entries.end() ? At(old->second, "conditions") : json::array();
      devices.push_back(std::move(e));
      return devices.back();
    };
    std::set<std::string> reported;
    for (int i = 0; i < request.devices_size(); ++i) {
      const v1::PreparedDevice& d = request.devices(i);
      json probe = {{"driver", request.driver()}, {"pool", d.pool()}, {"device", d.device()}};
      if (!d.share_id().empty()) probe["shareID"] = d.share_id();
      const std::string dkey = DeviceKey(probe);
      auto it = allocated.find(dkey);
      if (it == allocated.end()) {
        return absl::InvalidArgumentError("devices[" + std::to_string(i) +
                                          "]: Invalid value: " + model::Quote(dkey) +
                                          ": must be a device allocated to the claim");
      }
      if (!reported.insert(dkey).second) {
        return absl::InvalidArgumentError("devices[" + std::to_string(i) +
                                          "]: Duplicate value: " + model::Quote(dkey));
      }
      json& e = entry_for(dkey, *it->second);
      std::string error = d.error().empty() ? request.error() : d.error();
      if (error.empty()) {
        SetCondition(e["conditions"], "Ready", "True", "Prepared",
                     "prepared by qm-agent on node " + node, now, ConditionStyle::kMeta);
        e["data"] = {{"cdiDeviceIDs", std::vector<std::string>(d.cdi_device_ids().begin(),
                                                               d.cdi_device_ids().end())}};
      } else {
        SetCondition(e["conditions"], "Ready", "False", "PrepareFailed",
                     Truncate(error, kMaxMessage), now, ConditionStyle::kMeta);
      }
    }
    // A claim-wide error marks every device of this driver that was not reported.
    for (const auto& [dkey, result] : allocated) {
      if (reported.contains(dkey)) continue;
      if (request.error().empty()) {
        if (auto old = old_entries.find(dkey); old != old_entries.end()) {
          devices.push_back(old->second);
        }
        continue;
      }
      json& e = entry_for(dkey, *result);
      SetCondition(e["conditions"], "Ready", "False", "PrepareFailed",
                   Truncate(request.error(), kMaxMessage), now, ConditionStyle::kMeta);
    }
    for (auto& e : devices) {
      if (Str(e, "driver") != request.driver()) continue;
      for (auto& c : e["conditions"]) {
        if (gen.is_number_integer()) c["observedGeneration"] = gen;
      }
    }
    if (devices == before || (devices.empty() && before.is_null())) return false;
    if (devices.empty()) {
      status.erase("devices");
    } else {
      status["devices"] = std::move(devices);
    }
    return true;
  };

  // The claim's status and its pods' condition (and finalizer) in one transaction: computed
  // from what is stored, committed together, computed again when another write came between.
  const model::ResourceType& pod_type = PodType();
  store::AuditRecord record = Record(caller, "update", model::kResourceGroup, "resourceclaims",
                                     "status", claim.namespace_(), claim.name());
  store::AuditScope scope(&record);
  // The first try computes from the object cache's copies (no store reads); the commit is
  // conditional on their resourceVersions, so stale copies cost a try from the store's. Where a
  // cached copy needs no change (a repeated report, or a copy too old to show the binding), the
  // try is made again from the store's copies before anything is written.
  bool use_cache = true;
  for (int attempt = 0;; ++attempt) {
    bool cached = false;
    auto current = use_cache ? objects_.GetForWrite(key, &cached) : objects_.Get(key);
    if (absl::IsNotFound(current.status())) return NotThisClaim(claim);
    QM_RETURN_IF_ERROR(current.status());
    // `change` lists the claim's consumers before it decides whether the claim changes, so even
    // a report repeated after a reconnect (nothing new for the claim) brings pods that still
    // lack the condition up to date.
    QM_ASSIGN_OR_RETURN(auto next, Revise(caller.user, type, *current, Scope::kStatus, change));
    bool unsure = cached && !next.has_value();  // no change, judged on a cached copy
    const model::Object& reported = next.has_value() ? *next : *current;
    std::vector<service::BatchWrite> batch;
    if (next.has_value()) {
      batch.push_back({service::BatchWrite::Kind::kUpdate, *next, *current});
    }
    for (const auto& name : consumers) {
      const model::ResourceKey pod_key{"pods", claim.namespace_(), name};
      bool pod_cached = false;
      auto pod = use_cache ? objects_.GetForWrite(pod_key, &pod_cached) : objects_.Get(pod_key);
      if (absl::IsNotFound(pod.status())) continue;  // the pod is gone
      QM_RETURN_IF_ERROR(pod.status());
      auto revised = Revise(caller.user, pod_type, *pod, Scope::kStatus,
                            PodConditionChange(node, claim.namespace_(), reported));
      if (!revised.ok() && pod_cached) {
        unsure = true;  // judge the error on the store's copy
        continue;
      }
      if (!revised.ok()) {
        // The claim's report still counts; the pod condition follows the next report.
        spdlog::warn("request_id={} pod condition of {}/{}: {}", caller.request_id,
                     claim.namespace_(), name, revised.status().ToString());
        continue;
      }
      if (revised->has_value()) {
        batch.push_back({service::BatchWrite::Kind::kUpdate, std::move(**revised), *pod});
      } else {
        unsure |= pod_cached;
      }
      cached |= pod_cached;
    }
    if (unsure) {
      use_cache = false;
      continue;
    }
    auto committed = objects_.CommitBatch(std::move(batch));
    if (cached && (absl::IsAborted(committed.status()) || absl::IsNotFound(committed.status()))) {
      use_cache = false;  // a cached copy was stale
      continue;
    }
    if (absl::IsAborted(committed.status()) && attempt + 1 < kMaxAttempts) continue;
    QM_RETURN_IF_ERROR(committed.status());
    v1::ReportPreparedResponse resp;
    resp.set_resource_version(next.has_value() ? committed->front().meta.resource_version : 0);
    return resp;
  }
}

std::function<absl::StatusOr<bool>(json&)> NodeAgentApi::PodConditionChange(
    const std::string& node, const std::string& namespace_, const model::Object& reported) {
  return [this, node, namespace_, &reported](json& pod) -> absl::StatusOr<bool> {
    const model::ResourceType& claim_type = ClaimType();
    if (Str(At(pod, "spec"), "nodeName") != node) return false;
    int ready = 0, pending = 0;
    std::string failure;
    const auto claims = PodClaimNames(pod);
    for (const auto& claim_name : claims) {
      absl::StatusOr<model::Object> claim = reported;
      if (claim_name != reported.meta.name) {
        claim =
            objects_.Get(model::ResourceKey{claim_type.GroupResource(), namespace_, claim_name});
      }
      std::string message;
      Prepared p =
          claim.ok() ? ClaimPrepared(FromObject(claim_type, *claim), &message) : Prepared::kPending;
      if (p == Prepared::kReady) ++ready;
      if (p == Prepared::kPending) ++pending;
      if (p == Prepared::kFailed && failure.empty()) failure = claim_name + ": " + message;
    }
    // The agent holds devices for the pod: deleting it now waits for their unprepare
    // (graceful_deletion.h). A pod already terminating gets no new finalizer.
    bool finalizer_added = false;
    json& meta = pod["metadata"];
    if (ready > 0 && !meta.contains("deletionTimestamp")) {
      json& finalizers = meta["finalizers"];
      if (!finalizers.is_array()) finalizers = json::array();
      if (std::find(finalizers.begin(), finalizers.end(), service::kDevicesPreparedFinalizer) ==
          finalizers.end()) {
        finalizers.push_back(service::kDevicesPreparedFinalizer);
        finalizer_added = true;
      }
    }
    const std::string now = FormatRfc3339(clock_.Now());
    json& conditions = pod["status"]["conditions"];
    bool condition_changed = false;
    if (!failure.empty()) {
      condition_changed =
          SetCondition(conditions, kDevicesPreparedCondition, "False", "PrepareFailed",
                       Truncate(failure, kMaxMessage), now, ConditionStyle::kPod);
    } else if (pending > 0 || claims.empty()) {
      condition_changed = SetCondition(
          conditions, kDevicesPreparedCondition, "False", "WaitingForDevices",
          std::to_string(ready) + " of " + std::to_string(claims.size()) + " claims prepared", now,
          ConditionStyle::kPod);
    } else {
      condition_changed = SetCondition(
          conditions, kDevicesPreparedCondition, "True", "DevicesPrepared",
          "the devices of " + std::to_string(claims.size()) +
              (claims.size() == 1 ? " claim are" : " claims are") + " prepared on node " + node,
          now, ConditionStyle::kPod);
    }
    return condition_changed || finalizer_added;
  };
}

absl::StatusOr<v1::ReportUnpreparedResponse> NodeAgentApi::ReportUnprepared(
    const Caller& caller, const v1::ReportUnpreparedRequest& request) {
  const std::string& node = request.node_name();
  const v1::ClaimRef& claim = request.claim();
  QM_RETURN_IF_ERROR(CheckNode(caller, node));
  QM_RETURN_IF_ERROR(CheckClaimRef(claim));
  if (request.driver().empty()) return absl::InvalidArgumentError("driver: Required value");
  QM_RETURN_IF_ERROR(Authorize(caller, "update", model::kResourceGroup, "resourceclaims", "status",
                               claim.namespace_(), claim.name()));
  v1::ReportUnpreparedResponse resp;
  if (!request.error().empty()) {
    // The devices are still prepared; the agent keeps the claim and tries again.
    spdlog::warn("request_id={} node {} could not unprepare claim {}/{}: {}", caller.request_id,
                 node, claim.namespace_(), claim.name(), request.error());
    return resp;
  }
  const model::ResourceType& type = ClaimType();
  const model::ResourceKey key{type.GroupResource(), claim.namespace_(), claim.name()};
  auto change = [&](json& obj) -> absl::StatusOr<bool> {
    if (Str(At(obj, "metadata"), "uid") != claim.uid()) return false;
    // Deallocated (or moved on): the claim no longer concerns this node, which may not write
    // it; nothing of this node's is left to clear once the allocation is gone.
    if (model::AllocatedNode(model::json::NodeRelationsOf(obj)) != node) return false;
    json& status = obj["status"];
    json& devices = status["devices"];
    if (!devices.is_array()) {
      status.erase("devices");
      return false;
    }
    const size_t before = devices.size();
    json kept = json::array();
    for (const auto& e : devices) {
      if (Str(e, "driver") != request.driver()) kept.push_back(e);
    }
    if (kept.size() == before) return false;
    if (kept.empty()) {
      status.erase("devices");
    } else {
      devices = std::move(kept);
    }
    return true;
  };
  store::AuditRecord record = Record(caller, "update", model::kResourceGroup, "resourceclaims",
                                     "status", claim.namespace_(), claim.name());
  store::AuditScope scope(&record);
  auto written = WriteChange(objects_, caller.user, type, key, Scope::kStatus, change);
  if (absl::IsNotFound(written.status())) return resp;  // gone with its pod: nothing to clear
  QM_RETURN_IF_ERROR(written.status());
  if (written->has_value()) resp.set_resource_version((*written)->meta.resource_version);
  return resp;
}

// ---- Health and heartbeats -----------------------------------------------------------------

absl::StatusOr<v1::ReportHealthResponse> NodeAgentApi::ReportHealth(
    const Caller& caller, const v1::ReportHealthRequest& request) {
  const std::string& node = request.node_name();
  QM_RETURN_IF_ERROR(CheckNode(caller, node));
  if (request.driver().empty()) return absl::InvalidArgumentError("driver: Required value");
  QM_RETURN_IF_ERROR(Authorize(caller, "update", "", "nodes", "", "", node));
  json mine = json::object();
  v1::ReportHealthResponse resp;
  for (int i = 0; i < request.devices_size(); ++i) {
    const auto& d = request.devices(i);
    const std::string path = "devices[" + std::to_string(i) + "]";
    if (d.pool().empty()) return absl::InvalidArgumentError(path + ".pool: Required value");
    if (d.device().empty()) return absl::InvalidArgumentError(path + ".device: Required value");
    if (d.health() == v1::HEALTH_HEALTHY) continue;
    const bool unhealthy = d.health() == v1::HEALTH_UNHEALTHY;
    resp.set_unhealthy(resp.unhealthy() + (unhealthy ? 1 : 0));
    resp.set_unknown(resp.unknown() + (unhealthy ? 0 : 1));
    json entry = {{"health", unhealthy ? "Unhealthy" : "Unknown"}};
    if (!d.reason().empty()) entry["reason"] = Truncate(d.reason(), 128);
    if (!d.message().empty()) entry["message"] = Truncate(d.message(), kMaxMessage);
    mine[d.pool() + "/" + d.device()] = std::move(entry);
  }
  auto change = [&](json& obj) -> absl::StatusOr<bool> {
    const json before = obj;
    json& ann = obj["metadata"]["annotations"];
    if (!ann.is_object()) ann = json::object();
    json health = json::parse(Str(ann, kDeviceHealthAnnotation), nullptr, false);
    if (!health.is_object()) health = json::object();
    if (mine.empty()) {
      health.erase(request.driver());
    } else {
      health[request.driver()] = mine;
    }
    if (health.empty()) {
      ann.erase(kDeviceHealthAnnotation);
    } else {
      ann[kDeviceHealthAnnotation] = health.dump();
    }
    if (ann.empty()) obj["metadata"].erase("annotations");
    // The condition sums up every driver's report.
    std::vector<std::string> bad, unknown;
    for (const auto& [drv, devices] : health.items()) {
      if (!devices.is_object()) continue;
      for (const auto& [dev, e] : devices.items()) {
        std::string what = drv + "/" + dev;
        if (!Str(e, "reason").empty()) what += " (" + Str(e, "reason") + ")";
        (Str(e, "health") == "Unhealthy" ? bad : unknown).push_back(what);
      }
    }
    const std::string now = FormatRfc3339(clock_.Now());
    json& conditions = obj["status"]["conditions"];
    if (!bad.empty()) {
      SetCondition(conditions, kDevicesHealthyCondition, "False", "DevicesUnhealthy",
                   Truncate("unhealthy: " + absl::StrJoin(bad, ", "), kMaxMessage), now,
                   ConditionStyle::kNode);
    } else if (!unknown.empty()) {
      SetCondition(conditions, kDevicesHealthyCondition, "Unknown", "DevicesHealthUnknown",
                   Truncate("health unknown: " + absl::StrJoin(unknown, ", "), kMaxMessage), now,
                   ConditionStyle::kNode);
    } else {
      SetCondition(conditions, kDevicesHealthyCondition, "True", "DevicesHealthy", "", now,
                   ConditionStyle::kNode);
    }
    // A refreshed heartbeat time alone is not worth a write.
    json a = obj, b = before;
    for (json* o : {&a, &b}) {
      json& cs = (*o)["status"]["conditions"];
      for (auto& c : cs) {
        if (c.is_object()) c.erase("lastHeartbeatTime");
      }
    }
    return a != b;
  };
  store::AuditRecord record = Record(caller, "update", "", "nodes", "", "", node);
  store::AuditScope scope(&record);
  auto written = WriteChange(objects_, caller.user, NodeType(),
                             model::ResourceKey{"nodes", "", node}, Scope::kObject, change);
  if (absl::IsNotFound(written.status())) {
    return absl::FailedPreconditionError("node \"" + node + "\" is not registered; call Register");
  }
  QM_RETURN_IF_ERROR(written.status());
  std::map<std::string, std::pair<std::string, std::string>> unhealthy;  // pool/device -> reason
  for (const auto& d : request.devices()) {
    if (d.health() == v1::HEALTH_UNHEALTHY)
      unhealthy[d.pool() + "/" + d.device()] = {d.pool(), d.device()};
  }
  std::map<std::string, std::string> reasons;
  for (const auto& d : request.devices()) {
    if (d.health() == v1::HEALTH_UNHEALTHY) reasons[d.pool() + "/" + d.device()] = d.reason();
  }
  QM_RETURN_IF_ERROR(SyncHealthTaints(node, request.driver(), unhealthy, reasons));
  return resp;
}

namespace {

// Health reasons that mean the device cannot be used at all (NVIDIA's critical XIDs: fallen off
// the bus, uncorrectable ECC / row-remap failures, GSP or NVLink faults): their taint is
// NoExecute and evicts the workloads on the device. Any other unhealthy reason (a recoverable or
// unknown fault) is NoSchedule: nothing new lands on the device, what runs there stays.
bool UnusableReason(const std::string& reason) {
  static const std::set<std::string> kUnusable = {
      "XidCriticalError", "GpuLost",  "FallenOffBus", "UncorrectableEccError", "DoubleBitEccError",
      "RowRemapFailure",  "GspError", "NvlinkError",  "DeviceUnusable",
  };
  return kUnusable.contains(reason);
}

// A taint value must be a label value: at most 63 of [A-Za-z0-9._-], alphanumeric at the ends.
std::string TaintValue(const std::string& reason) {
  std::string v;
  for (char c : reason.substr(0, 63)) {
    v +=
        (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') ? c : '-';
  }
  while (!v.empty() && !std::isalnum(static_cast<unsigned char>(v.back()))) v.pop_back();
  while (!v.empty() && !std::isalnum(static_cast<unsigned char>(v.front()))) v.erase(0, 1);
  return v.empty() ? "Unhealthy" : v;
}

}  // namespace

absl::Status NodeAgentApi::SyncHealthTaints(
    const std::string& node, const std::string& driver,
    const std::map<std::string, std::pair<std::string, std::string>>& unhealthy,
    const std::map<std::string, std::string>& reasons) {
  const model::ResourceType& type =
      *model::FindResourceType(model::kResourceGroup, "devicetaintrules");
  // The server's own consequence of the agent's report: written as the node lifecycle
  // controller, not as the node (which may not write DeviceTaintRules).
  Caller controller;
  controller.user.name = "system:serviceaccount:kube-system:node-controller";
  controller.user.groups = {"system:serviceaccounts", "system:authenticated"};
  controller.request_id = "device-health";
  service::ListRequest list_request;
  list_request.store.resource = type.GroupResource();
  QM_ASSIGN_OR_RETURN(store::ListResult list, objects_.List(list_request));
  std::map<std::string, model::Object> existing;  // ours for this node and driver, by name
  for (auto& o : list.items) {
    auto it = o.meta.labels.find(kHealthNodeLabel);
    if (it == o.meta.labels.end() || it->second != node) continue;
    const json body = json::parse(o.body, nullptr, false);
    if (Str(At(At(body, "spec"), "deviceSelector"), "driver") != driver) continue;
    existing.emplace(o.meta.name, std::move(o));
  }
  std::set<std::string> wanted;
  for (const auto& [key, where] : unhealthy) {
    const auto& [pool, device] = where;
    std::string pool_part = pool;
    std::replace(pool_part.begin(), pool_part.end(), '/', '.');
    const std::string name = "unhealthy." + driver + "." + pool_part + "." + device;
    if (!model::IsDns1123Subdomain(name).empty()) {
      spdlog::warn("device {}/{}/{} is unhealthy but {} is not a valid rule name", driver, pool,
                   device, name);
      continue;
    }
    wanted.insert(name);
    const std::string reason = reasons.contains(key) ? reasons.at(key) : "";
    const std::string effect = UnusableReason(reason) ? "NoExecute" : "NoSchedule";
    const std::string value = TaintValue(reason);
    if (auto it = existing.find(name); it != existing.end()) {
      const json body = json::parse(it->second.body, nullptr, false);
      const json& taint = At(At(body, "spec"), "taint");
      if (Str(taint, "effect") == effect && Str(taint, "value") == value) continue;
      store::AuditRecord record =
          Record(controller, "update", model::kResourceGroup, "devicetaintrules", "", "", name);
      store::AuditScope scope(&record);
      auto updated = WriteChange(objects_, controller.user, type, it->second.Key(), Scope::kObject,
                                 [&](json& o) -> absl::StatusOr<bool> {
                                   o["spec"]["taint"]["effect"] = effect;
                                   o["spec"]["taint"]["value"] = value;
                                   o["spec"]["taint"].erase("timeAdded");
                                   return true;
                                 });
      if (!updated.ok() && !absl::IsNotFound(updated.status())) return updated.status();
      continue;
    }
    json obj = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "DeviceTaintRule"},
                {"metadata", {{"name", name}, {"labels", {{kHealthNodeLabel, node}}}}},
                {"spec",
                 {{"deviceSelector", {{"driver", driver}, {"pool", pool}, {"device", device}}},
                  {"taint", {{"key", kUnhealthyTaint}, {"value", value}, {"effect", effect}}}}}};
    json hub = ToHub(type, "v1", std::move(obj), clock_);
    if (auto errors = ValidateObject(type, hub, nullptr); !errors.empty()) {
      return InvalidFields("", errors);
    }
    QM_ASSIGN_OR_RETURN(model::Object o, ToObject(type, std::move(hub)));
    store::AuditRecord record =
        Record(controller, "create", model::kResourceGroup, "devicetaintrules", "", "", name);
    store::AuditScope scope(&record);
    auto created = objects_.Create(std::move(o), false);
    if (!created.ok() && !absl::IsAlreadyExists(created.status())) return created.status();
    spdlog::info("device {}/{}/{} unhealthy ({}): tainted {}={}:{}", driver, pool, device, reason,
                 kUnhealthyTaint, value, effect);
  }
  for (const auto& [name, o] : existing) {
    if (wanted.contains(name)) continue;
    store::AuditRecord record =
        Record(controller, "delete", model::kResourceGroup, "devicetaintrules", "", "", name);
    store::AuditScope scope(&record);
    auto deleted = objects_.Delete(o.Key(), service::DeleteOptions{});
    if (!deleted.ok() && !absl::IsNotFound(deleted.status())) return deleted.status();
    spdlog::info("device taint rule {} removed: the device reports healthy again", name);
  }
  return absl::OkStatus();
}

absl::Status NodeAgentApi::CheckHeartbeat(const Caller& caller, const std::string& node) {
  QM_RETURN_IF_ERROR(CheckNode(caller, node));
  return Authorize(caller, "update", "", "nodes", "status", "", node);
}

bool NodeAgentApi::NoteHeartbeat(const std::string& node) {
  NoteHeard(node);
  const auto now = std::chrono::steady_clock::now();
  {
    qm::MutexLock lock(&mu_);
    auto it = ready_written_.find(node);
    if (it == ready_written_.end() || now - it->second >= options_.heartbeat_write_interval) {
      return true;
    }
  }
  // Recently written: write again only if someone (a node monitor, an admin) changed Ready.
  const model::ResourceKey key{"nodes", "", node};
  auto rv = hub_.ResourceVersionOf(key);
  if (!rv.has_value()) return true;
  {
    qm::MutexLock lock(&mu_);
    auto it = ready_seen_.find(node);
    if (it != ready_seen_.end() && it->second.first == *rv) return !it->second.second;
  }
  auto cached = hub_.Find(key);
  if (!cached.has_value()) return true;
  json body = json::parse(cached->body, nullptr, false);
  const json& conditions = At(At(body, "status"), "conditions");
  bool ready = false;
  for (size_t i = 0; conditions.is_array() && i < conditions.size(); ++i) {
    if (Str(conditions[i], "type") == "Ready") ready = Str(conditions[i], "status") == "True";
  }
  qm::MutexLock lock(&mu_);
  ready_seen_[node] = {cached->meta.resource_version, ready};
  return !ready;
}

absl::Status NodeAgentApi::WriteHeartbeat(const Caller& caller, const std::string& node) {
  const auto now = std::chrono::steady_clock::now();
  auto change = [&](json& obj) -> absl::StatusOr<bool> {
    SetCondition(obj["status"]["conditions"], "Ready", "True", kAgentReadyReason,
                 "qm-agent is posting ready status", FormatRfc3339(clock_.Now()),
                 ConditionStyle::kNode);
    return true;  // the heartbeat time is the point of the write
  };
  store::AuditRecord record = Record(caller, "update", "", "nodes", "status", "", node);
  store::AuditScope scope(&record);
  auto written = WriteChange(objects_, caller.user, NodeType(),
                             model::ResourceKey{"nodes", "", node}, Scope::kStatus, change);
  if (absl::IsNotFound(written.status())) {
    return absl::FailedPreconditionError("node \"" + node + "\" is not registered; call Register");
  }
  QM_RETURN_IF_ERROR(written.status());
  qm::MutexLock lock(&mu_);
  ready_written_[node] = now;
  return absl::OkStatus();
}

absl::StatusOr<v1::HeartbeatResponse> NodeAgentApi::Heartbeat(const Caller& caller,
                                                              const v1::HeartbeatRequest& request) {
  const std::string& node = request.node_name();
  QM_RETURN_IF_ERROR(CheckHeartbeat(caller, node));
  if (NoteHeartbeat(node)) QM_RETURN_IF_ERROR(WriteHeartbeat(caller, node));
  v1::HeartbeatResponse resp;
  resp.set_heartbeat_interval_seconds(options_.heartbeat_interval_seconds);
  return resp;
}

// ---- Node lifecycle ------------------------------------------------------------------------

NodeAgentApi::~NodeAgentApi() { StopNodeMonitor(); }

void NodeAgentApi::StopNodeMonitor() {
  {
    qm::MutexLock lock(&mu_);
    monitor_stopping_ = true;
  }
  monitor_wake_.SignalAll();
  if (monitor_.joinable()) monitor_.join();
}

void NodeAgentApi::NoteHeard(const std::string& node) {
  const auto now = clock_.Now();
  qm::MutexLock lock(&mu_);
  last_heard_[node] = now;
  if (leases_kept_) unflushed_[node] = now;
}

absl::Status NodeAgentApi::FlushHeartbeats() {
  std::map<std::string, std::chrono::system_clock::time_point> batch;
  {
    qm::MutexLock lock(&mu_);
    batch.swap(unflushed_);
  }
  if (batch.empty()) return absl::OkStatus();
  absl::Status st = objects_.store().RenewNodeLeases(batch);
  qm::MutexLock lock(&mu_);
  if (absl::IsUnimplemented(st)) {
    leases_kept_ = false;  // this server alone hears its nodes
    unflushed_.clear();
    return absl::OkStatus();
  }
  if (!st.ok()) {
    // Kept for the next flush (a later heartbeat of the same node wins).
    for (auto& [node, at] : batch) {
      auto [it, inserted] = unflushed_.try_emplace(node, at);
      if (!inserted) it->second = std::max(it->second, at);
    }
  }
  return st;
}

void NodeAgentApi::StartNodeMonitor() {
  const auto period = std::clamp<std::chrono::milliseconds>(options_.node_monitor_grace_period / 4,
                                                            std::chrono::milliseconds(100),
                                                            std::chrono::milliseconds(5000));
  monitor_ = std::thread([this, period] {
    qm::MutexLock lock(&mu_);
    for (;;) {
      const auto deadline = std::chrono::steady_clock::now() + period;
      while (!monitor_stopping_ && monitor_wake_.WaitUntil(&mu_, deadline)) {
      }
      if (monitor_stopping_) return;
      mu_.Unlock();
      try {
        auto changed = MonitorNodesOnce();
        if (!changed.ok()) spdlog::warn("node monitor: {}", changed.status().ToString());
      } catch (const std::exception& e) {
        spdlog::error("node monitor: unexpected exception: {}", e.what());
      }
      mu_.Lock();
    }
  });
}

absl::StatusOr<int> NodeAgentApi::MonitorNodesOnce() {
  if (auto st = FlushHeartbeats(); !st.ok()) {
    spdlog::warn("node monitor: cannot write node leases: {}", st.ToString());
  }
  // What other replicas heard. Unreadable: judge by what this server heard (and say so).
  std::map<std::string, std::chrono::system_clock::time_point> leases;
  bool kept;
  {
    qm::MutexLock lock(&mu_);
    kept = leases_kept_;
  }
  if (kept) {
    auto read = objects_.store().NodeLeases();
    if (read.ok()) {
      leases = std::move(*read);
    } else if (!absl::IsUnimplemented(read.status())) {
      spdlog::warn("node monitor: cannot read node leases: {}", read.status().ToString());
    }
  }
  // Every Node's name and resourceVersion as of the store's current revision; a Node itself is
  // read (and decoded) only when its resourceVersion is new to the monitor.
  QM_ASSIGN_OR_RETURN(const int64_t current, objects_.store().CurrentRevision());
  auto listed = hub_.Versions("nodes", current);
  std::vector<std::pair<model::ResourceKey, int64_t>> versions;
  std::map<std::string, model::Object> fetched;  // without a cache: the store's listing
  if (listed.ok()) {
    versions = std::move(*listed);
  } else {
    service::ListRequest request;
    request.store.resource = "nodes";
    QM_ASSIGN_OR_RETURN(store::ListResult list, objects_.List(request));
    for (auto& o : list.items) {
      versions.emplace_back(o.Key(), o.meta.resource_version);
      fetched.emplace(o.meta.name, std::move(o));
    }
  }
  const auto now = clock_.Now();
  const std::string now_text = FormatRfc3339(now);
  // Writes are the server's own, not a caller's: audited as the node lifecycle controller.
  Caller controller;
  controller.user.name = "system:serviceaccount:kube-system:node-controller";
  controller.user.groups = {"system:serviceaccounts", "system:authenticated"};
  controller.request_id = "node-monitor";
  int changed = 0;
  std::set<std::string> present;
  for (const auto& [key, resource_version] : versions) {
    const std::string& name = key.name;
    present.insert(name);
    // What the monitor reads of a node, decoded once per resourceVersion.
    MonitoredNode seen;
    bool known = false;
    {
      qm::MutexLock lock(&mu_);
      auto it = monitored_.find(name);
      if (it != monitored_.end() && it->second.resource_version == resource_version) {
        seen = it->second;
        known = true;
      }
    }
    if (!known) {
      std::optional<model::Object> node;
      if (auto f = fetched.find(name); f != fetched.end()) {
        node = std::move(f->second);
      } else {
        node = hub_.Find(key);
      }
      if (!node.has_value()) continue;  // deleted since
      const json obj = FromObject(NodeType(), *node);
      seen.resource_version = node->meta.resource_version;
      const json& conditions = At(At(obj, "status"), "conditions");
      for (size_t i = 0; conditions.is_array() && i < conditions.size(); ++i) {
        if (Str(conditions[i], "type") != "Ready") continue;
        seen.ready_status = Str(conditions[i], "status");
        seen.ready_reason = Str(conditions[i], "reason");
      }
      const json& taints = At(At(obj, "spec"), "taints");
      for (size_t i = 0; taints.is_array() && i < taints.size(); ++i) {
        if (Str(taints[i], "key") == kUnreachableTaint) ++seen.tainted;
      }
      qm::MutexLock lock(&mu_);
      monitored_[name] = seen;
    }
    const std::string& ready_status = seen.ready_status;
    const std::string& ready_reason = seen.ready_reason;
    if (ready_reason != kAgentReadyReason && ready_reason != kNodeStatusUnknownReason) continue;
    const int tainted = seen.tainted;  // unreachable taints: NoSchedule and NoExecute make 2
    std::chrono::system_clock::time_point heard;
    {
      qm::MutexLock lock(&mu_);
      auto [it, inserted] = last_heard_.try_emplace(name, now);
      heard = it->second;
    }
    if (auto lease = leases.find(name); lease != leases.end()) {
      heard = std::max(heard, lease->second);
    }
    const bool stale = now - heard >= options_.node_monitor_grace_period;
    if (stale && tainted >= 2 && ready_status == "Unknown") continue;  // already marked
    if (!stale && tainted == 0) continue;  // fine (Heartbeat itself writes Ready=True)
    auto change = [&](json& o) -> absl::StatusOr<bool> {
      json& spec = o["spec"];
      if (!spec.is_object()) spec = json::object();
      json kept = json::array();
      bool had_no_schedule = false, had_no_execute = false;
      if (spec["taints"].is_array()) {
        for (const auto& t : spec["taints"]) {
          if (Str(t, "key") == kUnreachableTaint) {
            had_no_schedule = had_no_schedule || Str(t, "effect") == "NoSchedule";
            had_no_execute = had_no_execute || Str(t, "effect") == "NoExecute";
            if (stale) kept.push_back(t);
          } else {
            kept.push_back(t);
          }
        }
      }
      bool any = false;
      if (stale) {
        if (!had_no_schedule) {
          kept.push_back({{"key", kUnreachableTaint}, {"effect", "NoSchedule"}});
          any = true;
        }
        if (!had_no_execute) {
          kept.push_back(
              {{"key", kUnreachableTaint}, {"effect", "NoExecute"}, {"timeAdded", now_text}});
          any = true;
        }
        // The heartbeat time is the agent's last one; the monitor does not move it.
        json& cs = o["status"]["conditions"];
        if (!cs.is_array()) cs = json::array();
        for (auto& c : cs) {
          if (Str(c, "type") != "Ready" || Str(c, "status") == "Unknown") continue;
          c["status"] = "Unknown";
          c["reason"] = kNodeStatusUnknownReason;
          c["message"] = "qm-agent stopped posting node status";
          c["lastTransitionTime"] = now_text;
          any = true;
        }
      } else {
        any = had_no_schedule || had_no_execute;
      }
      if (kept.empty()) {
        spec.erase("taints");
      } else {
        spec["taints"] = std::move(kept);
      }
      return any;
    };
    store::AuditRecord record = Record(controller, "update", "", "nodes", "", "", name);
    store::AuditScope scope(&record);
    auto written = WriteChange(objects_, controller.user, NodeType(), key, Scope::kObject, change);
    if (absl::IsNotFound(written.status())) continue;
    QM_RETURN_IF_ERROR(written.status());
    if (written->has_value()) {
      ++changed;
      if (stale) {
        spdlog::info("node {}: no heartbeat for {} ms: Ready=Unknown, tainted {}", name,
                     options_.node_monitor_grace_period.count(), kUnreachableTaint);
      } else {
        spdlog::info("node {}: heartbeating again: taint {} removed", name, kUnreachableTaint);
      }
    }
  }
  qm::MutexLock lock(&mu_);
  std::erase_if(last_heard_, [&](const auto& e) { return !present.contains(e.first); });
  std::erase_if(ready_seen_, [&](const auto& e) { return !present.contains(e.first); });
  std::erase_if(monitored_, [&](const auto& e) { return !present.contains(e.first); });
  return changed;
}

}  // namespace qm::api::nodeapi
