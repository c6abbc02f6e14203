#include "service/scheduler.h"

#include <algorithm>
#include <deque>
#include <future>
#include <map>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/json/dra_json.h"
#include "model/json/fields.h"
#include "model/resource_types.h"
#include "nlohmann/json.hpp"
#include "service/placement.h"
#include "spdlog/spdlog.h"

namespace qm::service {
namespace {

using nlohmann::json;

constexpr char kPods[] = "pods";
constexpr char kEvents[] = "events";
constexpr char kNodes[] = "nodes";
constexpr char kClaims[] = "resourceclaims.resource.k8s.io";
constexpr char kTemplates[] = "resourceclaimtemplates.resource.k8s.io";
constexpr char kSlices[] = "resourceslices.resource.k8s.io";
constexpr char kClasses[] = "deviceclasses.resource.k8s.io";
constexpr char kTaintRules[] = "devicetaintrules.resource.k8s.io";

constexpr char kPodClaimNameAnnotation[] = "resource.kubernetes.io/pod-claim-name";
constexpr char kExtendedClaimAnnotation[] = "resource.kubernetes.io/extended-resource-claim";
constexpr char kDeleteProtection[] = "resource.kubernetes.io/delete-protection";
constexpr char kImplicitExtendedPrefix[] = "deviceclass.resource.kubernetes.io/";
constexpr char kSpreadAnnotation[] = "scheduling.quartermaster.io/spread";
constexpr size_t kMaxReservedFor = 256;
// Bindings committed concurrently by one pass (they share the store's group commits).
constexpr size_t kMaxInFlightBindings = 256;

json ParseBody(const model::Object& obj) {
  json body = json::parse(obj.body, nullptr, /*allow_exceptions=*/false);
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
  out.spec_digest = body.contains("spec") ? body["spec"].dump() : "";
  out.fields = model::json::SelectableFields(TypeOf(out.resource), Whole(out, body));
  return out;
}

std::string RandomSuffix(size_t n) {
  static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";  // as Kubernetes' rand
  thread_local std::mt19937 rng{std::random_device{}()};
  std::string out;
  for (size_t i = 0; i < n; ++i) out.push_back(kAlphabet[rng() % (sizeof(kAlphabet) - 1)]);
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

struct PodView {
  model::Object obj;
  json body;
  bool terminal = false;
  bool deleting = false;
  std::string node_name;
};

struct ClaimView {
  model::Object obj;
  json body;
  bool generated = false;           // by the template or extended-resource controller
  std::vector<std::string> owners;  // owner uids
};

// The claim's status.allocation, decoded by the model codec; nullopt when not allocated (or not
// decodable, which the REST validation prevents).
std::optional<model::AllocationResult> AllocationOf(const json& claim_body) {
  const json status = claim_body.value("status", json::object());
  if (!status.is_object() || !status.contains("allocation")) return std::nullopt;
  auto decoded = model::json::DecodeAllocationResult(status["allocation"], "status.allocation");
  if (!decoded.ok()) return std::nullopt;
  return std::move(*decoded);
}

// The devices of allocation results, as the allocator counts them.
void AppendAllocated(const model::AllocationResult& allocation,
                     std::vector<allocator::AllocatedDevice>& out) {
  for (const auto& r : allocation.results) {
    out.push_back({r.driver, r.pool, r.device, r.share_id, r.consumed_capacity, r.admin_access});
  }
}

// Sets (or replaces) the condition of `type` in status.conditions; returns true when the status
// changed (the transition time moves only when the status does).
bool SetCondition(json& body, const std::string& type, const std::string& status,
                  const std::string& reason, const std::string& message, const std::string& now) {
  json& conditions = body["status"]["conditions"];
  if (!conditions.is_array()) conditions = json::array();
  for (auto& c : conditions) {
    if (c.value("type", "") != type) continue;
    if (c.value("status", "") == status && c.value("reason", "") == reason &&
        c.value("message", "") == message) {
      return false;
    }
    if (c.value("status", "") != status) c["lastTransitionTime"] = now;
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

}  // namespace

// Wakes the loop on every change the object cache dispatches.
class Scheduler::Trigger final : public Watcher {
 public:
  explicit Trigger(Scheduler* s) : s_(s) {}
  bool Deliver(const model::WatchEvent& event) override {
    const auto& r = event.object.resource;
    if (r == kEvents) return true;  // our own events do not make anything schedulable
    Poke();
    return true;
  }
  bool Tick(int64_t) override { return true; }
  void Expire(const absl::Status&) override { Poke(); }

 private:
  void Poke() {
    std::lock_guard<std::mutex> lock(s_->mu_);
    s_->dirty_ = true;
    s_->wake_.notify_one();
  }
  Scheduler* s_;
};

Scheduler::Scheduler(store::Store& store, WatchHub& hub, const Clock& clock, IdGenerator& ids,
                     SchedulerOptions options)
    : store_(store), hub_(hub), clock_(clock), ids_(ids), options_(std::move(options)) {}

Scheduler::~Scheduler() { Stop(); }

void Scheduler::Start() {
  trigger_ = std::make_shared<Trigger>(this);
  if (auto st = hub_.Subscribe(trigger_, hub_.last_dispatched()); !st.ok()) {
    // Without change notifications the loop still runs every `resync`.
    spdlog::warn("scheduler: cannot follow the object cache: {}", st.ToString());
  }
  thread_ = std::thread([this] { Loop(); });
}

void Scheduler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Scheduler::Loop() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait_for(lock, options_.resync, [&] { return stopping_ || dirty_; });
      if (stopping_) return;
      dirty_ = false;
    }
    auto stats = RunOnce();
    if (!stats.ok()) {
      spdlog::warn("scheduler pass failed: {}", stats.status().ToString());
      continue;
    }
    if (stats->conflicts > 0) {
      std::lock_guard<std::mutex> lock(mu_);
      dirty_ = true;  // retry lost races at once, on a fresh snapshot
    }
  }
}

absl::StatusOr<PassStats> Scheduler::RunOnce() {
  PassStats stats;
  const auto pass_start = std::chrono::steady_clock::now();
  auto ms_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
  };
  const auto now_tp = clock_.Now();
  const std::string now = FormatRfc3339(now_tp);
  // Read-your-writes: the cache must have caught up with everything committed so far.
  QM_ASSIGN_OR_RETURN(const int64_t min_rv, store_.CurrentRevision());
  auto list = [&](const char* resource) -> absl::StatusOr<std::vector<model::Object>> {
    ListRequest request;
    request.store.resource = resource;
    auto r = hub_.List(request, min_rv);
    if (!r.ok()) return r.status();
    return std::move(r->items);
  };
  QM_ASSIGN_OR_RETURN(auto pod_objects, list(kPods));
  QM_ASSIGN_OR_RETURN(auto claim_objects, list(kClaims));
  QM_ASSIGN_OR_RETURN(auto template_objects, list(kTemplates));

