#include "service/scheduler.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/json/access.h"
#include "model/json/dra_json.h"
#include "model/json/fields.h"
#include "model/resource_types.h"
#include "nlohmann/json.hpp"
#include "service/decode_failures.h"
#include "service/graceful_deletion.h"
#include "service/ledger.h"
#include "service/node_restriction.h"
#include "service/placement.h"
#include "service/quota.h"
#include "spdlog/spdlog.h"

namespace qm::service {
namespace {

using model::json::At;
using model::json::Str;
using nlohmann::json;
using Body = std::shared_ptr<const json>;
using Allocation = std::shared_ptr<const std::optional<model::AllocationResult>>;
using CommitResult = absl::StatusOr<std::vector<model::Object>>;

constexpr char kPods[] = "pods";
constexpr char kEvents[] = "events";
constexpr char kNodes[] = "nodes";
constexpr char kClaims[] = "resourceclaims.resource.k8s.io";
constexpr char kTemplates[] = "resourceclaimtemplates.resource.k8s.io";
constexpr char kSlices[] = "resourceslices.resource.k8s.io";
constexpr char kClasses[] = "deviceclasses.resource.k8s.io";
constexpr char kTaintRules[] = "devicetaintrules.resource.k8s.io";
constexpr char kQuotas[] = "resourcequotas";

constexpr char kPodClaimNameAnnotation[] = "resource.kubernetes.io/pod-claim-name";
constexpr char kExtendedClaimAnnotation[] = "resource.kubernetes.io/extended-resource-claim";
constexpr char kDeleteProtection[] = "resource.kubernetes.io/delete-protection";
constexpr char kImplicitExtendedPrefix[] = "deviceclass.resource.kubernetes.io/";
constexpr char kSpreadAnnotation[] = "scheduling.quartermaster.io/spread";
constexpr char kUnreachableTaint[] = "node.kubernetes.io/unreachable";
// The taint a DeviceTaintRule that does not decode puts on the devices it may select.
constexpr size_t kMaxReservedFor = 256;
// Commits of one pass in flight at once (they share the store's group commits).
constexpr size_t kMaxInFlight = 256;
// How long the loop pauses after a pass ended with an exception.
constexpr auto kRestartDelay = std::chrono::milliseconds(500);
// kube-scheduler's podMaxInUnschedulablePodsDuration: an unschedulable pod is tried again after
// this long even when nothing relevant changed.
constexpr auto kUnschedulableFlush = std::chrono::minutes(5);

json Parse(const std::string& text) {
  json body = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return body.is_object() ? body : json::object();
}

// The whole object JSON the model/json decoders take.
json Whole(const model::Object& obj, const json& body) {
  json whole = body;
  whole["metadata"] = {
      {"name", obj.meta.name}, {"namespace", obj.meta.namespace_}, {"uid", obj.meta.uid}};
  return whole;
}

// The resource type of a storage resource name ("pods", "resourceclaims.resource.k8s.io").
const model::ResourceType& TypeOf(const std::string& resource) {
  for (const auto& t : model::AllResourceTypes()) {
    if (t.GroupResource() == resource) return t;
  }
  static const model::ResourceType* unknown = new model::ResourceType();
  return *unknown;
}

// `obj` with a new body, and the spec digest and field-selector values that go with it,
// computed as the REST codecs compute them.
model::Object WithBody(const model::Object& obj, const json& body) {
  model::Object out = obj;
  out.body = body.dump();
  const json& spec = At(body, "spec");
  out.spec_digest = spec.is_null() ? "" : spec.dump();
  out.fields = model::json::SelectableFields(TypeOf(out.resource), body);
  out.fields["metadata.name"] = out.meta.name;
  out.fields["metadata.namespace"] = out.meta.namespace_;
  return out;
}

// The uids of an object's owners.
std::vector<std::string> OwnerUids(const model::Object& obj) {
  std::vector<std::string> out;
  if (obj.meta.owner_references.empty()) return out;
  json refs = json::parse(obj.meta.owner_references, nullptr, false);
  if (!refs.is_array()) return out;
  for (const auto& r : refs) {
    if (r.is_object() && r.contains("uid") && r["uid"].is_string()) out.push_back(r["uid"]);
  }
  return out;
}

std::string OwnerReference(const model::Object& pod) {
  return json::array({{{"apiVersion", "v1"},
                       {"kind", "Pod"},
                       {"name", pod.meta.name},
                       {"uid", pod.meta.uid},
                       {"controller", true},
                       {"blockOwnerDeletion", true}}})
      .dump();
}

bool HasFinalizer(const model::Object& obj, const char* finalizer) {
  return std::find(obj.meta.finalizers.begin(), obj.meta.finalizers.end(), finalizer) !=
         obj.meta.finalizers.end();
}

struct ClaimView;

struct PodView {
  model::Object obj;
  Body body;
  bool terminal = false;
  bool deleting = false;
  std::string node_name;
  int64_t priority = 0;
  // Controller work of this pass not committed yet: claims generated for the pod (in the claim
  // map, marked uncommitted) and the pod body that records them (null: unchanged). It joins the
  // pod's binding or unschedulable status, or is committed on its own.
  std::vector<ClaimView*> new_claims;
  Body status_body;
  // The quota checks the store makes when the new claims are created (quota admission is
  // atomic with the create, whichever replica or client creates at the same time).
  std::vector<store::QuotaCheck> quota_checks;
  // The body the pod will have once its controller work is committed.
  const json& Current() const { return status_body != nullptr ? *status_body : *body; }
};

struct ClaimView {
  model::Object obj;
  Body body;
  Allocation allocation;            // decoded status.allocation (nullopt: not allocated)
  std::string allocation_error;     // why status.allocation does not decode ("": it does)
  bool generated = false;           // by the template or extended-resource controller
  bool uncommitted = false;         // generated by this pass and not in the store yet
  bool removed = false;             // deleted (or never created) by this pass
  std::vector<std::string> owners;  // owner uids

