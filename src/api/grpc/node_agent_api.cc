#include "api/grpc/node_agent_api.h"

#include <functional>
#include <optional>
#include <set>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "api/grpc/node_agent_internal.h"
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

namespace qm::api::nodeapi::internal {
namespace {

constexpr size_t kMaxErrorsShown = 20;

}  // namespace

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

absl::Status Forbidden(const model::ResourceType& type, const std::string& name,
                       const absl::Status& st) {
  if (!absl::IsPermissionDenied(st)) return st;
  return absl::PermissionDeniedError(type.GroupResource() + " \"" + name +
                                     "\" is forbidden: " + std::string(st.message()));
}

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

}  // namespace qm::api::nodeapi::internal

namespace qm::api::nodeapi {
namespace {

// Splits "a,b" (an annotation value) into its non-empty parts.
std::set<std::string> SplitList(const std::string& s) {
  std::set<std::string> out;
  for (absl::string_view part : absl::StrSplit(s, ',')) {
    if (!part.empty()) out.insert(std::string(part));
  }
  return out;
}

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
      NoteRegistered(node);
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
    NoteRegistered(node);
    const model::Object& now = written->has_value() ? **written : *existing;
    v1::RegisterResponse resp;
    resp.set_node_uid(now.meta.uid);
    resp.set_resource_version(now.meta.resource_version);
    resp.set_heartbeat_interval_seconds(options_.heartbeat_interval_seconds);
    return resp;
  }
}

}  // namespace qm::api::nodeapi