  std::map<std::string, PodView> pods;  // by uid
  for (auto& o : pod_objects) {
    PodView p;
    p.body = ParseBody(o);
    const std::string phase = p.body.contains("status") && p.body["status"].is_object()
                                  ? p.body["status"].value("phase", "")
                                  : "";
    p.terminal = phase == "Succeeded" || phase == "Failed";
    p.deleting = o.meta.deletion_timestamp.has_value();
    if (p.body.contains("spec") && p.body["spec"].is_object()) {
      p.node_name = p.body["spec"].value("nodeName", "");
    }
    p.obj = std::move(o);
    pods.emplace(p.obj.meta.uid, std::move(p));
  }
  std::map<model::ResourceKey, ClaimView> claims;
  for (auto& o : claim_objects) {
    ClaimView c;
    c.body = ParseBody(o);
    c.generated = o.meta.annotations.contains(kPodClaimNameAnnotation) ||
                  o.meta.annotations.contains(kExtendedClaimAnnotation);
    c.owners = OwnerUids(o);
    c.obj = std::move(o);
    claims.emplace(c.obj.Key(), std::move(c));
  }
  // Generated claims by owning pod uid.
  std::map<std::string, std::vector<ClaimView*>> owned;
  for (auto& [key, c] : claims) {
    for (const auto& uid : c.owners) owned[uid].push_back(&c);
  }