  // Whether the claim may hold devices: an allocation that does not decode counts.
  bool Holds() const { return allocation->has_value() || !allocation_error.empty(); }
};

// Sets (or replaces) the condition of `type` in status.conditions; returns true when the status
// changed (the transition time moves only when the status does).
bool SetCondition(json& body, const std::string& type, const std::string& status,
                  const std::string& reason, const std::string& message, const std::string& now) {
  json& conditions = body["status"]["conditions"];
  if (!conditions.is_array()) conditions = json::array();
  for (auto& c : conditions) {
    if (Str(c, "type") != type) continue;
    if (Str(c, "status") == status && Str(c, "reason") == reason && Str(c, "message") == message) {
      return false;
    }
    if (Str(c, "status") != status) c["lastTransitionTime"] = now;
    c["status"] = status;
    c["reason"] = reason;
    c["message"] = message;
    c["lastProbeTime"] = nullptr;
    return true;
  }
  json c = {
      {"type", type}, {"status", status}, {"lastProbeTime", nullptr}, {"lastTransitionTime", now}};
  if (!reason.empty()) c["reason"] = reason;
  if (!message.empty()) c["message"] = message;
  conditions.push_back(std::move(c));
  return true;
}

// The devices of allocation results, as the allocator counts them.
void AppendAllocated(const model::AllocationResult& allocation,
                     std::vector<allocator::AllocatedDevice>& out) {
  for (const auto& r : allocation.results) {
    out.push_back({r.driver, r.pool, r.device, r.share_id, r.consumed_capacity, r.admin_access});
  }
}

// True when every result of the allocations is pinned to one node by name (the binding then
// changes what only that node can offer).
bool NodeLocal(const std::vector<model::AllocationResult>& allocations) {
  for (const auto& a : allocations) {
    if (!a.node_selector.has_value() || a.node_selector->terms.empty() ||
        a.node_selector->terms.front().match_fields.empty() ||
        a.node_selector->terms.front().match_fields.front().key != "metadata.name") {
      return false;
    }
  }
  return true;
}

// The claim requests and pod-status request mappings behind a pod's extended resources
// (`limits: {nvidia.com/gpu: 2}`) that DRA classes serve (`classes`: resource name -> class):
// one ExactCount request per container and resource, named as Kubernetes names them.
std::pair<json, json> ExtendedResourceRequests(const json& spec,
                                               const std::map<std::string, std::string>& classes) {
  json requests = json::array();
  json mappings = json::array();
  const json& containers = At(spec, "containers");
  for (size_t ci = 0; containers.is_array() && ci < containers.size(); ++ci) {
    const json& resources = At(containers[ci], "resources");
    json amounts = At(resources, "limits").is_object() ? At(resources, "limits") : json::object();
    for (const auto& [k, v] : At(resources, "requests").items()) {
      if (!amounts.contains(k)) amounts[k] = v;
    }
    int ri = 0;
    for (const auto& [resource, amount] : amounts.items()) {
      auto cls = classes.find(resource);
      if (cls == classes.end()) continue;
      int64_t count = 0;
      if (amount.is_number_integer()) {
        count = amount.get<int64_t>();
      } else if (amount.is_string()) {
        auto q = ParseQuantity(amount.get<std::string>());
        if (q.ok() && !q->HasFraction()) count = q->Value();
      }
      if (count <= 0) continue;
      const std::string request = absl::StrCat("container-", ci, "-request-", ri++);
      requests.push_back({{"name", request},
                          {"exactly",
                           {{"deviceClassName", cls->second},
                            {"allocationMode", "ExactCount"},
                            {"count", count}}}});
      mappings.push_back({{"containerName", Str(containers[ci], "name")},
                          {"resourceName", resource},
                          {"requestName", request}});
    }
  }
  return {std::move(requests), std::move(mappings)};
}

// Why the pods using `allocation` must go: a device of it has a NoExecute taint (on the device
// or from a DeviceTaintRule) that the allocation does not tolerate, or tolerates for a
// tolerationSeconds counted from the taint's timeAdded that has passed. Empty: they may stay.
std::string EvictionReason(const model::AllocationResult& allocation,
                           const allocator::Inventory& inventory,
                           std::chrono::system_clock::time_point now) {
  for (const auto& r : allocation.results) {
    const auto* ids = inventory.FindDevice(absl::StrCat(r.driver, "/", r.pool, "/", r.device));
    if (ids == nullptr) continue;
    for (const auto& taint : inventory.devices()[ids->back()].taints) {
      if (taint.effect != "NoExecute") continue;
      const model::DeviceToleration* match = nullptr;
      for (const auto& tol : r.tolerations) {
        if (model::Tolerates(tol, taint)) match = &tol;
      }
      bool expired = match == nullptr;
      if (match != nullptr && match->toleration_seconds.has_value()) {
        std::chrono::system_clock::time_point added = now;
        if (!taint.time_added.empty()) ParseRfc3339(taint.time_added, &added);
        expired = now >= added + std::chrono::seconds(*match->toleration_seconds);
      }
      if (expired) {
        return absl::StrCat("device ", r.pool, "/", r.device, " has the NoExecute taint ",
                            taint.key, taint.value.empty() ? "" : "=", taint.value);
      }
    }
  }
  return "";
}

// What placement needs of a pod's spec: node selector, required node affinity, tolerations, and
// whether it asked to be spread.
PodPlacementSpec PlacementSpecOf(const json& spec, const model::ObjectMeta& meta) {
  PodPlacementSpec out;
  for (const auto& [k, v] : At(spec, "nodeSelector").items()) {
    if (v.is_string()) out.node_selector[k] = v.get<std::string>();
  }
  const json& required = At(At(At(spec, "affinity"), "nodeAffinity"),
                            "requiredDuringSchedulingIgnoredDuringExecution");
  if (required.is_object()) {
    auto sel = model::json::DecodeNodeSelector(required, "spec.affinity");
    if (sel.ok()) out.required_affinity = std::move(*sel);
  }
  const json& tolerations = At(spec, "tolerations");
  for (size_t i = 0; tolerations.is_array() && i < tolerations.size(); ++i) {
    const json& t = tolerations[i];
    PodToleration tol{Str(t, "key"), Str(t, "operator"), Str(t, "value"), Str(t, "effect")};
    if (const json& secs = At(t, "tolerationSeconds"); secs.is_number_integer()) {
      tol.toleration_seconds = secs.get<int64_t>();
    }
    out.tolerations.push_back(std::move(tol));
  }
  out.spread = meta.annotations.contains(kSpreadAnnotation);
  return out;
}

// The body of the FailedScheduling Event about `pod`.
json FailedSchedulingEvent(const model::Object& pod, const std::string& message,
                           const std::string& now, const std::string& component) {
  return {{"involvedObject",
           {{"kind", "Pod"},
            {"namespace", pod.meta.namespace_},
            {"name", pod.meta.name},
            {"uid", pod.meta.uid},
            {"apiVersion", "v1"}}},
          {"reason", "FailedScheduling"},
          {"message", message},
          {"type", "Warning"},
          {"count", 1},
          {"firstTimestamp", now},
          {"lastTimestamp", now},
          {"source", {{"component", component}}},
          {"reportingComponent", component}};
}

// The entries of `map` a pass looks at: all of them, or those whose keys are in `keys`.
template <typename Map, typename Keys>
std::vector<typename Map::value_type*> Selected(Map& map, bool all, const Keys& keys) {
  std::vector<typename Map::value_type*> out;
  if (all) {
    for (auto& entry : map) out.push_back(&entry);
    return out;
  }
  for (const auto& key : keys) {
    auto it = map.find(key);
    if (it != map.end()) out.push_back(&*it);
  }
  return out;
}

// Commits of one pass that run concurrently, so that the store batches them into group
// commits; each outcome is handled by its callback on the pass's thread, in submission order.
class CommitQueue {
 public:
  explicit CommitQueue(store::Store& store) : store_(store) {}
  ~CommitQueue() { Drain(); }

  void Submit(store::Transaction txn, std::function<void(CommitResult)> done) {
    in_flight_.push_back({store_.CommitAsync(std::move(txn)), std::move(done)});
    if (in_flight_.size() >= kMaxInFlight) Pop();
  }
  void Drain() {
    while (!in_flight_.empty()) Pop();
  }

 private:
  struct Entry {
    std::future<CommitResult> result;
    std::function<void(CommitResult)> done;
  };
  void Pop() {
    Entry e = std::move(in_flight_.front());
    in_flight_.pop_front();
    e.done(e.result.get());
  }
  store::Store& store_;
  std::deque<Entry> in_flight_;
};

}  // namespace

// What the changes applied at the start of a pass touched.
struct Scheduler::Dirty {
  std::set<std::string> pods;           // uids: look at their claims
  std::set<model::ResourceKey> claims;  // look at their consumers
  bool all = false;                     // look at everything
  bool relevant = false;                // may make waiting pods fit
};

// What the scheduler keeps between passes. Used by the pass thread only.
struct Scheduler::State {
  struct Backoff {
    int attempts = 0;
    std::chrono::system_clock::time_point not_before;
    std::chrono::system_clock::time_point since;  // first found unschedulable
    uint64_t generation = 0;                      // `generation` when last tried
    int64_t rv = 0;                               // the pod's revision after that attempt
  };

  bool synced = false;
  std::chrono::steady_clock::time_point last_sweep;

  // Views of every pod and claim, and the other objects scheduling reads, as of the changes
  // applied so far (plus this replica's own writes).
  std::map<std::string, PodView> pods;  // by uid
  std::map<model::ResourceKey, ClaimView> claims;
  // Keys of the claims each pod owns (generated for it), by pod uid.
  std::unordered_map<std::string, std::set<model::ResourceKey>> owned;
  std::map<std::string, std::map<model::ResourceKey, model::Object>> others;  // by resource
  std::map<std::string, int64_t> other_rvs;  // resource -> newest revision applied

  bool inventory_dirty = true;
  bool nodes_dirty = true;
  std::shared_ptr<const allocator::Inventory> inventory;
  std::map<std::string, std::string> extended_classes;  // extended resource name -> class
  bool any_no_execute = false;
  bool any_node_no_execute = false;  // some node has a NoExecute taint
  std::vector<NodeState> nodes;
  std::map<std::pair<std::string, std::string>, Body> templates;  // (namespace, name)
  // The devices in use, resolved against `inventory`: kept across passes (each binding adds its
  // devices) and resolved anew when the inventory changed or an allocation went away.
  std::optional<allocator::AllocatedState> allocated;
  // Objects found not to decode since the last pass, with why; the pass reports them.
  std::vector<std::pair<model::Object, std::string>> undecodable;

  // Claims whose release waits for their agent to unprepare them (graceful_deletion.h): looked
  // at again every pass, since their node may become unreachable meanwhile.
  std::set<model::ResourceKey> held_claims;

  uint64_t generation = 0;  // bumped by every change that may make waiting pods fit
  std::unordered_map<std::string, Backoff> backoff;  // by pod uid
  size_t next_start = 0;  // rotates the first node tried, as kube-scheduler does

  static Body ParseBody(const model::Object& o) {
    return std::make_shared<const json>(Parse(o.body));
  }

  void Clear() {
    pods.clear();
    claims.clear();
    owned.clear();
    allocated.reset();
    others.clear();
    other_rvs.clear();
    inventory_dirty = nodes_dirty = true;
    templates.clear();
  }

  // The claims a pod names (directly, generated from templates, for extended resources).
  static std::vector<model::ResourceKey> ClaimsOf(const model::Object& pod, const json& body) {
    std::vector<model::ResourceKey> out;
    auto add = [&](const std::string& name) {
      if (!name.empty()) out.push_back({kClaims, pod.meta.namespace_, name});
    };
    const json& rcs = At(At(body, "spec"), "resourceClaims");
    for (size_t i = 0; rcs.is_array() && i < rcs.size(); ++i) {
      add(Str(rcs[i], "resourceClaimName"));
    }
    const json& status = At(body, "status");
    const json& statuses = At(status, "resourceClaimStatuses");
    for (size_t i = 0; statuses.is_array() && i < statuses.size(); ++i) {
      add(Str(statuses[i], "resourceClaimName"));
    }
    add(Str(At(status, "extendedResourceClaimStatus"), "resourceClaimName"));
    return out;
  }

  static PodView MakePod(model::Object o) {
    PodView p;
    p.body = ParseBody(o);
    const json& spec = At(*p.body, "spec");
    const std::string phase = Str(At(*p.body, "status"), "phase");
    p.terminal = phase == "Succeeded" || phase == "Failed";
    p.deleting = o.meta.deletion_timestamp.has_value();
    p.node_name = Str(spec, "nodeName");
    const json& priority = At(spec, "priority");
    p.priority = priority.is_number_integer() ? priority.get<int64_t>() : 0;
    p.obj = std::move(o);
    return p;
  }

  static ClaimView MakeClaim(model::Object o) {
    ClaimView c;
    c.body = ParseBody(o);
    std::optional<model::AllocationResult> result;
    const json& a = At(At(*c.body, "status"), "allocation");
    if (a.is_object()) {
      auto decoded = model::json::DecodeAllocationResult(a, "status.allocation");
      if (decoded.ok()) {
        result = std::move(*decoded);
      } else {
        c.allocation_error = std::string(decoded.status().message());
      }
    } else if (!a.is_null()) {
      c.allocation_error = "status.allocation: must be an object";
    }
    c.allocation =
        std::make_shared<const std::optional<model::AllocationResult>>(std::move(result));
    c.generated = o.meta.annotations.contains(kPodClaimNameAnnotation) ||
                  o.meta.annotations.contains(kExtendedClaimAnnotation);
    c.owners = OwnerUids(o);
    c.obj = std::move(o);
    return c;
  }

