// NodeAgent.WatchAssignments, ReportPrepared and ReportUnprepared (node_agent_api.h).

#include "api/grpc/node_agent_api.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <set>

#include "api/grpc/node_agent_internal.h"
#include "api/rest/codec.h"
#include "common/status.h"
#include "model/json/edits.h"
#include "model/json/stored.h"
#include "model/resource_types.h"
#include "service/audit_log.h"
#include "service/graceful_deletion.h"
#include "service/node_restriction.h"
#include "spdlog/spdlog.h"

namespace qm::api::nodeapi {

namespace {

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

}  // namespace

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

absl::Status NodeAgentApi::CheckClaimReport(const Caller& caller, const std::string& node,
                                            const v1::ClaimRef& claim, const std::string& driver) {
  QM_RETURN_IF_ERROR(CheckNode(caller, node));
  QM_RETURN_IF_ERROR(CheckClaimRef(claim));
  if (driver.empty()) return absl::InvalidArgumentError("driver: Required value");
  return Authorize(caller, "update", model::kResourceGroup, "resourceclaims", "status",
                   claim.namespace_(), claim.name());
}

absl::StatusOr<v1::ReportPreparedResponse> NodeAgentApi::ReportPrepared(
    const Caller& caller, const v1::ReportPreparedRequest& request) {
  const std::string& node = request.node_name();
  const v1::ClaimRef& claim = request.claim();
  QM_RETURN_IF_ERROR(CheckClaimReport(caller, node, claim, request.driver()));
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
    std::vector<service::BatchWrite> batch;
    batch.reserve(1 + consumers.size());  // `reported` stays where it is
    if (next.has_value()) {
      batch.push_back({service::BatchWrite::Kind::kUpdate, std::move(*next), std::move(*current)});
    }
    const model::Object& reported = batch.empty() ? *current : batch.front().object;
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
        batch.push_back(
            {service::BatchWrite::Kind::kUpdate, std::move(**revised), std::move(*pod)});
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
      std::string message;
      Prepared p = Prepared::kPending;
      // BodyOf: the claim the same report just revised still holds the tree its text was
      // written from, which spares parsing it again.
      if (claim_name == reported.meta.name) {
        p = ClaimPrepared(model::json::BodyOf(reported)->value(), &message);
      } else if (auto other = objects_.Get(
                     model::ResourceKey{claim_type.GroupResource(), namespace_, claim_name});
                 other.ok()) {
        p = ClaimPrepared(model::json::BodyOf(*other)->value(), &message);
      }
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
  QM_RETURN_IF_ERROR(CheckClaimReport(caller, node, claim, request.driver()));
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

}  // namespace qm::api::nodeapi