  // 1. Release claims whose consumers are gone.
  for (auto& [key, c] : claims) {
    json& status = c.body["status"];
    if (!status.is_object()) status = json::object();
    json reserved = status.value("reservedFor", json::array());
    json keep = json::array();
    for (const auto& r : reserved) {
      auto it = pods.find(r.value("uid", ""));
      if (r.value("resource", "") == "pods" && it != pods.end() && !it->second.terminal) {
        keep.push_back(r);
      }
    }
    const bool allocated = status.contains("allocation") && !status["allocation"].is_null();
    bool owner_alive = false;
    if (c.generated) {
      for (const auto& uid : c.owners) owner_alive = owner_alive || pods.contains(uid);
    }
    const bool drop = c.generated && !owner_alive && keep.empty();
    const bool release = allocated && keep.empty();
    if (keep.size() == reserved.size() && !release && !drop) continue;

    store::Transaction txn;
    if (release) txn.release_claims.push_back(c.obj.meta.uid);
    auto& finalizers = c.obj.meta.finalizers;
    if (release) {
      finalizers.erase(std::remove(finalizers.begin(), finalizers.end(), kDeleteProtection),
                       finalizers.end());
    }
    if (drop || (c.obj.meta.deletion_timestamp.has_value() && finalizers.empty())) {
      txn.writes.push_back({store::Write::Kind::kDelete, {}, key, c.obj.meta.resource_version});
    } else {
      if (keep.empty()) {
        status.erase("reservedFor");
      } else {
        status["reservedFor"] = keep;
      }
      if (release) status.erase("allocation");
      txn.writes.push_back(
          {store::Write::Kind::kUpdate, WithBody(c.obj, c.body), {}, c.obj.meta.resource_version});
    }
    auto committed = store_.Commit(txn);
    if (!committed.ok()) {
      ++stats.conflicts;
      continue;
    }
    ++stats.claims_released;
    if (committed->front().meta.resource_version != 0 &&
        txn.writes.front().kind == store::Write::Kind::kUpdate) {
      c.obj = committed->front();
    } else {
      c.obj.meta.deletion_timestamp = now_tp;  // gone: keep it out of scheduling below
    }
  }

  QM_ASSIGN_OR_RETURN(auto class_objects, list(kClasses));
  std::map<std::string, std::string> extended_classes;  // resource name -> class
  allocator::InventoryInput input;
  for (const auto& o : class_objects) {
    auto cls = model::json::DecodeDeviceClass(Whole(o, ParseBody(o)));
    if (!cls.ok()) continue;
    extended_classes[std::string(kImplicitExtendedPrefix) + cls->name] = cls->name;
    input.classes.push_back(std::move(*cls));
  }
  // An explicit extendedResourceName wins over the implicit one; on a tie the class whose name
  // sorts first wins (classes are listed in name order).
  std::map<std::string, std::string> explicit_names;
  for (const auto& cls : input.classes) {
    if (!cls.extended_resource_name.empty() &&
        !explicit_names.contains(cls.extended_resource_name)) {
      explicit_names[cls.extended_resource_name] = cls.name;
    }
  }
  for (const auto& [name, cls] : explicit_names) extended_classes[name] = cls;