  void Own(const ClaimView& c) {
    for (const auto& uid : c.owners) owned[uid].insert(c.obj.Key());
  }
  void Disown(const ClaimView& c) {
    for (const auto& uid : c.owners) {
      auto it = owned.find(uid);
      if (it == owned.end()) continue;
      it->second.erase(c.obj.Key());
      if (it->second.empty()) owned.erase(it);
    }
  }

  // Applies one change. Changes may repeat what a listing or this replica's own commit already
  // shows (the revision check skips those), and arrive in revision order per object.
  void Apply(model::WatchEvent ev, Dirty& d) {
    const std::string resource = ev.object.resource;  // ev.object is moved below
    const int64_t rv = ev.object.meta.resource_version;
    const bool deleted = ev.type == model::EventType::kDeleted;
    if (resource == kPods) {
      auto it = pods.find(ev.object.meta.uid);
      if (it != pods.end() && it->second.obj.meta.resource_version >= rv) return;
      if (it != pods.end()) {
        // Its claims may lose a consumer.
        for (auto& key : ClaimsOf(it->second.obj, *it->second.body)) d.claims.insert(key);
      }
      if (deleted) {
        if (it != pods.end()) pods.erase(it);
        backoff.erase(ev.object.meta.uid);
        return;
      }
      PodView view = MakePod(std::move(ev.object));
      for (auto& key : ClaimsOf(view.obj, *view.body)) d.claims.insert(key);
      d.pods.insert(view.obj.meta.uid);
      const std::string uid = view.obj.meta.uid;
      pods.insert_or_assign(uid, std::move(view));
      return;
    }
    if (resource == kClaims) {
      const model::ResourceKey key = ev.object.Key();
      auto it = claims.find(key);
      const bool same = it != claims.end() && it->second.obj.meta.uid == ev.object.meta.uid;
      if (same && it->second.obj.meta.resource_version >= rv) return;
      if (it != claims.end()) Disown(it->second);
      if (deleted) {
        if (!same) return;
        if (it->second.Holds()) {
          d.relevant = true;  // devices freed
          allocated.reset();
        }
        for (const auto& owner : it->second.owners) d.pods.insert(owner);
        claims.erase(it);
        return;
      }
      ClaimView view = MakeClaim(std::move(ev.object));
      if (!view.allocation_error.empty()) undecodable.emplace_back(view.obj, view.allocation_error);
      if (!same || (it->second.Holds() && !view.Holds())) {
        d.relevant = true;  // a new claim, or devices freed
      }
      // Devices in use changed by someone else (this replica's bindings are already counted).
      auto allocation_of = [](const ClaimView& c) -> const json& {
        return At(At(*c.body, "status"), "allocation");
      };
      if (it == claims.end() ? view.allocation->has_value()
                             : allocation_of(it->second) != allocation_of(view)) {
        allocated.reset();
      }
      for (const auto& owner : view.owners) d.pods.insert(owner);
      d.claims.insert(key);
      Own(view);
      claims.insert_or_assign(key, std::move(view));
      return;
    }
    if (resource == kEvents) return;
    auto& objects = others[resource];
    const model::ResourceKey key = ev.object.Key();
    auto it = objects.find(key);
    if (it != objects.end() && it->second.meta.resource_version >= rv) return;
    if (deleted) {
      if (it == objects.end() || it->second.meta.uid != ev.object.meta.uid) return;
      objects.erase(it);
    } else {
      objects.insert_or_assign(key, std::move(ev.object));
    }
    d.relevant = true;
    if (resource == kSlices || resource == kClasses || resource == kTaintRules) {
      inventory_dirty = true;
      d.all = true;  // extended-resource classes may have changed
    } else if (resource == kNodes) {
      nodes_dirty = true;
    } else if (resource == kTemplates) {
      const auto& o = objects.find(key);
      if (o == objects.end()) {
        templates.erase({key.namespace_, key.name});
      } else {
        templates[{key.namespace_, key.name}] = ParseBody(o->second);
      }
      d.all = true;  // pods may have been waiting for it
    }
  }

  // Rebuilds the inventory and the node list when their objects changed since the last pass.
  void RefreshSnapshot(cel::ProgramCache* programs) {
    if (inventory_dirty) {
      allocator::InventoryInput input;
      extended_classes.clear();
      for (const auto& [key, o] : Others(kClasses)) {
        auto cls = model::json::DecodeDeviceClass(Whole(o, Parse(o.body)));
        if (!cls.ok()) {
          undecodable.emplace_back(o, std::string(cls.status().message()));
          continue;
        }
        extended_classes[std::string(kImplicitExtendedPrefix) + cls->name] = cls->name;
        input.classes.push_back(std::move(*cls));
      }
      // An explicit extendedResourceName wins over the implicit one; on a tie the class whose name
      // sorts first wins (classes are kept in name order).
      std::map<std::string, std::string> explicit_names;
      for (const auto& cls : input.classes) {
        if (!cls.extended_resource_name.empty() &&
            !explicit_names.contains(cls.extended_resource_name)) {
          explicit_names[cls.extended_resource_name] = cls.name;
        }
      }
      for (const auto& [name, cls] : explicit_names) extended_classes[name] = cls;
      for (const auto& [key, o] : Others(kSlices)) {
        auto slice = model::json::DecodeResourceSlice(Whole(o, Parse(o.body)));
        if (slice.ok()) {
          input.slices.push_back(std::move(*slice));
        } else {
          undecodable.emplace_back(o, std::string(slice.status().message()));
        }
      }
      for (const auto& [key, o] : Others(kTaintRules)) {
        auto rule = model::json::DecodeDeviceTaintRule(Whole(o, Parse(o.body)));
        if (rule.ok()) {
          input.taint_rules.push_back(std::move(*rule));
        } else {
          undecodable.emplace_back(o, std::string(rule.status().message()));
          input.taint_rules.push_back(FailSafeTaintRule(o));
        }
      }
      inventory = allocator::Inventory::Build(std::move(input), programs);
      allocated.reset();
      any_no_execute = false;
      for (const auto& d : inventory->devices()) {
        for (const auto& t : d.taints) any_no_execute |= t.effect == "NoExecute";
      }
      inventory_dirty = false;
    }
    if (nodes_dirty) {
      nodes.clear();
      any_node_no_execute = false;
      for (const auto& [key, o] : Others(kNodes)) {
        const json body = Parse(o.body);
        NodeState n;
        n.info = model::NodeInfo{o.meta.name, o.meta.labels};
        const json& spec = At(body, "spec");
        const json& unschedulable = At(spec, "unschedulable");
        n.unschedulable = unschedulable.is_boolean() && unschedulable.get<bool>();
        const json& taints = At(spec, "taints");
        for (size_t i = 0; taints.is_array() && i < taints.size(); ++i) {
          NodeTaint t{Str(taints[i], "key"), Str(taints[i], "value"), Str(taints[i], "effect")};
          std::chrono::system_clock::time_point added;
          if (const std::string ta = Str(taints[i], "timeAdded");
              !ta.empty() && ParseRfc3339(ta, &added)) {
            t.time_added = added;
          }
          any_node_no_execute |= t.effect == "NoExecute";
          n.taints.push_back(std::move(t));
        }
        const json& conditions = At(At(body, "status"), "conditions");
        for (size_t i = 0; conditions.is_array() && i < conditions.size(); ++i) {
          if (Str(conditions[i], "type") == "Ready")
            n.ready = Str(conditions[i], "status") == "True";
        }
        nodes.push_back(std::move(n));
      }
      nodes_dirty = false;
    }
  }

  const std::map<model::ResourceKey, model::Object>& Others(const char* resource) {
    return others[resource];
  }
};

// Follows the object cache for the scheduler: collects every change for the next pass and wakes
// the loop. Called from the hub's delivery threads; Close() detaches it from the scheduler.
class Scheduler::Feed final : public Watcher {
 public:
  explicit Feed(Scheduler* s) : s_(s) {}
  bool Deliver(const model::WatchEvent& event) override {
    qm::MutexLock lock(&mu_);
    if (s_ == nullptr) return false;
    seen_rv_ = std::max(seen_rv_, event.object.meta.resource_version);
    caught_up_.SignalAll();
    if (event.object.resource == kEvents) return true;  // they make nothing schedulable
    inbox_.push_back(event);
    s_->Wake();
    return true;
  }
  bool Tick(int64_t rv) override {
    qm::MutexLock lock(&mu_);
    if (s_ == nullptr) return false;
    seen_rv_ = std::max(seen_rv_, rv);
    caught_up_.SignalAll();
    return true;
  }
  void Expire(const absl::Status&) override {
    qm::MutexLock lock(&mu_);
    expired_ = true;
    if (s_ != nullptr) s_->Wake();
  }
  void Close() {
    qm::MutexLock lock(&mu_);
    s_ = nullptr;
  }
  // The newest revision delivered or ticked.
  int64_t seen() {
    qm::MutexLock lock(&mu_);
    return seen_rv_;
  }
  // The changes received so far, once they reach revision `min_rv` or `timeout` passes. False
  // when the feed lost its place (the scheduler must list again).
  bool Take(int64_t min_rv, std::chrono::milliseconds timeout,
            std::vector<model::WatchEvent>* out) {
    qm::MutexLock lock(&mu_);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!expired_ && seen_rv_ < min_rv && caught_up_.WaitUntil(&mu_, deadline)) {
    }
    out->swap(inbox_);
    inbox_.clear();
    return !expired_;
  }

