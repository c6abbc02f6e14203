// NodeAgent.ReportHealth and Heartbeat, and the node monitor (node_agent_api.h).

#include "api/grpc/node_agent_api.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <optional>
#include <set>

#include "absl/strings/str_join.h"
#include "api/grpc/node_agent_internal.h"
#include "api/rest/codec.h"
#include "api/rest/validation.h"
#include "common/status.h"
#include "model/json/read.h"
#include "model/names.h"
#include "model/resource_types.h"
#include "service/audit_log.h"
#include "service/graceful_deletion.h"
#include "spdlog/spdlog.h"

namespace qm::api::nodeapi {
namespace {

// WriteChange on the Node object of `node` (or its status): FAILED_PRECONDITION when the node
// was never registered. The caller holds the AuditScope.
absl::Status WriteRegisteredNode(service::ObjectService& objects, const auth::UserInfo& user,
                                 const std::string& node, Scope scope,
                                 const std::function<absl::StatusOr<bool>(json&)>& change) {
  auto written =
      WriteChange(objects, user, NodeType(), model::ResourceKey{"nodes", "", node}, scope, change);
  if (absl::IsNotFound(written.status())) {
    return absl::FailedPreconditionError("node \"" + node + "\" is not registered; call Register");
  }
  return written.status();
}

}  // namespace

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
  QM_RETURN_IF_ERROR(WriteRegisteredNode(objects_, caller.user, node, Scope::kObject, change));
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
  for (const auto& listed : list.items) {
    const model::Object& o = *listed;
    auto it = o.meta.labels.find(kHealthNodeLabel);
    if (it == o.meta.labels.end() || it->second != node) continue;
    const json body = model::json::Read(o.body);
    if (Str(At(At(body, "spec"), "deviceSelector"), "driver") != driver) continue;
    existing.emplace(o.meta.name, o);
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
      const json body = model::json::Read(it->second.body);
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
    json obj = {
        {"apiVersion", "resource.k8s.io/v1"},
        {"kind", "DeviceTaintRule"},
        {"metadata", {{"name", name}, {"labels", {{kHealthNodeLabel, node}}}}},
        {"spec",
         {{"deviceSelector", {{"driver", driver}, {"pool", pool}, {"device", device}}},
          {"taint", {{"key", model::kUnhealthyTaintKey}, {"value", value}, {"effect", effect}}}}}};
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
                 model::kUnhealthyTaintKey, value, effect);
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
  const auto heard = clock_.Now();
  const auto now = std::chrono::steady_clock::now();
  int64_t seen_rv = 0;
  bool seen_ready = false;
  {
    qm::MutexLock lock(&mu_);
    const NodeBeats& beats = NoteHeardLocked(node, heard);
    if (!beats.ready_written.has_value() ||
        now - *beats.ready_written >= options_.heartbeat_write_interval) {
      return true;
    }
    seen_rv = beats.ready_seen_rv;
    seen_ready = beats.ready_seen;
  }
  // Recently written: write again only if someone (a node monitor, an admin) changed Ready.
  const model::ResourceKey key{"nodes", "", node};
  auto rv = hub_.ResourceVersionOf(key);
  if (!rv.has_value()) return true;
  if (seen_rv != 0 && seen_rv == *rv) return !seen_ready;
  auto cached = hub_.Find(key);
  if (cached == nullptr) return true;
  json body = model::json::Read(cached->body);
  const json& conditions = At(At(body, "status"), "conditions");
  bool ready = false;
  for (size_t i = 0; conditions.is_array() && i < conditions.size(); ++i) {
    if (Str(conditions[i], "type") == "Ready") ready = Str(conditions[i], "status") == "True";
  }
  qm::MutexLock lock(&mu_);
  if (auto it = beats_.find(node); it != beats_.end()) {
    it->second.ready_seen_rv = cached->meta.resource_version;
    it->second.ready_seen = ready;
  }
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
  QM_RETURN_IF_ERROR(WriteRegisteredNode(objects_, caller.user, node, Scope::kStatus, change));
  qm::MutexLock lock(&mu_);
  beats_[node].ready_written = now;
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

NodeAgentApi::NodeBeats& NodeAgentApi::NoteHeardLocked(const std::string& node,
                                                       std::chrono::system_clock::time_point at) {
  NodeBeats& beats = beats_.try_emplace(node).first->second;
  beats.last_heard = at;
  if (leases_kept_ && !beats.unflushed) {
    beats.unflushed = true;
    unflushed_.push_back(node);
  }
  return beats;
}

void NodeAgentApi::NoteRegistered(const std::string& node) {
  const auto heard = clock_.Now();
  qm::MutexLock lock(&mu_);
  NoteHeardLocked(node, heard).ready_written = std::chrono::steady_clock::now();
}

absl::Status NodeAgentApi::FlushHeartbeats() {
  std::map<std::string, std::chrono::system_clock::time_point> batch;
  {
    qm::MutexLock lock(&mu_);
    for (std::string& node : unflushed_) {
      auto it = beats_.find(node);
      if (it == beats_.end() || !it->second.unflushed) continue;  // forgotten since
      it->second.unflushed = false;
      if (it->second.last_heard.has_value()) batch.emplace(std::move(node), *it->second.last_heard);
    }
    unflushed_.clear();
  }
  if (batch.empty()) return absl::OkStatus();
  absl::Status st = objects_.store().RenewNodeLeases(batch);
  qm::MutexLock lock(&mu_);
  if (absl::IsUnimplemented(st)) {
    leases_kept_ = false;  // this server alone hears its nodes
    for (const std::string& node : unflushed_) {
      if (auto it = beats_.find(node); it != beats_.end()) it->second.unflushed = false;
    }
    unflushed_.clear();
    return absl::OkStatus();
  }
  if (!st.ok()) {
    // Kept for the next flush, which writes the newest beat heard by then.
    for (const auto& [node, at] : batch) {
      auto it = beats_.find(node);
      if (it == beats_.end() || it->second.unflushed) continue;
      it->second.unflushed = true;
      unflushed_.push_back(node);
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
    for (const auto& o : list.items) {
      versions.emplace_back(o->Key(), o->meta.resource_version);
      fetched.emplace(o->meta.name, *o);
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
      std::shared_ptr<const model::Object> node;
      if (auto f = fetched.find(name); f != fetched.end()) {
        node = std::make_shared<const model::Object>(std::move(f->second));
      } else {
        node = hub_.Find(key);
      }
      if (node == nullptr) continue;  // deleted since
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
      NodeBeats& beats = beats_[name];
      if (!beats.last_heard.has_value()) beats.last_heard = now;  // first seen
      heard = *beats.last_heard;
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
  // A node missing from the cache was deleted, or registered a moment ago and not cached yet:
  // forget what the monitor and the Ready check keep, but not a recent Ready write (which
  // spares a new node's next beat a second write), nor a beat still to be flushed.
  const auto steady_now = std::chrono::steady_clock::now();
  for (auto it = beats_.begin(); it != beats_.end();) {
    NodeBeats& beats = it->second;
    if (present.contains(it->first)) {
      ++it;
      continue;
    }
    beats.ready_seen_rv = 0;
    const bool recent = beats.ready_written.has_value() &&
                        steady_now - *beats.ready_written < options_.heartbeat_write_interval;
    it = recent || beats.unflushed ? std::next(it) : beats_.erase(it);
  }
  std::erase_if(monitored_, [&](const auto& e) { return !present.contains(e.first); });
  return changed;
}

}  // namespace qm::api::nodeapi