  // A new object's metadata as the object service would fill it in.
  auto new_object = [&](const char* resource, const std::string& ns, std::string name) {
    model::Object o;
    o.resource = resource;
    o.meta.namespace_ = ns;
    o.meta.name = std::move(name);
    o.meta.uid = ids_.NewUid();
    o.meta.generation = 1;
    o.meta.creation_timestamp = now_tp;
    return o;
  };
  // A claim generated for `pod`, named <pod><infix><random suffix> and owned by the pod.
  auto generated_claim = [&](const PodView& pod, const std::string& infix) {
    model::Object claim = new_object(kClaims, pod.obj.meta.namespace_,
                                     absl::StrCat(pod.obj.meta.name, infix, RandomSuffix(5)));
    claim.meta.owner_references = OwnerReference(pod.obj);
    return claim;
  };
  // 2. Claims from templates and extended resources: per pod, one transaction creates its
  // missing claims and records them in its status; the transactions run concurrently.
  struct ControllerWork {
    PodView* pod = nullptr;
    std::vector<store::Write> writes;
    std::vector<ClaimView> new_claims;
    json pod_body;  // null when the pod's status does not change
    std::future<absl::StatusOr<std::vector<model::Object>>> result;
  };
  std::deque<ControllerWork> controller_work;
  size_t controller_done = 0;
  auto finish_controller = [&](ControllerWork& w) {
    auto committed = w.result.get();
    if (!committed.ok()) {
      ++stats.conflicts;
      return;
    }
    for (size_t i = 0; i < w.new_claims.size(); ++i) {
      ClaimView view = std::move(w.new_claims[i]);
      view.obj = (*committed)[i];
      const std::string owner = view.owners.front();
      auto [it, _] = claims.emplace(view.obj.Key(), std::move(view));
      owned[owner].push_back(&it->second);
      ++stats.claims_created;
    }
    if (!w.pod_body.is_null()) {
      w.pod->obj = committed->back();
      w.pod->body = std::move(w.pod_body);
    }
  };
  for (auto& [uid, pod] : pods) {
    if (pod.deleting || pod.terminal) continue;
    ControllerWork work;
    const json spec = pod.body.value("spec", json::object());
    json statuses = json::array();
    bool statuses_known = true;
    for (const auto& rc : spec.value("resourceClaims", json::array())) {
      const std::string name = rc.value("name", "");
      const std::string tmpl = rc.value("resourceClaimTemplateName", "");
      if (tmpl.empty()) continue;
      std::string found;
      for (const ClaimView* c : owned[uid]) {
        auto a = c->obj.meta.annotations.find(kPodClaimNameAnnotation);
        if (a != c->obj.meta.annotations.end() && a->second == name) found = c->obj.meta.name;
      }
      if (found.empty()) {
        auto t = std::find_if(template_objects.begin(), template_objects.end(), [&](const auto& o) {
          return o.meta.namespace_ == pod.obj.meta.namespace_ && o.meta.name == tmpl;
        });
        if (t == template_objects.end()) {
          statuses_known = false;
          continue;
        }
        json tbody = ParseBody(*t);
        json tspec = tbody.value("spec", json::object());
        model::Object claim = generated_claim(pod, absl::StrCat("-", name, "-"));
        json tmeta = tspec.value("metadata", json::object());
        const json template_labels = tmeta.value("labels", json::object());
        for (const auto& [k, v] : template_labels.items()) {
          if (v.is_string()) claim.meta.labels[k] = v.get<std::string>();
        }
        const json template_annotations = tmeta.value("annotations", json::object());
        for (const auto& [k, v] : template_annotations.items()) {
          if (v.is_string()) claim.meta.annotations[k] = v.get<std::string>();
        }
        claim.meta.annotations[kPodClaimNameAnnotation] = name;
        json cbody = {{"spec", tspec.value("spec", json::object())}};
        claim = WithBody(claim, cbody);
        found = claim.meta.name;
        work.writes.push_back({store::Write::Kind::kCreate, claim, {}, 0});
        work.new_claims.push_back(ClaimView{claim, cbody, true, {uid}});
      }
      statuses.push_back({{"name", name}, {"resourceClaimName", found}});
    }

    // Extended resources served by DRA classes: one generated claim per pod.
    json requests = json::array();
    json mappings = json::array();
    auto containers = spec.value("containers", json::array());
    for (size_t ci = 0; ci < containers.size(); ++ci) {
      const json resources = containers[ci].value("resources", json::object());
      json amounts = resources.value("limits", json::object());
      const json requested = resources.value("requests", json::object());
      for (const auto& [k, v] : requested.items()) {
        if (!amounts.contains(k)) amounts[k] = v;
      }
      int ri = 0;
      for (const auto& [resource, amount] : amounts.items()) {
        auto cls = extended_classes.find(resource);
        if (cls == extended_classes.end()) continue;
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
        mappings.push_back({{"containerName", containers[ci].value("name", "")},
                            {"resourceName", resource},
                            {"requestName", request}});
      }
    }
    json extended_status;
    if (!requests.empty()) {
      std::string found;
      for (const ClaimView* c : owned[uid]) {
        if (c->obj.meta.annotations.contains(kExtendedClaimAnnotation)) found = c->obj.meta.name;
      }
      if (found.empty()) {
        model::Object claim = generated_claim(pod, "-extended-resources-");
        claim.meta.annotations[kExtendedClaimAnnotation] = "true";
        json cbody = {{"spec", {{"devices", {{"requests", requests}}}}}};
        claim = WithBody(claim, cbody);
        found = claim.meta.name;
        work.writes.push_back({store::Write::Kind::kCreate, claim, {}, 0});
        work.new_claims.push_back(ClaimView{claim, cbody, true, {uid}});
      }
      extended_status = {{"resourceClaimName", found}, {"requestMappings", mappings}};
    }

    // Record the generated claims in the pod's status, in the transaction that creates them.
    json body = pod.body;
    json& pstatus = body["status"];
    if (!pstatus.is_object()) pstatus = json::object();
    bool changed = false;
    if (statuses_known && !statuses.empty() &&
        pstatus.value("resourceClaimStatuses", json::array()) != statuses) {
      pstatus["resourceClaimStatuses"] = statuses;
      changed = true;
    }
    if (!extended_status.is_null() &&
        pstatus.value("extendedResourceClaimStatus", json()) != extended_status) {
      pstatus["extendedResourceClaimStatus"] = extended_status;
      changed = true;
    }
    if (changed) {
      work.writes.push_back({store::Write::Kind::kUpdate,
                             WithBody(pod.obj, body),
                             {},
                             pod.obj.meta.resource_version});
      work.pod_body = std::move(body);
    }
    if (work.writes.empty()) continue;
    work.pod = &pod;
    ControllerWork& w = controller_work.emplace_back(std::move(work));
    store::Transaction txn{w.writes, {}, {}};
    w.result =
        std::async(std::launch::async, [this, txn = std::move(txn)] { return store_.Commit(txn); });
    if (controller_work.size() - controller_done >= kMaxInFlightBindings) {
      finish_controller(controller_work[controller_done++]);
    }
  }
  while (controller_done < controller_work.size()) {
    finish_controller(controller_work[controller_done++]);
  }