 private:
  qm::Mutex mu_;
  qm::CondVar caught_up_;
  Scheduler* s_ ABSL_GUARDED_BY(mu_);
  std::vector<model::WatchEvent> inbox_ ABSL_GUARDED_BY(mu_);
  int64_t seen_rv_ ABSL_GUARDED_BY(mu_) = 0;
  bool expired_ ABSL_GUARDED_BY(mu_) = false;
};

Scheduler::Scheduler(store::Store& store, WatchHub& hub, const Clock& clock, IdGenerator& ids,
                     SchedulerOptions options)
    : store_(store),
      hub_(hub),
      clock_(clock),
      ids_(ids),
      options_(std::move(options)),
      state_(std::make_unique<State>()) {}

Scheduler::~Scheduler() {
  Stop();
  if (feed_ != nullptr) feed_->Close();
}

void Scheduler::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Scheduler::Stop() {
  {
    qm::MutexLock lock(&mu_);
    stopping_ = true;
  }
  wake_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

void Scheduler::Wake() {
  qm::MutexLock lock(&mu_);
  dirty_ = true;
  wake_.Signal();
}

void Scheduler::Loop() {
  while (true) {
    {
      qm::MutexLock lock(&mu_);
      const auto deadline = std::chrono::steady_clock::now() + options_.resync;
      while (!stopping_ && !dirty_ && wake_.WaitUntil(&mu_, deadline)) {
      }
      if (stopping_) return;
      dirty_ = false;
    }
    std::string failure;
    try {
      auto stats = Pass(/*read_your_writes=*/false);
      if (!stats.ok()) {
        spdlog::warn("scheduler pass failed: {}", stats.status().ToString());
        continue;
      }
      if (stats->conflicts > 0) {
        qm::MutexLock lock(&mu_);
        dirty_ = true;  // retry lost races at once, on a fresh snapshot
      }
    } catch (const std::exception& e) {
      failure = e.what();
    } catch (...) {
      failure = "an exception of unknown type";
    }
    if (failure.empty()) continue;
    // Nothing a pass meets may end the process. Its views may be half-updated: start over from
    // a fresh listing after a short pause (the pause keeps a persistent fault from spinning).
    unexpected_errors_.fetch_add(1);
    spdlog::error("scheduler pass failed: {}; listing everything again in {} ms", failure,
                  kRestartDelay.count());
    state_->synced = false;
    qm::MutexLock lock(&mu_);
    const auto deadline = std::chrono::steady_clock::now() + kRestartDelay;
    while (!stopping_ && wake_.WaitUntil(&mu_, deadline)) {
    }
    dirty_ = true;
  }
}

absl::Status Scheduler::Sync(bool read_your_writes, Dirty& dirty) {
  State& st = *state_;
  // Read-your-writes: wait (briefly) until the feed has seen everything committed so far. The
  // loop skips it: it runs because the feed delivered something, and its own writes are in the
  // views already.
  int64_t min_rv = 0;
  if (read_your_writes || !st.synced) {
    QM_ASSIGN_OR_RETURN(min_rv, store_.CurrentRevision());
  }
  std::vector<model::WatchEvent> changes;
  if (st.synced && feed_->Take(min_rv, std::chrono::seconds(1), &changes)) {
    for (auto& ev : changes) st.Apply(std::move(ev), dirty);
    return absl::OkStatus();
  }
  // First pass, or the feed lost its place: subscribe anew, then list everything. Changes
  // after the subscription point that the listing already shows are skipped when applied.
  if (feed_ != nullptr) feed_->Close();
  feed_ = std::make_shared<Feed>(this);
  const int64_t from = hub_.last_dispatched();
  QM_RETURN_IF_ERROR(hub_.Subscribe(feed_, from));
  st.Clear();
  int64_t listed_rv = 0;
  for (const char* resource :
       {kPods, kClaims, kTemplates, kClasses, kSlices, kTaintRules, kNodes, kQuotas}) {
    ListRequest request;
    request.store.resource = resource;
    QM_ASSIGN_OR_RETURN(auto listed, hub_.List(request, std::max(from, min_rv)));
    listed_rv = std::max(listed_rv, listed.resource_version);
    for (auto& o : listed.items) {
      st.Apply(model::WatchEvent{model::EventType::kAdded, std::move(o)}, dirty);
    }
  }
  // Each kind was listed at its own revision: a claim listed after its pod was created may be
  // reserved for a pod the earlier pod listing did not show, and the claim controller would
  // release it. Bring every kind up to the newest listing from the feed before any pass.
  std::vector<model::WatchEvent> catch_up;
  if (!feed_->Take(listed_rv, std::chrono::seconds(5), &catch_up) || feed_->seen() < listed_rv) {
    return absl::UnavailableError("the scheduler's feed did not reach the listed revision " +
                                  std::to_string(listed_rv));
  }
  for (auto& ev : catch_up) st.Apply(std::move(ev), dirty);
  st.synced = true;
  dirty.all = true;
  dirty.relevant = true;
  return absl::OkStatus();
}

absl::StatusOr<PassStats> Scheduler::RunOnce() { return Pass(/*read_your_writes=*/true); }

// One pass over the views (the phases are listed in scheduler.h). Lives for one pass; used by
// the pass thread only.
class Scheduler::PassRun {
 public:
  PassRun(Scheduler& scheduler, Dirty dirty)
      : ids_(scheduler.ids_),
        clock_(scheduler.clock_),
        options_(scheduler.options_),
        failures_(scheduler.decode_failures_),
        st_(*scheduler.state_),
        dirty_(std::move(dirty)),
        now_tp_(scheduler.clock_.Now()),
        now_(FormatRfc3339(now_tp_)),
        inventory_(*st_.inventory),
        nodes_(st_.nodes),
        pods_(st_.pods),
        claims_(st_.claims),
        commits_(scheduler.store_) {}

  // A pass cut short by an exception still waits for its commits before any member goes: their
  // callbacks use this pass's state. A callback that throws is dropped and the rest still run.
  ~PassRun() {
    for (;;) {
      try {
        commits_.Drain();
        return;
      } catch (...) {
        spdlog::error("scheduler: a commit callback failed while a pass was being abandoned");
      }
    }
  }

  PassRun(const PassRun&) = delete;
  PassRun& operator=(const PassRun&) = delete;

  PassStats Run() {
    ReportUndecodable();
    ReleaseClaims();
    FinishTerminatingPods();
    CreateClaims();
    Evict();
    const double controllers_ms = MsSince(start_);
    Schedule();
    commits_.Drain();
    UpdateQuotaStatus();
    for (const auto& key : gone_) {
      auto it = claims_.find(key);
      if (it == claims_.end() || !it->second.removed) continue;
      st_.Disown(it->second);
      claims_.erase(it);
    }
    if (reset_allocated_) st_.allocated.reset();
    spdlog::debug(
        "scheduler pass: {} pending, {} bound, {} unschedulable, {} backing off, {} conflicts; "
        "controllers {:.1f} ms, placement {:.1f} ms, total {:.1f} ms",
        pending_, stats_.bound, stats_.unschedulable, stats_.backing_off, stats_.conflicts,
        controllers_ms, placement_ms_, MsSince(start_));
    return stats_;
  }

 private:
  using Then = std::function<void(const std::vector<model::Object>*)>;

  // Objects that do not decode are never dropped silently: each version is logged and counted
  // once and gets a DecodeFailed Event, which says what the scheduler does about it.
  void ReportUndecodable() {
    for (auto& [obj, reason] : st_.undecodable) Report(obj, reason);
    st_.undecodable.clear();
  }
  void Report(const model::Object& obj, const std::string& reason) {
    if (!failures_.Note(obj, reason)) return;
    std::string consequence;
    if (obj.resource == kClaims) {
      consequence = At(At(Parse(obj.body), "status"), "allocation").is_null()
                        ? "it cannot be allocated"
                        : "its devices are treated as in use and it is not allocated again";
    } else if (obj.resource == kSlices) {
      consequence = "its devices are not offered";
    } else if (obj.resource == kClasses) {
      consequence = "claims that name it cannot be allocated";
    } else {
      consequence = absl::StrCat("new work is kept off every device it may select (taint ",
                                 kUndecodableRuleTaint, ", NoSchedule)");
    }
    store::Transaction txn;
    txn.writes.push_back({store::Write::Kind::kCreate,
                          DecodeFailedEvent(obj,
                                            absl::StrCat("cannot be decoded (", reason, "); ",
                                                         consequence, " until it is fixed"),
                                            now_tp_, options_.component, ids_.NewUid()),
                          {},
                          0});
    commits_.Submit(std::move(txn), [key = obj.Key()](CommitResult committed) {
      // AlreadyExists: another replica reported this version first.
      if (!committed.ok() && !absl::IsAlreadyExists(committed.status())) {
        spdlog::warn("could not record the DecodeFailed event of {} {}: {}", key.resource, key.name,
                     committed.status().ToString());
      }
    });
  }

  double MsSince(std::chrono::steady_clock::time_point t) const {
    return std::chrono::duration<double, std::milli>(clock_.Monotonic() - t).count();
  }

  // 1. Releases claims whose consumers are gone: prunes reservedFor, deallocates what the
  // scheduler allocated once nothing uses it, deletes generated claims whose pod is gone.
  void ReleaseClaims() {
    // The claims of pods that wait for their agent to unprepare keep their devices until the
    // pod goes, even once the node is unreachable.
    for (const auto& [uid, pod] : pods_) {
      if (!pod.deleting || !HasFinalizer(pod.obj.meta, kDevicesPreparedFinalizer)) continue;
      for (auto& key : State::ClaimsOf(pod.obj, *pod.body)) terminating_claims_.insert(key);
    }
    std::set<model::ResourceKey> keys = std::move(st_.held_claims);
    st_.held_claims.clear();
    if (!dirty_.all) keys.insert(dirty_.claims.begin(), dirty_.claims.end());
    for (auto* entry : Selected(claims_, dirty_.all, keys)) {
      ReleaseClaim(entry->first, entry->second);
    }
    commits_.Drain();
    if (relevant_change_) ++st_.generation;
  }

  void ReleaseClaim(const model::ResourceKey& key, ClaimView& c) {
    const json& status = At(*c.body, "status");
    const json& reserved = At(status, "reservedFor");
    const size_t reserved_count = reserved.is_array() ? reserved.size() : 0;
    json keep = json::array();
    if (reserved.is_array()) {
      for (const auto& r : reserved) {
        auto it = pods_.find(Str(r, "uid"));
        if (Str(r, "resource") == "pods" && it != pods_.end() && !it->second.terminal &&
            !it->second.deleting) {
          keep.push_back(r);
        }
      }
    }
    bool owner_alive = false;
    if (c.generated) {
      for (const auto& uid : c.owners) owner_alive = owner_alive || pods_.contains(uid);
    }
    bool drop = c.generated && !owner_alive && keep.empty();
    // As Kubernetes' claim controller: the scheduler's own allocations (marked by the
    // delete-protection finalizer) are undone once nothing uses them; an allocation written by
    // someone else stays.
    bool release =
        c.allocation->has_value() && keep.empty() && HasFinalizer(c.obj, kDeleteProtection);
    // No device goes to a new workload while an agent still has it prepared for this one: the
    // release waits for the agent's unprepare, unless its node is unreachable and no pod waits
    // for the claim any more (a terminating pod there goes after its grace period).
    if ((release || drop) && c.allocation->has_value() && PreparedByAgent(*c.body)) {
      const std::string node = AllocatedNodeOf(*c.body).value_or("");
      if (Reachable(node) || terminating_claims_.contains(key)) {
        release = false;
        drop = false;
        st_.held_claims.insert(key);
      }
    }
    if (keep.size() == reserved_count && !release && !drop) return;

    store::Transaction txn;
    // An allocation that does not decode is never released on its own, but a claim that goes
    // away takes its ledger rows with it.
    if (release || (drop && !c.allocation_error.empty())) {
      txn.release_claims.push_back(c.obj.meta.uid);
    }
    model::Object next = c.obj;
    auto& finalizers = next.meta.finalizers;
    if (release) {
      finalizers.erase(std::remove(finalizers.begin(), finalizers.end(), kDeleteProtection),
                       finalizers.end());
    }
    auto body = std::make_shared<json>(*c.body);
    const bool remove = drop || (next.meta.deletion_timestamp.has_value() && finalizers.empty());
    if (remove) {
      txn.writes.push_back({store::Write::Kind::kDelete, {}, key, c.obj.meta.resource_version});
    } else {
      json& s = (*body)["status"];
      if (keep.empty()) {
        s.erase("reservedFor");
      } else {
        s["reservedFor"] = keep;
      }
      if (release) {
        // The drivers' device statuses go with the allocation they described (they must name
        // allocated devices).
        s.erase("allocation");
        s.erase("devices");
      }
      txn.writes.push_back(
          {store::Write::Kind::kUpdate, WithBody(next, *body), {}, c.obj.meta.resource_version});
    }
    if (release || (remove && c.Holds())) relevant_change_ = true;
    commits_.Submit(std::move(txn), [this, remove, release, body, c = &c](CommitResult committed) {
      if (!committed.ok()) {
        ++stats_.conflicts;
        busy_.insert(c);
        return;
      }
      ++stats_.claims_released;
      if (release || c->Holds()) st_.allocated.reset();
      if (remove) {
        c->removed = true;
        gone_.push_back(c->obj.Key());
        return;
      }
      c->obj = committed->front();
      c->body = body;
      if (release) {
        c->allocation = std::make_shared<const std::optional<model::AllocationResult>>();
      }
    });
  }

  // 2. Claims from templates and extended resources, for the pods that changed and the waiting
  // pods about to be tried again (a claim refused before, by quota, may fit now).
  void CreateClaims() {
    auto pods = Selected(pods_, dirty_.all, dirty_.pods);
    if (!dirty_.all) {
      for (auto& entry : pods_) {
        const PodView& p = entry.second;
        if (p.node_name.empty() && !p.deleting && !p.terminal &&
            st_.backoff.contains(entry.first) && !dirty_.pods.contains(entry.first) &&
            !BackingOff(entry.first, p)) {
          pods.push_back(&entry);
        }
      }
    }
    for (auto* entry : pods) {
      if (!entry->second.deleting && !entry->second.terminal) {
        CreateClaimsFor(entry->first, entry->second);
      }
    }
  }

  void CreateClaimsFor(const std::string& uid, PodView& pod) {
    const json& spec = At(*pod.body, "spec");
    const json& pod_claims = At(spec, "resourceClaims");
    json statuses = json::array();
    bool statuses_known = true;
    for (size_t i = 0; pod_claims.is_array() && i < pod_claims.size(); ++i) {
      const json& rc = pod_claims[i];
      const std::string name = Str(rc, "name");
      const std::string tmpl = Str(rc, "resourceClaimTemplateName");
      if (tmpl.empty()) continue;
      std::string found;
      for (const ClaimView* c : OwnedBy(uid)) {
        auto a = c->obj.meta.annotations.find(kPodClaimNameAnnotation);
        if (a != c->obj.meta.annotations.end() && a->second == name) found = c->obj.meta.name;
      }
      if (found.empty()) {
        auto t = st_.templates.find({pod.obj.meta.namespace_, tmpl});
        if (t == st_.templates.end()) {
          statuses_known = false;
          continue;
        }
        const json& tspec = At(*t->second, "spec");
        const json& tmeta = At(tspec, "metadata");
        std::map<std::string, std::string> labels;
        std::map<std::string, std::string> annotations;
        for (const auto& [k, v] : At(tmeta, "labels").items()) {
          if (v.is_string()) labels[k] = v.get<std::string>();
        }
        for (const auto& [k, v] : At(tmeta, "annotations").items()) {
          if (v.is_string()) annotations[k] = v.get<std::string>();
        }
        annotations[kPodClaimNameAnnotation] = name;
        const json& claim_spec = At(tspec, "spec");
        ClaimView* c =
            GenerateClaim(pod, absl::StrCat("-", name, "-"), labels, std::move(annotations),
                          json{{"spec", claim_spec.is_object() ? claim_spec : json::object()}});
        if (c == nullptr) {
          statuses_known = false;
          continue;
        }
        found = c->obj.meta.name;
      }
      statuses.push_back({{"name", name}, {"resourceClaimName", found}});
    }

    // Extended resources served by DRA classes: one generated claim per pod.
    auto [requests, mappings] = ExtendedResourceRequests(spec, st_.extended_classes);
    json extended_status;
    if (!requests.empty()) {
      std::string found;
      for (const ClaimView* c : OwnedBy(uid)) {
        if (c->obj.meta.annotations.contains(kExtendedClaimAnnotation)) found = c->obj.meta.name;
      }
      if (found.empty()) {
        ClaimView* c =
            GenerateClaim(pod, "-extended-resources-", {}, {{kExtendedClaimAnnotation, "true"}},
                          json{{"spec", {{"devices", {{"requests", requests}}}}}});
        if (c != nullptr) found = c->obj.meta.name;
      }
      if (!found.empty()) {
        extended_status = {{"resourceClaimName", found}, {"requestMappings", mappings}};
      }
    }

    // Record the generated claims in the pod's status, in the transaction that creates them.
    const json& pstatus = At(*pod.body, "status");
    const bool record_claims =
        statuses_known && !statuses.empty() && At(pstatus, "resourceClaimStatuses") != statuses;
    const bool record_extended =
        !extended_status.is_null() && At(pstatus, "extendedResourceClaimStatus") != extended_status;
    if (record_claims || record_extended) {
      auto body = std::make_shared<json>(*pod.body);
      json& s = (*body)["status"];
      if (!s.is_object()) s = json::object();
      if (record_claims) s["resourceClaimStatuses"] = statuses;
      if (record_extended) s["extendedResourceClaimStatus"] = extended_status;
      pod.status_body = std::move(body);
    }
    // A pod that will not be scheduled this pass gets its claims now.
    if (!pod.node_name.empty() && (!pod.new_claims.empty() || pod.status_body != nullptr)) {
      CommitPodWork(pod, {}, {}, pod.status_body, nullptr);
    }
  }

  // 2b. NoExecute device taints evict the pods that use the device unless the allocation
  // tolerates them (see EvictionReason); their claims are released on the next pass.
  void Evict() {
    EvictFromNodes();
    if (!st_.any_no_execute) return;
    for (auto& [key, c] : claims_) {
      if (!c.allocation->has_value()) continue;
      const json& reserved = At(At(*c.body, "status"), "reservedFor");
      if (!reserved.is_array() || reserved.empty()) continue;
      const std::string reason = EvictionReason(**c.allocation, inventory_, now_tp_);
      if (reason.empty()) continue;
      for (const auto& consumer : reserved) {
        auto it = pods_.find(Str(consumer, "uid"));
        if (it == pods_.end() || it->second.deleting) continue;
        PodView& pod = it->second;
        pod.deleting = true;
        commits_.Submit(store::Transaction{{DeletePodWrite(pod)}, {}, {}},
                        [this, p = &pod, reason](CommitResult deleted) {
                          if (!deleted.ok()) {
                            ++stats_.conflicts;
                            return;
                          }
                          spdlog::info("evicted pod {}/{}: {}", p->obj.meta.namespace_,
                                       p->obj.meta.name, reason);
                          ++stats_.evicted;
                        });
      }
    }
  }

  // NoExecute node taints (node.kubernetes.io/unreachable from the node monitor, an admin's)
  // evict the pods bound to the node that do not tolerate them, or tolerate them for a
  // tolerationSeconds that has passed (NodeEvictionReason); their claims are released on the
  // next pass.
  void EvictFromNodes() {
    if (!st_.any_node_no_execute) return;
    std::map<std::string, const NodeState*> tainted;
    for (const auto& n : nodes_) {
      for (const auto& t : n.taints) {
        if (t.effect == "NoExecute") tainted[n.info.name] = &n;
      }
    }
    for (auto& [uid, pod] : pods_) {
      if (pod.node_name.empty() || pod.deleting || pod.terminal) continue;
      auto it = tainted.find(pod.node_name);
      if (it == tainted.end()) continue;
      PodPlacementSpec spec = PlacementSpecOf(At(*pod.body, "spec"), pod.obj.meta);
      for (const char* key : {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}) {
        const NodeTaint probe{key, "", "NoExecute", std::nullopt};
        const bool mentioned =
            std::any_of(spec.tolerations.begin(), spec.tolerations.end(),
                        [&](const PodToleration& t) { return ToleratesNodeTaint(t, probe); });
        if (!mentioned) {
          spec.tolerations.push_back(
              {key, "Exists", "", "NoExecute", options_.default_toleration_seconds});
        }
      }
      std::string reason = NodeEvictionReason(spec.tolerations, it->second->taints, now_tp_);
      if (reason.empty()) continue;
      pod.deleting = true;
      reason = absl::StrCat("node ", pod.node_name, ": ", reason);
      commits_.Submit(store::Transaction{{DeletePodWrite(pod)}, {}, {}}, [this, p = &pod, reason](
                                                                             CommitResult deleted) {
        if (!deleted.ok()) {
          ++stats_.conflicts;
          return;
        }
        spdlog::info("evicted pod {}/{}: {}", p->obj.meta.namespace_, p->obj.meta.name, reason);
        ++stats_.evicted;
      });
    }
  }

  // An eviction: the pod's deletion as ObjectService::Delete does it with the default grace
  // period (a pod with finalizers is marked for graceful deletion, one without goes).
  store::Write DeletePodWrite(const PodView& pod) const {
    if (pod.obj.meta.finalizers.empty()) {
      return {store::Write::Kind::kDelete, {}, pod.obj.Key(), pod.obj.meta.resource_version};
    }
    model::Object marked = pod.obj;
    MarkForDeletion(marked.meta, now_tp_, DefaultGracePeriodSeconds(pod.obj));
    return {store::Write::Kind::kUpdate, std::move(marked), {}, pod.obj.meta.resource_version};
  }

  // Whether an agent reported devices of the claim (hub JSON) prepared: some status.devices entry
  // has Ready=True. Entries that failed to prepare hold nothing on the node.
  static bool PreparedByAgent(const json& claim) {
    const json& devices = At(At(claim, "status"), "devices");
    for (size_t i = 0; devices.is_array() && i < devices.size(); ++i) {
      const json& conditions = At(devices[i], "conditions");
      for (size_t j = 0; conditions.is_array() && j < conditions.size(); ++j) {
        if (Str(conditions[j], "type") == "Ready" && Str(conditions[j], "status") == "True") {
          return true;
        }
      }
    }
    return false;
  }

  // Whether the node's agent is heard from: the node exists, is Ready (or says nothing) and has
  // no unreachable taint.
  bool Reachable(const std::string& name) {
    if (node_by_name_.empty()) {
      for (const auto& n : nodes_) node_by_name_[n.info.name] = &n;
    }
    auto it = node_by_name_.find(name);
    if (it == node_by_name_.end() || !it->second->ready) return false;
    return std::none_of(it->second->taints.begin(), it->second->taints.end(),
                        [](const NodeTaint& t) { return t.key == kUnreachableTaint; });
  }

  // 1b. Graceful deletion (graceful_deletion.h): a terminating pod loses the devices-prepared
  // finalizer, and goes, once none of its claims is held prepared for it (the agent
  // unprepared it, or it is still prepared for another pod that runs), or, on a node that is
  // unreachable, once its deletion timestamp has passed.
  void FinishTerminatingPods() {
    for (auto& [uid, pod] : pods_) {
      if (!pod.deleting || !HasFinalizer(pod.obj.meta, kDevicesPreparedFinalizer)) continue;
      std::string why;
      if (!Reachable(pod.node_name)) {
        if (now_tp_ < pod.obj.meta.deletion_timestamp.value_or(now_tp_)) continue;
        why = "its node is unreachable and its grace period is over";
      } else {
        bool waiting = false;
        for (const auto& key : State::ClaimsOf(pod.obj, *pod.body)) {
          auto it = claims_.find(key);
          if (it == claims_.end() || it->second.removed || !PreparedByAgent(*it->second.body)) {
            continue;
          }
          const json& reserved = At(At(*it->second.body, "status"), "reservedFor");
          bool in_use = false;
          for (size_t i = 0; reserved.is_array() && i < reserved.size(); ++i) {
            auto other = pods_.find(Str(reserved[i], "uid"));
            in_use |= other != pods_.end() && !other->second.deleting && !other->second.terminal;
          }
          waiting |= !in_use;
        }
        if (waiting) continue;
        why = "its devices are unprepared";
      }
      model::Object next = pod.obj;
      RemoveFinalizer(next.meta, kDevicesPreparedFinalizer);
      store::Write w{store::Write::Kind::kUpdate, next, {}, pod.obj.meta.resource_version};
      if (next.meta.finalizers.empty()) {
        w = {store::Write::Kind::kDelete, {}, pod.obj.Key(), pod.obj.meta.resource_version};
      }
      const bool deletes = w.kind == store::Write::Kind::kDelete;
      commits_.Submit(store::Transaction{{std::move(w)}, {}, {}},
                      [this, p = &pod, why, deletes](CommitResult committed) {
                        if (!committed.ok()) {
                          ++stats_.conflicts;
                          return;
                        }
                        spdlog::info("pod {}/{} finished terminating: {}", p->obj.meta.namespace_,
                                     p->obj.meta.name, why);
                        if (deletes) {
                          RemoveFinalizer(p->obj.meta, kDevicesPreparedFinalizer);
                        } else {
                          p->obj = committed->front();
                        }
                      });
    }
    commits_.Drain();
  }

  // 3. Schedules pending pods, highest priority first, except those backing off with nothing
  // changed for them.
  void Schedule() {
    std::vector<PodView*> pending;
    for (auto& [uid, p] : pods_) {
      if (!p.node_name.empty() || p.deleting || p.terminal) {
        st_.backoff.erase(uid);
        continue;
      }
      if (BackingOff(uid, p)) {
        ++stats_.backing_off;
        // Its claims are still created (and recorded) now.
        if (!p.new_claims.empty() || p.status_body != nullptr) {
          CommitPodWork(p, {}, {}, p.status_body, nullptr);
        }
        continue;
      }
      pending.push_back(&p);
    }
    std::erase_if(st_.backoff, [&](const auto& e) { return !pods_.contains(e.first); });
    std::sort(pending.begin(), pending.end(), [](const PodView* a, const PodView* b) {
      if (a->priority != b->priority) return a->priority > b->priority;
      if (a->obj.meta.creation_timestamp != b->obj.meta.creation_timestamp) {
        return a->obj.meta.creation_timestamp < b->obj.meta.creation_timestamp;
      }
      return a->obj.Key() < b->obj.Key();
    });
    pending_ = pending.size();
    if (pending.empty()) return;

    node_versions_.assign(nodes_.size(), 0);
    for (size_t i = 0; i < nodes_.size(); ++i) node_index_[nodes_[i].info.name] = i;
    if (!st_.allocated.has_value()) {
      std::vector<allocator::AllocatedDevice> in_use;
      for (const auto& [key, c] : claims_) {
        if (!c.removed && c.allocation->has_value()) AppendAllocated(**c.allocation, in_use);
        // Devices an allocation that does not decode may hold are never free.
        if (!c.removed && !c.allocation_error.empty()) {
          for (auto& d : DevicesPossiblyHeld(c.obj.body, inventory_))
            in_use.push_back(std::move(d));
        }
      }
      st_.allocated = inventory_.ResolveAllocated(in_use);
    }
    for (PodView* pod : pending) SchedulePod(*pod);
  }

  void SchedulePod(PodView& pod) {
    const json& current = pod.Current();
    const json& spec = At(current, "spec");
    const json& pstatus = At(current, "status");
    std::string problem;
    std::vector<ClaimView*> pod_claims;
    auto add_claim = [&](const std::string& name) {
      auto it = claims_.find(model::ResourceKey{kClaims, pod.obj.meta.namespace_, name});
      if (it == claims_.end() || it->second.removed ||
          it->second.obj.meta.deletion_timestamp.has_value()) {
        problem = absl::StrCat("resourceclaim \"", name, "\" not found");
        return;
      }
      if (std::find(pod_claims.begin(), pod_claims.end(), &it->second) == pod_claims.end()) {
        pod_claims.push_back(&it->second);
      }
    };
    const json& rcs = At(spec, "resourceClaims");
    for (size_t i = 0; rcs.is_array() && i < rcs.size(); ++i) {
      const json& rc = rcs[i];
      if (At(rc, "resourceClaimName").is_string()) {
        add_claim(Str(rc, "resourceClaimName"));
        continue;
      }
      std::string generated;
      const json& statuses = At(pstatus, "resourceClaimStatuses");
      for (size_t j = 0; statuses.is_array() && j < statuses.size(); ++j) {
        if (Str(statuses[j], "name") == Str(rc, "name")) {
          generated = Str(statuses[j], "resourceClaimName");
        }
      }
      if (generated.empty()) {
        problem = absl::StrCat("waiting for the claim of resourceClaimTemplate \"",
                               Str(rc, "resourceClaimTemplateName"), "\"");
      } else {
        add_claim(generated);
      }
    }
    if (At(pstatus, "extendedResourceClaimStatus").is_object()) {
      add_claim(Str(At(pstatus, "extendedResourceClaimStatus"), "resourceClaimName"));
    }
    if (auto p = claim_problems_.find(pod.obj.meta.uid); p != claim_problems_.end()) {
      problem = p->second;  // why its claim does not exist
    }

    // A claim another commit of this pass is still writing: decide on the next pass, when its
    // new revision is known.
    if (std::any_of(pod_claims.begin(), pod_claims.end(),
                    [&](const ClaimView* c) { return busy_.contains(c); })) {
      ++stats_.conflicts;
      CommitPodWork(pod, {}, {}, pod.status_body, nullptr);
      return;
    }
    PlacementRequest request;
    request.inventory = &inventory_;
    request.allocated = &*st_.allocated;
    request.nodes = &nodes_;
    request.pod = PlacementSpecOf(spec, pod.obj.meta);
    request.options.deadline = clock_.Monotonic() + options_.allocation_budget;
    request.options.now = [this] { return clock_.Monotonic(); };
    request.options.new_share_id = [this] { return ids_.NewUid(); };
    request.nodes_to_find = NodesToFind(nodes_.size());
    request.start = st_.next_start++;
    std::vector<model::ResourceClaim> typed;
    std::vector<ClaimView*> to_allocate;
    typed.reserve(pod_claims.size());
    for (ClaimView* c : pod_claims) {
      if (!c->allocation_error.empty()) {
        problem = absl::StrCat("resourceclaim \"", c->obj.meta.name,
                               "\": status.allocation cannot be decoded: ", c->allocation_error);
        continue;
      }
      if (c->allocation->has_value()) {
        const json& reserved = At(At(*c->body, "status"), "reservedFor");
        if (reserved.is_array() && reserved.size() >= kMaxReservedFor) {
          problem = absl::StrCat("resourceclaim \"", c->obj.meta.name, "\" has ", kMaxReservedFor,
                                 " consumers already");
        }
        const auto& selector = (*c->allocation)->node_selector;
        if (selector.has_value()) request.pinned.push_back(*selector);
        continue;
      }
      auto claim = model::json::DecodeResourceClaim(Whole(c->obj, *c->body));
      if (!claim.ok()) {
        problem =
            absl::StrCat("resourceclaim \"", c->obj.meta.name, "\": ", claim.status().message());
        if (!c->uncommitted) Report(c->obj, std::string(claim.status().message()));
        continue;
      }
      typed.push_back(std::move(*claim));
      to_allocate.push_back(c);
    }
    for (const auto& t : typed) request.to_allocate.push_back(&t);

    // Pods that ask for the same thing share verdicts (a binding dirties only its node, or all
    // nodes when it took devices that are not node-local): the signature of what this one asks.
    json signature = {At(spec, "nodeSelector"), At(spec, "affinity"), At(spec, "tolerations"),
                      request.pod.spread};
    for (const auto& pin : request.pinned) {
      signature.push_back(model::json::EncodeNodeSelector(pin));
    }
    for (const ClaimView* c : to_allocate) signature.push_back(At(*c->body, "spec"));
    request.memo = &memos_[signature.dump()];
    request.node_versions = &node_versions_;
    Placement placement;
    if (problem.empty()) {
      const auto place_start = clock_.Monotonic();
      placement = Place(request);
      placement_ms_ += MsSince(place_start);
      if (placement.kind == Placement::Kind::kInvalid) problem = placement.message;
    }
    if (!problem.empty() || placement.kind != Placement::Kind::kPlaced) {
      Unschedulable(pod, problem.empty() ? placement.message : problem);
      return;
    }
    Bind(pod, pod_claims, to_allocate, placement);
  }

  // PodScheduled=False with `message`, a FailedScheduling Event when the message is new, the
  // pod's claim work, and its next backoff.
  void Unschedulable(PodView& pod, const std::string& message) {
    ++stats_.unschedulable;
    auto body = std::make_shared<json>(pod.Current());
    const bool condition_changed =
        SetCondition(*body, "PodScheduled", "False", "Unschedulable", message, now_);
    std::vector<store::Write> extra;
    if (condition_changed) {
      model::Object event = NewObject(kEvents, pod.obj.meta.namespace_,
                                      absl::StrCat(pod.obj.meta.name, ".", ids_.NameSuffix(10)));
      json ebody = FailedSchedulingEvent(pod.obj, message, now_, options_.component);
      extra.push_back({store::Write::Kind::kCreate, WithBody(event, ebody), {}, 0});
    }
    Body pod_body = condition_changed ? Body(body) : pod.status_body;
    auto backoff_after = [this, p = &pod](const std::vector<model::Object>* committed) {
      State::Backoff& b = st_.backoff[p->obj.meta.uid];
      if (b.attempts == 0) b.since = now_tp_;
      ++b.attempts;
      auto delay = options_.initial_backoff;
      for (int i = 1; i < b.attempts && delay < options_.max_backoff; ++i) delay *= 2;
      b.not_before = now_tp_ + std::min(delay, options_.max_backoff);
      b.generation = st_.generation;
      // A failed write is retried at once.
      b.rv = committed != nullptr ? p->obj.meta.resource_version : 0;
    };
    CommitPodWork(pod, std::move(extra), {}, std::move(pod_body), std::move(backoff_after));
  }

  // Binds `pod` as `placement` says: ledger rows, its claims (new ones created allocated) and
  // the pod in one transaction, committed in the background.
  void Bind(PodView& pod, const std::vector<ClaimView*>& pod_claims,
            const std::vector<ClaimView*>& to_allocate, const Placement& placement) {
    std::vector<store::Write> claim_writes;
    std::vector<store::DeviceClaim> rows;
    const json consumer = {
        {"resource", "pods"}, {"name", pod.obj.meta.name}, {"uid", pod.obj.meta.uid}};
    struct ClaimUpdate {
      ClaimView* claim;
      Body body;
      Allocation allocation;
    };
    std::vector<ClaimUpdate> updates;  // existing claims, in write order
    for (size_t i = 0; i < to_allocate.size(); ++i) {
      ClaimView* c = to_allocate[i];
      auto body = std::make_shared<json>(*c->body);
      (*body)["status"]["allocation"] =
          model::json::EncodeAllocationResult(placement.allocations[i]);
      (*body)["status"]["reservedFor"] = json::array({consumer});
      model::Object next = WithBody(c->obj, *body);
      if (!HasFinalizer(next, kDeleteProtection)) next.meta.finalizers.push_back(kDeleteProtection);
      for (auto& row :
           LedgerRows(placement.allocations[i], c->obj.meta.uid, InventoryDevices(inventory_))) {
        rows.push_back(std::move(row));
      }
      auto allocation =
          std::make_shared<const std::optional<model::AllocationResult>>(placement.allocations[i]);
      if (c->uncommitted) {
        // Created by this transaction, allocated from the start.
        c->obj = std::move(next);
        c->body = std::move(body);
        c->allocation = std::move(allocation);
      } else {
        claim_writes.push_back(
            {store::Write::Kind::kUpdate, std::move(next), {}, c->obj.meta.resource_version});
        updates.push_back({c, std::move(body), std::move(allocation)});
      }
    }
    for (ClaimView* c : pod_claims) {
      if (std::find(to_allocate.begin(), to_allocate.end(), c) != to_allocate.end()) continue;
      auto body = std::make_shared<json>(*c->body);
      json& reserved = (*body)["status"]["reservedFor"];
      if (!reserved.is_array()) reserved = json::array();
      bool present = std::any_of(reserved.begin(), reserved.end(),
                                 [&](const json& r) { return Str(r, "uid") == pod.obj.meta.uid; });
      if (!present) reserved.push_back(consumer);
      claim_writes.push_back(
          {store::Write::Kind::kUpdate, WithBody(c->obj, *body), {}, c->obj.meta.resource_version});
      updates.push_back({c, std::move(body), c->allocation});
    }
    auto pbody = std::make_shared<json>(pod.Current());
    (*pbody)["spec"]["nodeName"] = placement.node;
    SetCondition(*pbody, "PodScheduled", "True", "", "", now_);
    // The next pods are placed against the devices this one takes while its commit runs.
    std::vector<allocator::AllocatedDevice> taken;
    for (const auto& a : placement.allocations) AppendAllocated(a, taken);
    inventory_.AddAllocated(*st_.allocated, taken);
    if (!taken.empty()) {
      if (NodeLocal(placement.allocations)) {
        ++node_versions_[node_index_[placement.node]];
      } else {
        memos_.clear();
      }
    }
    for (ClaimView* c : pod_claims) busy_.insert(c);
    const size_t created = pod.new_claims.size();
    auto bound = [this, p = &pod, updates = std::move(updates), created,
                  node = placement.node](const std::vector<model::Object>* committed) {
      if (committed == nullptr) {
        // Its devices were counted as taken; resolved anew after this pass (the state is still
        // in use by the pods placed after it).
        reset_allocated_ = true;
        return;
      }
      ++stats_.bound;
      p->node_name = node;
      st_.backoff.erase(p->obj.meta.uid);
      for (size_t i = 0; i < updates.size(); ++i) {
        ClaimView* c = updates[i].claim;
        c->obj = (*committed)[created + i];
        c->body = updates[i].body;
        c->allocation = updates[i].allocation;
      }
    };
    CommitPodWork(pod, std::move(claim_writes), std::move(rows), std::move(pbody),
                  std::move(bound));
  }

  // 4. ResourceQuota status: hard and used, when pods or claims may have changed.
  void UpdateQuotaStatus() {
    if (st_.Others(kQuotas).empty() ||
        !(dirty_.all || dirty_.relevant || !dirty_.pods.empty() || !dirty_.claims.empty() ||
          stats_.claims_created > 0 || stats_.claims_released > 0)) {
      return;
    }
    quota_used_.clear();
    for (const auto& [key, quota] : st_.Others(kQuotas)) {
      const std::string body = QuotaStatusBody(quota, UsedIn(key.namespace_));
      if (body.empty()) continue;
      commits_.Submit(store::Transaction{{{store::Write::Kind::kUpdate,
                                           WithBody(quota, Parse(body)),
                                           {},
                                           quota.meta.resource_version}},
                                         {},
                                         {}},
                      [this, key = key](CommitResult committed) {
                        if (!committed.ok()) {
                          ++stats_.conflicts;
                          return;
                        }
                        st_.others[kQuotas][key] = committed->front();  // its own change
                      });
    }
    commits_.Drain();
  }

  // An unschedulable pod waits out its backoff, and then until something that may help changed
  // (or five minutes passed).
  bool BackingOff(const std::string& uid, const PodView& p) const {
    auto b = st_.backoff.find(uid);
    if (b == st_.backoff.end()) return false;
    const bool changed =
        b->second.generation != st_.generation || b->second.rv != p.obj.meta.resource_version;
    const bool due = now_tp_ >= b->second.not_before;
    return !(changed && due) && now_tp_ - b->second.since < kUnschedulableFlush;
  }

  // The claims `uid` owns.
  std::vector<ClaimView*> OwnedBy(const std::string& uid) {
    std::vector<ClaimView*> out;
    auto it = st_.owned.find(uid);
    if (it == st_.owned.end()) return out;
    for (const auto& key : it->second) {
      auto c = claims_.find(key);
      if (c != claims_.end() && !c->second.removed) out.push_back(&c->second);
    }
    return out;
  }

  // A new object's metadata as the object service would fill it in.
  model::Object NewObject(const char* resource, const std::string& ns, std::string name) {
    model::Object o;
    o.resource = resource;
    o.meta.namespace_ = ns;
    o.meta.name = std::move(name);
    o.meta.uid = ids_.NewUid();
    o.meta.generation = 1;
    o.meta.creation_timestamp = now_tp_;
    return o;
  }

  // ResourceQuota: the quotas of a namespace, and its usage by the pods and claims in the views
  // (claims this pass generates included), computed on first need.
  std::vector<model::Object> QuotasIn(const std::string& ns) {
    std::vector<model::Object> out;
    for (const auto& [key, q] : st_.Others(kQuotas)) {
      if (key.namespace_ == ns) out.push_back(q);
    }
    return out;
  }
  QuotaAmounts& UsedIn(const std::string& ns) {
    auto [it, added] = quota_used_.try_emplace(ns);
    if (!added) return it->second;
    for (const auto& [uid, p] : pods_) {
      if (p.obj.meta.namespace_ != ns) continue;
      for (const auto& [k, n] : QuotaUsage(p.obj)) it->second[k] += n;
    }
    for (const auto& [key, c] : claims_) {
      if (key.namespace_ != ns || c.removed) continue;
      for (const auto& [k, n] : QuotaUsage(c.obj)) it->second[k] += n;
    }
    return it->second;
  }

  // A claim generated for `pod`, named <pod><infix><random suffix>, owned by the pod; it joins
  // the claim map uncommitted. Null when its name is taken or quota admission refuses it.
  ClaimView* GenerateClaim(PodView& pod, const std::string& infix,
                           const std::map<std::string, std::string>& labels,
                           std::map<std::string, std::string> annotations, json body) {
    model::Object claim = NewObject(kClaims, pod.obj.meta.namespace_,
                                    absl::StrCat(pod.obj.meta.name, infix, ids_.NameSuffix(5)));
    claim.meta.owner_references = OwnerReference(pod.obj);
    claim.meta.labels = labels;
    claim.meta.annotations = std::move(annotations);
    claim = WithBody(claim, body);
    // Quota admission, as the API server applies it to the claims Kubernetes' controller creates.
    std::vector<store::QuotaCheck> checks;
    if (const auto quotas = QuotasIn(claim.meta.namespace_); !quotas.empty()) {
      QuotaAmounts& used = UsedIn(claim.meta.namespace_);
      // Named by its generateName prefix, so that the refusal reads the same on every attempt.
      model::Object named = claim;
      named.meta.name = absl::StrCat(pod.obj.meta.name, infix);
      if (auto admitted = CheckQuota(named, quotas, used); !admitted.ok()) {
        claim_problems_[pod.obj.meta.uid] = std::string(admitted.message());
        return nullptr;
      }
      for (const auto& [k, n] : QuotaUsage(claim)) used[k] += n;
      checks = QuotaChecks(claim, quotas);
    }
    ClaimView view;
    view.obj = std::move(claim);
    view.body = std::make_shared<const json>(std::move(body));
    view.allocation = std::make_shared<const std::optional<model::AllocationResult>>();
    view.generated = true;
    view.uncommitted = true;
    view.owners = {pod.obj.meta.uid};
    auto [it, inserted] = claims_.emplace(view.obj.Key(), std::move(view));
    if (!inserted) return nullptr;  // a name clash with an existing claim: next pass
    st_.Own(it->second);
    pod.new_claims.push_back(&it->second);
    for (auto& check : checks) pod.quota_checks.push_back(std::move(check));
    return &it->second;
  }

  // Commits controller work (new claims, the pod's claim statuses) plus `extra` writes for a
  // pod in one transaction, in that order, the pod write last: `pod_body` (null: no pod write)
  // is what the pod then has. `then` gets the committed objects, or null when it failed.
  void CommitPodWork(PodView& pod, std::vector<store::Write> extra,
                     std::vector<store::DeviceClaim> rows, Body pod_body, Then then) {
    store::Transaction txn;
    std::vector<ClaimView*> created = pod.new_claims;
    for (ClaimView* c : created) {
      txn.writes.push_back({store::Write::Kind::kCreate, c->obj, {}, 0});
    }
    for (auto& w : extra) txn.writes.push_back(std::move(w));
    const bool writes_pod = pod_body != nullptr;
    if (writes_pod) {
      txn.writes.push_back({store::Write::Kind::kUpdate,
                            WithBody(pod.obj, *pod_body),
                            {},
                            pod.obj.meta.resource_version});
    }
    txn.claim_devices = std::move(rows);
    txn.quota_checks = std::move(pod.quota_checks);
    pod.quota_checks.clear();
    pod.new_claims.clear();
    pod.status_body = nullptr;
    if (txn.writes.empty()) {
      const std::vector<model::Object> none;
      if (then) then(&none);
      return;
    }
    commits_.Submit(std::move(txn), [this, created, writes_pod, pod_body, p = &pod,
                                     then = std::move(then)](CommitResult committed) {
      if (!committed.ok()) {
        ++stats_.conflicts;
        spdlog::info("writing pod {}/{} lost a race: {}", p->obj.meta.namespace_, p->obj.meta.name,
                     committed.status().ToString());
        for (ClaimView* c : created) {
          c->removed = true;
          gone_.push_back(c->obj.Key());
        }
        if (then) then(nullptr);
        return;
      }
      for (size_t i = 0; i < created.size(); ++i) {
        ClaimView* c = created[i];
        c->obj = (*committed)[i];
        c->uncommitted = false;
        ++stats_.claims_created;
      }
      if (writes_pod) {
        p->obj = committed->back();
        p->body = pod_body;
      }
      if (then) then(&*committed);
    });
  }

  IdGenerator& ids_;
  const Clock& clock_;
  const SchedulerOptions& options_;
  DecodeFailures& failures_;
  State& st_;
  const Dirty dirty_;
  const std::chrono::steady_clock::time_point start_ = clock_.Monotonic();
  const std::chrono::system_clock::time_point now_tp_;
  const std::string now_;
  const allocator::Inventory& inventory_;
  const std::vector<NodeState>& nodes_;
  std::map<std::string, PodView>& pods_;
  std::map<model::ResourceKey, ClaimView>& claims_;

  PassStats stats_;
  CommitQueue commits_;
  bool relevant_change_ = false;  // a release freed devices
  bool reset_allocated_ = false;  // a binding failed: resolve the devices in use anew
  // Claims that another commit of this pass is writing, or that changed under us: nothing below
  // touches them this pass.
  std::set<const ClaimView*> busy_;
  // Claims of terminating pods that wait for their agent (ReleaseClaims), and nodes by name.
  std::set<model::ResourceKey> terminating_claims_;
  std::unordered_map<std::string, const NodeState*> node_by_name_;
  // Claims this pass removes or fails to create; dropped from the views at the end of the pass.
  std::vector<model::ResourceKey> gone_;
  std::map<std::string, QuotaAmounts> quota_used_;     // by namespace
  std::map<std::string, std::string> claim_problems_;  // why a pod's claim was refused, by uid
  // Placement memos per pod signature, and a version per node bumped by each binding on it.
  std::map<std::string, PlacementMemo> memos_;
  std::vector<uint64_t> node_versions_;
  std::unordered_map<std::string, size_t> node_index_;
  size_t pending_ = 0;
  double placement_ms_ = 0;
};

absl::StatusOr<PassStats> Scheduler::Pass(bool read_your_writes) {
  State& st = *state_;
  const auto start = clock_.Monotonic();
  Dirty dirty;
  if (auto synced = Sync(read_your_writes, dirty); !synced.ok()) {
    st.synced = false;
    return synced;
  }
  // Now and then, look at every pod and claim (a missed consumer, an orphaned claim).
  if (start - st.last_sweep >= std::chrono::seconds(10)) dirty.all = true;
  if (dirty.all) st.last_sweep = start;
  if (dirty.relevant) ++st.generation;
  st.RefreshSnapshot(&programs_);
  return PassRun(*this, std::move(dirty)).Run();
}

}  // namespace qm::service