  QM_ASSIGN_OR_RETURN(auto slice_objects, list(kSlices));
  QM_ASSIGN_OR_RETURN(auto rule_objects, list(kTaintRules));
  QM_ASSIGN_OR_RETURN(auto node_objects, list(kNodes));
  for (const auto& o : slice_objects) {
    auto s = model::json::DecodeResourceSlice(Whole(o, ParseBody(o)));
    if (s.ok()) input.slices.push_back(std::move(*s));
  }
  for (const auto& o : rule_objects) {
    auto r = model::json::DecodeDeviceTaintRule(Whole(o, ParseBody(o)));
    if (r.ok()) input.taint_rules.push_back(std::move(*r));
  }
  std::vector<NodeState> nodes;
  for (const auto& o : node_objects) {
    json body = ParseBody(o);
    NodeState n;
    n.info = model::NodeInfo{o.meta.name, o.meta.labels};
    json spec = body.value("spec", json::object());
    n.unschedulable = spec.value("unschedulable", false);
    for (const auto& t : spec.value("taints", json::array())) {
      n.taints.push_back({t.value("key", ""), t.value("value", ""), t.value("effect", "")});
    }
    for (const auto& c : body.value("status", json::object()).value("conditions", json::array())) {
      if (c.value("type", "") == "Ready") n.ready = c.value("status", "") == "True";
    }
    nodes.push_back(std::move(n));
  }
  auto inventory = allocator::Inventory::Build(std::move(input), &programs_);

  // 2b. NoExecute device taints (on the device or from a DeviceTaintRule) evict the pods that
  // use the device unless the allocation tolerates them (tolerationSeconds counted from the
  // taint's timeAdded); their claims are released on the next pass.
  for (auto& [key, c] : claims) {
    const json status = c.body.value("status", json::object());
    const auto allocation = AllocationOf(c.body);
    if (!allocation.has_value() || !status.contains("reservedFor")) continue;
    std::string evict_reason;
    for (const auto& r : allocation->results) {
      const auto* ids = inventory->FindDevice(absl::StrCat(r.driver, "/", r.pool, "/", r.device));
      if (ids == nullptr) continue;
      const auto& tolerations = r.tolerations;
      for (const auto& taint : inventory->devices()[ids->back()].taints) {
        if (taint.effect != "NoExecute") continue;
        const model::DeviceToleration* match = nullptr;
        for (const auto& tol : tolerations) {
          if (model::Tolerates(tol, taint)) match = &tol;
        }
        bool expired = match == nullptr;
        if (match != nullptr && match->toleration_seconds.has_value()) {
          std::chrono::system_clock::time_point added = now_tp;
          if (!taint.time_added.empty()) ParseRfc3339(taint.time_added, &added);
          expired = now_tp >= added + std::chrono::seconds(*match->toleration_seconds);
        }
        if (expired && evict_reason.empty()) {
          evict_reason = absl::StrCat("device ", r.pool, "/", r.device, " has the NoExecute taint ",
                                      taint.key, taint.value.empty() ? "" : "=", taint.value);
        }
      }
    }
    if (evict_reason.empty()) continue;
    for (const auto& consumer : status["reservedFor"]) {
      auto it = pods.find(consumer.value("uid", ""));
      if (it == pods.end() || it->second.deleting) continue;
      PodView& pod = it->second;
      auto deleted = store_.Commit(store::Transaction{
          {{store::Write::Kind::kDelete, {}, pod.obj.Key(), pod.obj.meta.resource_version}},
          {},
          {}});
      if (!deleted.ok()) {
        ++stats.conflicts;
        continue;
      }
      spdlog::info("evicted pod {}/{}: {}", pod.obj.meta.namespace_, pod.obj.meta.name,
                   evict_reason);
      pod.deleting = true;
      ++stats.evicted;
    }
  }

  const double controllers_ms = ms_since(pass_start);
  // 3. Schedule pending pods.
  std::vector<PodView*> pending;
  for (auto& [uid, p] : pods) {
    if (p.node_name.empty() && !p.deleting && !p.terminal) pending.push_back(&p);
  }
  if (pending.empty()) return stats;
  std::sort(pending.begin(), pending.end(), [](const PodView* a, const PodView* b) {
    int64_t pa = a->body.value("spec", json::object()).value("priority", int64_t{0});
    int64_t pb = b->body.value("spec", json::object()).value("priority", int64_t{0});
    if (pa != pb) return pa > pb;
    if (a->obj.meta.creation_timestamp != b->obj.meta.creation_timestamp) {
      return a->obj.meta.creation_timestamp < b->obj.meta.creation_timestamp;
    }
    return a->obj.Key() < b->obj.Key();
  });

  // Pods that ask for the same thing share verdicts; a binding dirties only its node (or all
  // nodes when it took devices that are not node-local).
  std::map<std::string, PlacementMemo> memos;
  std::vector<uint64_t> node_versions(nodes.size(), 0);
  std::map<std::string, size_t> node_index;
  for (size_t i = 0; i < nodes.size(); ++i) node_index[nodes[i].info.name] = i;
  const double snapshot_ms = ms_since(pass_start) - controllers_ms;
  double placement_ms = 0;

  std::vector<allocator::AllocatedDevice> in_use;
  for (const auto& [key, c] : claims) {
    if (auto allocation = AllocationOf(c.body)) AppendAllocated(*allocation, in_use);
  }
  allocator::AllocatedState state = inventory->ResolveAllocated(in_use);

  struct InFlight {
    PodView* pod = nullptr;
    std::vector<std::pair<ClaimView*, json>> claim_updates;
    json pod_body;
    std::string node;
    std::future<absl::StatusOr<std::vector<model::Object>>> result;
  };
  std::deque<InFlight> in_flight;
  std::set<const ClaimView*> in_flight_claims;
  auto finish = [&](InFlight& f) {
    auto committed = f.result.get();
    if (!committed.ok()) {
      ++stats.conflicts;
      spdlog::info("binding pod {}/{} lost a race: {}", f.pod->obj.meta.namespace_,
                   f.pod->obj.meta.name, committed.status().ToString());
      return;
    }
    ++stats.bound;
    for (size_t i = 0; i < f.claim_updates.size(); ++i) {
      f.claim_updates[i].first->obj = (*committed)[i];
      f.claim_updates[i].first->body = f.claim_updates[i].second;
    }
    f.pod->obj = committed->back();
    f.pod->body = f.pod_body;
    f.pod->node_name = f.node;
  };
  for (PodView* pod : pending) {
    const json spec = pod->body.value("spec", json::object());
    std::string problem;
    std::vector<ClaimView*> pod_claims;
    auto add_claim = [&](const std::string& name) {
      auto it = claims.find(model::ResourceKey{kClaims, pod->obj.meta.namespace_, name});
      if (it == claims.end() || it->second.obj.meta.deletion_timestamp.has_value()) {
        problem = absl::StrCat("resourceclaim \"", name, "\" not found");
        return;
      }
      if (std::find(pod_claims.begin(), pod_claims.end(), &it->second) == pod_claims.end()) {
        pod_claims.push_back(&it->second);
      }
    };
    const json pstatus = pod->body.value("status", json::object());
    for (const auto& rc : spec.value("resourceClaims", json::array())) {
      if (rc.contains("resourceClaimName") && rc["resourceClaimName"].is_string()) {
        add_claim(rc["resourceClaimName"].get<std::string>());
        continue;
      }
      std::string generated;
      for (const auto& s : pstatus.value("resourceClaimStatuses", json::array())) {
        if (s.value("name", "") == rc.value("name", ""))
          generated = s.value("resourceClaimName", "");
      }
      if (generated.empty()) {
        problem = absl::StrCat("waiting for the claim of resourceClaimTemplate \"",
                               rc.value("resourceClaimTemplateName", ""), "\"");
      } else {
        add_claim(generated);
      }
    }
    if (pstatus.contains("extendedResourceClaimStatus")) {
      add_claim(pstatus["extendedResourceClaimStatus"].value("resourceClaimName", ""));
    }

    // A claim another binding of this pass is still writing: decide on the next pass, when its
    // new revision is known.
    if (std::any_of(pod_claims.begin(), pod_claims.end(),
                    [&](const ClaimView* c) { return in_flight_claims.contains(c); })) {
      ++stats.conflicts;
      continue;
    }
    PlacementRequest request;
    request.inventory = inventory.get();
    request.allocated = &state;
    request.nodes = &nodes;
    const json node_selector = spec.value("nodeSelector", json::object());
    for (const auto& [k, v] : node_selector.items()) {
      if (v.is_string()) request.pod.node_selector[k] = v.get<std::string>();
    }
    const json required = spec.value("affinity", json::object())
                              .value("nodeAffinity", json::object())
                              .value("requiredDuringSchedulingIgnoredDuringExecution", json());
    if (required.is_object()) {
      auto sel = model::json::DecodeNodeSelector(required, "spec.affinity");
      if (sel.ok()) request.pod.required_affinity = std::move(*sel);
    }
    for (const auto& t : spec.value("tolerations", json::array())) {
      request.pod.tolerations.push_back({t.value("key", ""), t.value("operator", ""),
                                         t.value("value", ""), t.value("effect", "")});
    }
    request.pod.spread = pod->obj.meta.annotations.contains(kSpreadAnnotation);
    request.options.deadline = std::chrono::steady_clock::now() + options_.allocation_budget;
    request.nodes_to_find = NodesToFind(nodes.size());
    request.start = next_start_++;
    std::vector<model::ResourceClaim> typed;
    std::vector<ClaimView*> to_allocate;
    typed.reserve(pod_claims.size());
    for (ClaimView* c : pod_claims) {
      const json& status = c->body["status"];
      if (status.is_object() && status.contains("allocation")) {
        if (status.value("reservedFor", json::array()).size() >= kMaxReservedFor) {
          problem = absl::StrCat("resourceclaim \"", c->obj.meta.name, "\" has ", kMaxReservedFor,
                                 " consumers already");
        }
        auto a = model::json::DecodeAllocationResult(status["allocation"], "status.allocation");
        if (a.ok() && a->node_selector.has_value()) request.pinned.push_back(*a->node_selector);
        continue;
      }
      auto claim = model::json::DecodeResourceClaim(Whole(c->obj, c->body));
      if (!claim.ok()) {
        problem =
            absl::StrCat("resourceclaim \"", c->obj.meta.name, "\": ", claim.status().message());
        continue;
      }
      typed.push_back(std::move(*claim));
      to_allocate.push_back(c);
    }
    for (const auto& t : typed) request.to_allocate.push_back(&t);

    // The signature of what this pod asks for.
    json signature = {spec.value("nodeSelector", json()), spec.value("affinity", json()),
                      spec.value("tolerations", json()), request.pod.spread};
    for (const auto& pin : request.pinned)
      signature.push_back(model::json::EncodeNodeSelector(pin));
    for (const ClaimView* c : to_allocate) signature.push_back(c->body.value("spec", json()));
    request.memo = &memos[signature.dump()];
    request.node_versions = &node_versions;
    Placement placement;
    if (problem.empty()) {
      const auto place_start = std::chrono::steady_clock::now();
      placement = Place(request);
      placement_ms += ms_since(place_start);
      if (placement.kind == Placement::Kind::kInvalid) problem = placement.message;
    }
    if (!problem.empty() || placement.kind != Placement::Kind::kPlaced) {
      const std::string message = problem.empty() ? placement.message : problem;
      ++stats.unschedulable;
      json body = pod->body;
      if (!SetCondition(body, "PodScheduled", "False", "Unschedulable", message, now)) continue;
      store::Transaction txn;
      txn.writes.push_back({store::Write::Kind::kUpdate,
                            WithBody(pod->obj, body),
                            {},
                            pod->obj.meta.resource_version});
      model::Object event = new_object(kEvents, pod->obj.meta.namespace_,
                                       absl::StrCat(pod->obj.meta.name, ".", RandomSuffix(10)));
      json ebody = {{"involvedObject",
                     {{"kind", "Pod"},
                      {"namespace", pod->obj.meta.namespace_},
                      {"name", pod->obj.meta.name},
                      {"uid", pod->obj.meta.uid},
                      {"apiVersion", "v1"}}},
                    {"reason", "FailedScheduling"},
                    {"message", message},
                    {"type", "Warning"},
                    {"count", 1},
                    {"firstTimestamp", now},
                    {"lastTimestamp", now},
                    {"source", {{"component", options_.component}}},
                    {"reportingComponent", options_.component}};
      event = WithBody(event, ebody);
      txn.writes.push_back({store::Write::Kind::kCreate, event, {}, 0});
      auto committed = store_.Commit(txn);
      if (committed.ok()) {
        pod->obj = committed->front();
        pod->body = body;
      } else {
        ++stats.conflicts;
      }
      continue;
    }

    // Bind: ledger rows, claims, pod and a Scheduled event in one transaction.
    store::Transaction txn;
    const json consumer = {
        {"resource", "pods"}, {"name", pod->obj.meta.name}, {"uid", pod->obj.meta.uid}};
    std::vector<std::pair<ClaimView*, json>> claim_updates;
    for (size_t i = 0; i < to_allocate.size(); ++i) {
      ClaimView* c = to_allocate[i];
      json body = c->body;
      body["status"]["allocation"] = model::json::EncodeAllocationResult(placement.allocations[i]);
      body["status"]["reservedFor"] = json::array({consumer});
      model::Object next = WithBody(c->obj, body);
      if (std::find(next.meta.finalizers.begin(), next.meta.finalizers.end(), kDeleteProtection) ==
          next.meta.finalizers.end()) {
        next.meta.finalizers.push_back(kDeleteProtection);
      }
      txn.writes.push_back({store::Write::Kind::kUpdate, next, {}, c->obj.meta.resource_version});
      for (const auto& r : placement.allocations[i].results) {
        json consumed = json::object();
        for (const auto& [name, q] : r.consumed_capacity) consumed[name] = q.String();
        txn.claim_devices.push_back({r.driver, r.pool, r.device, r.share_id, c->obj.meta.uid,
                                     r.admin_access, consumed.dump()});
      }
      claim_updates.emplace_back(c, body);
    }
    for (ClaimView* c : pod_claims) {
      if (std::find(to_allocate.begin(), to_allocate.end(), c) != to_allocate.end()) continue;
      json body = c->body;
      json& reserved = body["status"]["reservedFor"];
      if (!reserved.is_array()) reserved = json::array();
      bool present = std::any_of(reserved.begin(), reserved.end(), [&](const json& r) {
        return r.value("uid", "") == pod->obj.meta.uid;
      });
      if (!present) reserved.push_back(consumer);
      txn.writes.push_back(
          {store::Write::Kind::kUpdate, WithBody(c->obj, body), {}, c->obj.meta.resource_version});
      claim_updates.emplace_back(c, body);
    }
    json pbody = pod->body;
    pbody["spec"]["nodeName"] = placement.node;
    SetCondition(pbody, "PodScheduled", "True", "", "", now);
    model::Object bound = WithBody(pod->obj, pbody);
    txn.writes.push_back({store::Write::Kind::kUpdate, bound, {}, pod->obj.meta.resource_version});
    // Commit in the background so that the store's group commit puts many bindings into one
    // transaction; the next pods are placed against the devices this one takes.
    std::vector<allocator::AllocatedDevice> taken;
    for (const auto& a : placement.allocations) AppendAllocated(a, taken);
    inventory->AddAllocated(state, taken);
    bool node_local = true;
    for (const auto& a : placement.allocations) {
      node_local = node_local && a.node_selector.has_value() && !a.node_selector->terms.empty() &&
                   !a.node_selector->terms.front().match_fields.empty() &&
                   a.node_selector->terms.front().match_fields.front().key == "metadata.name";
    }
    if (!taken.empty()) {
      if (node_local) {
        ++node_versions[node_index[placement.node]];
      } else {
        memos.clear();
      }
    }
    for (ClaimView* c : pod_claims) in_flight_claims.insert(c);
    InFlight f;
    f.pod = pod;
    f.claim_updates = std::move(claim_updates);
    f.pod_body = std::move(pbody);
    f.node = placement.node;
    f.result =
        std::async(std::launch::async, [this, txn = std::move(txn)] { return store_.Commit(txn); });
    in_flight.push_back(std::move(f));
    if (in_flight.size() >= kMaxInFlightBindings) {
      finish(in_flight.front());
      in_flight.pop_front();
    }
  }
  for (auto& f : in_flight) finish(f);
  spdlog::debug(
      "scheduler pass: {} pending, {} bound, {} unschedulable, {} conflicts; controllers {:.1f} "
      "ms, "
      "snapshot {:.1f} ms, placement {:.1f} ms, total {:.1f} ms",
      pending.size(), stats.bound, stats.unschedulable, stats.conflicts, controllers_ms,
      snapshot_ms, placement_ms, ms_since(pass_start));
  return stats;
}

}  // namespace qm::service
