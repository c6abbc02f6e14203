#pragma once

// The scheduler's insides, shared by its files and included by nothing else:
//   scheduler.cc           the loop, the feed from the object cache, one pass start to end;
//   scheduler_state.cc     the views of pods and claims kept between passes, the inventory and
//                          node snapshot, and the helpers the other files share;
//   scheduler_claims.cc    the claim controllers: release, templates and extended resources,
//                          quota status;
//   scheduler_eviction.cc  NoExecute device and node taints, graceful deletion;
//   scheduler_queue.cc     which pending pods a pass tries, in what order, and their backoff;
//   scheduler_binder.cc    placement of one pod and its binding transaction.

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
#include "model/json/dra_json.h"
#include "model/json/edits.h"
#include "model/json/stored.h"
#include "model/resource_types.h"
#include "service/decode_failures.h"
#include "service/graceful_deletion.h"
#include "service/ledger.h"
#include "service/node_restriction.h"
#include "service/placement.h"
#include "service/quota.h"
#include "service/scheduler.h"
#include "spdlog/spdlog.h"

namespace qm::service::scheduling {

using model::json::Document;
using model::json::SetCondition;
using model::json::WithBody;
using model::json::WithStatus;
using Body = model::json::SharedDocument;
using Allocation = std::shared_ptr<const std::optional<model::AllocationResult>>;
using CommitResult = absl::StatusOr<std::vector<model::Object>>;
// A change as the object cache's hub shares it with its watchers (immutable).
using SharedEvent = std::shared_ptr<const model::WatchEvent>;

inline constexpr char kPods[] = "pods";
inline constexpr char kEvents[] = "events";
inline constexpr char kNodes[] = "nodes";
inline constexpr char kClaims[] = "resourceclaims.resource.k8s.io";
inline constexpr char kTemplates[] = "resourceclaimtemplates.resource.k8s.io";
inline constexpr char kSlices[] = "resourceslices.resource.k8s.io";
inline constexpr char kClasses[] = "deviceclasses.resource.k8s.io";
inline constexpr char kTaintRules[] = "devicetaintrules.resource.k8s.io";
inline constexpr char kQuotas[] = "resourcequotas";

inline constexpr char kPodClaimNameAnnotation[] = "resource.kubernetes.io/pod-claim-name";
inline constexpr char kExtendedClaimAnnotation[] = "resource.kubernetes.io/extended-resource-claim";
inline constexpr char kDeleteProtection[] = "resource.kubernetes.io/delete-protection";
inline constexpr char kImplicitExtendedPrefix[] = "deviceclass.resource.kubernetes.io/";
inline constexpr char kSpreadAnnotation[] = "scheduling.quartermaster.io/spread";
inline constexpr char kUnreachableTaint[] = "node.kubernetes.io/unreachable";
// Kubernetes' limit on the consumers in a claim's status.reservedFor.
inline constexpr size_t kMaxReservedFor = 256;
// Bounds of the placement verdicts kept across passes (State::memos): pod signatures, and node
// changes recorded before every verdict is dropped.
inline constexpr size_t kMaxMemos = 1024;
inline constexpr size_t kMaxTouchedNodes = size_t{1} << 16;
// Commits of one pass in flight at once (they share the store's group commits).
inline constexpr size_t kMaxInFlight = 256;
// How often a pass whose commits are in flight looks for late arrivals
// (PassRun::ScheduleLateArrivals, SchedulerOptions::late_arrival_window).
inline constexpr auto kLateArrivalPoll = std::chrono::milliseconds(1);
// How long the loop pauses after a pass ended with an exception.
inline constexpr auto kRestartDelay = std::chrono::milliseconds(500);
// kube-scheduler's podMaxInUnschedulablePodsDuration: an unschedulable pod is tried again after
// this long even when nothing relevant changed.
inline constexpr auto kUnschedulableFlush = std::chrono::minutes(5);

// Whether `obj` lists `finalizer`.
bool HasFinalizer(const model::Object& obj, const char* finalizer);

struct ClaimView;

// A pod as the scheduler sees it, and the work a pass has in hand for it.
struct PodView {
  model::Object obj;
  Body body;
  model::Pod pod;  // `body` decoded
  bool terminal = false;
  bool deleting = false;
  std::string node_name;
  int64_t priority = 0;
  // Controller work of this pass not committed yet: claims generated for the pod (in the claim
  // map, marked uncommitted) and the pod body that records them (null: unchanged). It joins the
  // pod's binding or unschedulable status, or is committed on its own.
  std::vector<ClaimView*> new_claims;
  // Made by this pass and held by no one else while it is pending: the binding edits it in place
  // (TakeCurrent) instead of copying it.
  std::shared_ptr<Document> status_body;
  std::optional<model::Pod> status_pod;  // `status_body` decoded
  // The quota checks the store makes when the new claims are created (quota admission is
  // atomic with the create, whichever replica or client creates at the same time).
  std::vector<store::QuotaCheck> quota_checks;
  // The stored body, parsed. `body` is null once the pod is settled (Settle); its text is then
  // parsed again for the rare edit of a settled pod.
  Body Tree() const { return body != nullptr ? body : model::json::BodyOf(obj); }
  // The body the pod will have once its controller work is committed.
  Body Current() const { return status_body != nullptr ? status_body : Tree(); }
  const model::Pod& CurrentPod() const { return status_pod.has_value() ? *status_pod : pod; }
  // Replaces the pending pod body (null: none). It records the pod's claims, so its spec is the
  // stored one's: only its status is decoded.
  void SetStatusBody(std::shared_ptr<Document> b) {
    status_body = std::move(b);
    status_pod.reset();
    if (status_body == nullptr) return;
    status_pod = pod;
    model::json::DecodePodStatus(*status_body, *status_pod);
  }
  // The body the pod will have once its controller work is committed, to edit further: the
  // pending one itself where no one else holds it (it is pending no more), else a copy.
  std::shared_ptr<Document> TakeCurrent() {
    if (status_body != nullptr && status_body.use_count() == 1) return std::move(status_body);
    return std::make_shared<Document>(*Current());
  }
  // Replaces the stored body, as a commit of it does. `decoded`, where the caller has it, is
  // what DecodePod(*b) gives, which spares decoding the body again.
  void SetBody(Body b, std::optional<model::Pod> decoded = std::nullopt) {
    body = std::move(b);
    pod = decoded.has_value() ? *std::move(decoded) : model::json::DecodePod(*body);
  }
  // Whether the pod waits for a node: not bound, not going, not finished.
  bool Unbound() const { return node_name.empty() && !deleting && !terminal; }
  // Lets go of the parsed body of a pod no pass is about to edit (bound, going or finished, with
  // no controller work in hand): a parsed pod takes several times its text, and a scheduler that
  // kept one per pod held most of its memory in them at 5,000 pods. Tree() parses it again.
  void Settle() {
    if (Unbound() || status_body != nullptr || !new_claims.empty()) return;
    body.reset();
    obj.parsed.reset();
  }
};

// A claim as the scheduler sees it, with its allocation decoded.
struct ClaimView {
  model::Object obj;
  Body body;
  model::ResourceClaimStatus status;  // `body`'s consumers and agent reports, decoded
  Allocation allocation;              // decoded status.allocation (nullopt: not allocated)
  std::string allocation_error;       // why status.allocation does not decode ("": it does)
  bool generated = false;             // by the template or extended-resource controller
  bool uncommitted = false;           // generated by this pass and not in the store yet
  bool removed = false;               // deleted (or never created) by this pass
  std::vector<std::string> owners;    // owner uids
  // status.allocation as text ("" without one): tells whether a change of the claim changed its
  // allocation once the parsed body is gone.
  std::string allocation_text;

  // Replaces the body (and what is decoded of its status).
  void SetBody(Body b) {
    body = std::move(b);
    status = model::json::DecodeResourceClaimStatus(*body);
    allocation_text = model::json::AllocationText(*body);
  }
  // The stored body, parsed: null `body` (a settled claim) is parsed again from its text.
  Body Tree() const { return body != nullptr ? body : model::json::BodyOf(obj); }
  // Lets go of the parsed body of an allocated claim this pass does not create or remove, as
  // PodView::Settle does; Tree() parses it again for a release.
  void Settle() {
    if (!Holds() || uncommitted || removed) return;
    body.reset();
    obj.parsed.reset();
  }

  // Whether the claim may hold devices: an allocation that does not decode counts.
  bool Holds() const { return allocation->has_value() || !allocation_error.empty(); }
};

// The devices of allocation results, as the allocator counts them.
void AppendAllocated(const model::AllocationResult& allocation,
                     std::vector<allocator::AllocatedDevice>& out);

// What placement needs of a pod: node selector, required node affinity, tolerations, and
// whether it asked to be spread.
PodPlacementSpec PlacementSpecOf(const model::Pod& pod, const model::ObjectMeta& meta);

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
  bool Empty() const { return in_flight_.empty(); }
  // Handles the commits at the front that are done, without waiting; false when the oldest is
  // still in flight (or none is).
  bool PopDone() {
    bool any = false;
    while (!in_flight_.empty() && in_flight_.front().result.wait_for(std::chrono::seconds(0)) ==
                                      std::future_status::ready) {
      Pop();
      any = true;
    }
    return any;
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

}  // namespace qm::service::scheduling

namespace qm::service {

// Every scheduler file works with the pieces above unqualified.
using namespace scheduling;  // NOLINT(google-build-using-namespace)

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
  // When the inventory or node list was last rebuilt, and what that took (Clock::Monotonic).
  std::chrono::steady_clock::time_point snapshot_built;
  std::chrono::steady_clock::duration snapshot_cost{};

  // Views of every pod and claim, and the other objects scheduling reads, as of the changes
  // applied so far (plus this replica's own writes).
  std::map<std::string, PodView> pods;  // by uid
  // The uids of the pods that wait for a node, and of those being deleted, so that a pass looks
  // at these instead of walking every pod. Kept by Apply; a pod this replica binds or evicts
  // may stay in `unbound` until a pass finds it bound (each use checks the pod again), and an
  // evicted one joins `deleting` when the pass marks it.
  std::set<std::string> unbound;
  std::set<std::string> deleting;
  std::map<model::ResourceKey, ClaimView> claims;
  // Keys of the claims each pod owns (generated for it), by pod uid.
  std::unordered_map<std::string, std::set<model::ResourceKey>> owned;
  std::map<std::string, std::map<model::ResourceKey, model::Object>> others;  // by resource
  // ResourceSlices, decoded once per change (not once per inventory build) and shared with the
  // inventories built from them; their objects are not kept in `others`.
  struct Slice {
    int64_t rv = 0;
    std::string uid;
    allocator::SharedSlice decoded;  // null: the slice does not decode (reported when applied)
  };
  std::map<model::ResourceKey, Slice> slices;
  // Nodes as placement sees them, decoded once per change; their objects are not kept either.
  struct Node {
    int64_t rv = 0;
    std::string uid;
    NodeState state;
  };
  std::map<model::ResourceKey, Node> node_states;
  std::map<std::string, int64_t> other_rvs;  // resource -> newest revision applied

  bool inventory_dirty = true;
  bool nodes_dirty = true;
  std::shared_ptr<const allocator::Inventory> inventory;
  std::map<std::string, std::string> extended_classes;  // extended resource name -> class
  bool any_no_execute = false;
  bool any_node_no_execute = false;  // some node has a NoExecute taint
  std::vector<NodeState> nodes;
  std::unordered_map<std::string, size_t> node_index;             // name -> position in `nodes`
  std::map<std::pair<std::string, std::string>, Body> templates;  // (namespace, name)
  // The devices in use, resolved against `inventory`: kept across passes (each binding adds its
  // devices, each release takes out what its claim added) and resolved anew when the inventory
  // changed or a binding failed.
  std::optional<allocator::AllocatedState> allocated;
  // What each claim added to `allocated`, so that a release takes out exactly that, once: its
  // allocation's devices, or those an allocation that does not decode may hold, and the node
  // they are on ("" when they are not node-local). Kept with `allocated` (empty while it is
  // unset).
  struct Counted {
    std::vector<allocator::AllocatedDevice> devices;
    std::string node;
  };
  std::map<model::ResourceKey, Counted> counted;
  // Placement verdicts kept across passes, per pod signature (PlacementMemo), with a version per
  // node (by position in `nodes`) that moves whenever the devices in use on the node change
  // (CountAllocated, UncountAllocated) and the list of those moves in order: a pass re-evaluates
  // the nodes that changed since a signature's verdicts, not every node. Dropped (ForgetVerdicts)
  // when the snapshot is rebuilt, the devices in use are resolved anew, devices that are not
  // node-local change hands, on the periodic sweep, and when they grow past their bounds.
  std::map<std::string, PlacementMemo> memos;
  std::vector<uint64_t> node_versions;
  std::vector<uint32_t> touched_nodes;
  // Objects found not to decode since the last pass, with why; the pass reports them.
  std::vector<std::pair<model::Object, std::string>> undecodable;

  // Claims whose release waits for their agent to unprepare them (graceful_deletion.h): looked
  // at again every pass, since their node may become unreachable meanwhile.
  std::set<model::ResourceKey> held_claims;

  // Changes a pass took from the feed while its commits were in flight and left for the next
  // pass (all but new pods: PassRun::ScheduleLateArrivals), in the order they came; the next
  // Sync applies them before anything newer. And what the new pods it applied touched, for the
  // next pass to look at.
  std::vector<SharedEvent> deferred;
  std::set<std::string> carried_pods;
  std::set<model::ResourceKey> carried_claims;

  uint64_t generation = 0;  // bumped by every change that may make waiting pods fit
  std::unordered_map<std::string, Backoff> backoff;  // by pod uid
  size_t next_start = 0;  // rotates the first node tried, as kube-scheduler does

  void Clear() {
    pods.clear();
    unbound.clear();
    deleting.clear();
    claims.clear();
    owned.clear();
    ForgetAllocated();
    others.clear();
    slices.clear();
    node_states.clear();
    other_rvs.clear();
    inventory_dirty = nodes_dirty = true;
    templates.clear();
    deferred.clear();
    carried_pods.clear();
    carried_claims.clear();
  }

  // A stored Node as placement sees it: labels, cordon, taints, readiness.
  static NodeState MakeNode(const model::Object& o);

  // The claims a pod names (directly, generated from templates, for extended resources).
  static std::vector<model::ResourceKey> ClaimsOf(const model::Object& obj, const model::Pod& pod);

  // The views of a stored pod and claim. `previous`, when given, is the view of the object's
  // last version, which they take what has not changed from: the decoded spec of a pod whose
  // spec digest is the same (DecodePodStatus), the decoded allocation of a claim whose
  // allocation text is. MakePod moves it out of `previous`.
  static PodView MakePod(model::Object o, PodView* previous = nullptr);
  static ClaimView MakeClaim(model::Object o, const ClaimView* previous = nullptr);

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

  // Resolves `allocated` (and `counted`) anew from every claim.
  void ResolveAllocated();
  // Drops `allocated`: it is resolved anew before the next placement.
  void ForgetAllocated() {
    allocated.reset();
    counted.clear();
    ForgetVerdicts();
  }
  // Counts `devices` in `allocated` under `key`, replacing what that key counted before
  // (nothing when `allocated` is unset).
  void CountAllocated(const model::ResourceKey& key,
                      std::vector<allocator::AllocatedDevice> devices);
  // The devices `c` holds: its allocation's, or those an allocation that does not decode may
  // hold.
  std::vector<allocator::AllocatedDevice> DevicesHeld(const ClaimView& c) const;
  // The node whose slices (spec.nodeName) hold every one of `devices`, or "" when some are not
  // node-local (or not in the inventory).
  std::string NodeOf(const std::vector<allocator::AllocatedDevice>& devices) const;
  // Takes what `key` counted out of `allocated`.
  void UncountAllocated(const model::ResourceKey& key);

  // Drops every kept verdict; the next placement evaluates every node.
  void ForgetVerdicts() {
    memos.clear();
    node_versions.assign(nodes.size(), 0);
    touched_nodes.clear();
  }
  // The devices in use on `node` ("": anywhere) changed: its verdicts are stale.
  void Touch(const std::string& node);

  // Applies one change. Changes may repeat what a listing or this replica's own commit already
  // shows (Known: those are skipped), and arrive in revision order per object.
  void Apply(model::WatchEvent ev, Dirty& d) {
    if (!Known(ev)) ApplyNew(std::move(ev), d);
  }
  // The same for a shared change, copied only when it is not Known.
  void Apply(const SharedEvent& ev, Dirty& d) {
    if (!Known(*ev)) ApplyNew(model::WatchEvent(*ev), d);
  }
  // Whether the views show `ev`'s object at its revision or a later one already, or `ev` is of
  // no interest (Events): the one revision check of Apply. This replica's own commits, mostly.
  bool Known(const model::WatchEvent& ev) const;
  // Applies a change that is not Known.
  void ApplyNew(model::WatchEvent ev, Dirty& d);

  // Rebuilds the inventory and the node list when their objects changed since the last pass.
  // True when it rebuilt either.
  bool RefreshSnapshot(cel::ProgramCache* programs);

  // Whether a pod waits to be scheduled (not bound, not deleting, not finished).
  bool AnyPending() const;

  const std::map<model::ResourceKey, model::Object>& Others(const char* resource) {
    return others[resource];
  }
};

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
        feed_(scheduler.feed_.get()),
        commits_(scheduler.store_) {}

  // A pass cut short by an exception still waits for its commits before any member goes: their
  // callbacks use this pass's state. A callback that throws is dropped and the rest still run.
  ~PassRun();

  PassRun(const PassRun&) = delete;
  PassRun& operator=(const PassRun&) = delete;

  PassStats Run();

 private:
  using Then = std::function<void(std::vector<model::Object>*)>;

  // Objects that do not decode are never dropped silently: each version is logged and counted
  // once and gets a DecodeFailed Event, which says what the scheduler does about it.
  void ReportUndecodable();
  void Report(const model::Object& obj, const std::string& reason);

  double MsSince(std::chrono::steady_clock::time_point t) const {
    return std::chrono::duration<double, std::milli>(clock_.Monotonic() - t).count();
  }

  // scheduler_claims.cc: the claim controllers.

  // 1. Releases claims whose consumers are gone: prunes reservedFor, deallocates what the
  // scheduler allocated once nothing uses it, deletes generated claims whose pod is gone.
  void ReleaseClaims();

  // Prunes one claim's reservedFor and releases or deletes it as ReleaseClaims says.
  void ReleaseClaim(const model::ResourceKey& key, ClaimView& c);

  // 2. Claims from templates and extended resources, for the pods that changed and the waiting
  // pods about to be tried again (a claim refused before, by quota, may fit now).
  void CreateClaims();

  // Creates the claims one pod still lacks from its templates and extended resources, and
  // records them in its status.
  void CreateClaimsFor(const std::string& uid, PodView& pod);

  // 4. ResourceQuota status: hard and used, when pods or claims may have changed.
  void UpdateQuotaStatus();

  // The claims `uid` owns.
  std::vector<ClaimView*> OwnedBy(const std::string& uid);

  // A new object's metadata as the object service would fill it in.
  model::Object NewObject(const char* resource, const std::string& ns, std::string name);

  // ResourceQuota: the quotas of a namespace, and its usage by the pods and claims in the views
  // (claims this pass generates included), computed on first need.
  std::vector<model::ObjectPtr> QuotasIn(const std::string& ns);
  QuotaAmounts& UsedIn(const std::string& ns);

  // A claim generated for `pod`, named <pod><infix><random suffix>, owned by the pod; it joins
  // the claim map uncommitted. Null when its name is taken or quota admission refuses it.
  ClaimView* GenerateClaim(PodView& pod, const std::string& infix,
                           const std::map<std::string, std::string>& labels,
                           std::map<std::string, std::string> annotations, Document body);

  // scheduler_eviction.cc: eviction and graceful deletion.

  // 2b. NoExecute device taints evict the pods that use the device unless the allocation
  // tolerates them (see EvictionReason); their claims are released on the next pass.
  void Evict();

  // NoExecute node taints (node.kubernetes.io/unreachable from the node monitor, an admin's)
  // evict the pods bound to the node that do not tolerate them, or tolerate them for a
  // tolerationSeconds that has passed (NodeEvictionReason); their claims are released on the
  // next pass.
  void EvictFromNodes();

  // Evicts `pod` (DeletePodWrite, committed in the background) and logs `reason`.
  void EvictPod(PodView& pod, std::string reason);

  // An eviction: the pod's deletion as ObjectService::Delete does it with the default grace
  // period (a pod with finalizers is marked for graceful deletion, one without goes).
  store::Write DeletePodWrite(const PodView& pod) const;

  // Whether the node's agent is heard from: the node exists, is Ready (or says nothing) and has
  // no unreachable taint.
  bool Reachable(const std::string& name);

  // 1b. Graceful deletion (graceful_deletion.h): a terminating pod loses the devices-prepared
  // finalizer, and goes, once none of its claims is held prepared for it (the agent
  // unprepared it, or it is still prepared for another pod that runs), or, on a node that is
  // unreachable, once its deletion timestamp has passed.
  void FinishTerminatingPods();

  // scheduler_queue.cc: which pods a pass tries, and backoff.

  // 3. Schedules pending pods, highest priority first, except those backing off with nothing
  // changed for them.
  void Schedule();

  // PodScheduled=False with `message`, a FailedScheduling Event when the message is new, the
  // pod's claim work, and its next backoff.
  void Unschedulable(PodView& pod, const std::string& message);

  // An unschedulable pod waits out its backoff, and then until something that may help changed
  // (or five minutes passed).
  bool BackingOff(const std::string& uid, const PodView& p) const;

  // 3b. While the pass's commits are in flight (for up to options_.late_arrival_window), pods
  // created meanwhile are placed too instead of waiting for the next pass: their commits join the
  // store's next group commit. Only new pods are applied from the feed here (views are added
  // to, never replaced or removed, while callbacks hold pointers to them); every other change
  // waits in State::deferred for the next pass, and so does a new pod whose claims or templates
  // are not in the views yet.
  void ScheduleLateArrivals();

  // Whether a new pod can be placed now: every claim it names and template it uses is known.
  bool ClaimsKnown(const PodView& pod) const;

  // Schedules `pending` in priority order (Schedule's order).
  void SchedulePods(std::vector<PodView*> pending);

  // scheduler_binder.cc: placing and binding one pod.

  // Finds a node and devices for one pod: binds it, or records why it is unschedulable.
  void SchedulePod(PodView& pod);

  // Binds `pod` as `placement` says: ledger rows, its claims (new ones created allocated) and
  // the pod in one transaction, committed in the background.
  void Bind(PodView& pod, const std::vector<ClaimView*>& pod_claims,
            const std::vector<ClaimView*>& to_allocate, const Placement& placement);

  // Commits controller work (new claims, the pod's claim statuses) plus `extra` writes for a
  // pod in one transaction, in that order, the pod write last: `pod_body` (null: no pod write)
  // is what the pod then has. `then` gets the committed objects, or null when it failed; those
  // of the new claims and the pod have been moved into their views by then (only the `extra`
  // writes' objects are left to read).
  void CommitPodWork(PodView& pod, std::vector<store::Write> extra,
                     std::vector<store::DeviceClaim> rows, Body pod_body, Then then,
                     std::optional<model::Pod> decoded = std::nullopt);

  // Forgets the controller work of this pass for `pod` (its new claims, not in the store yet,
  // leave the views at the end of the pass): the next pass starts over.
  void DropPodWork(PodView& pod);

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
  // The scheduler's feed (null before the first Sync): late arrivals come from it.
  Feed* feed_;

  PassStats stats_;
  CommitQueue commits_;
  bool relevant_change_ = false;   // a release freed devices
  size_t releases_in_flight_ = 0;  // commits of ReleaseClaims that free devices, not done yet
  bool reset_allocated_ = false;   // a binding failed: resolve the devices in use anew
  bool late_ = false;              // placing late arrivals (ScheduleLateArrivals)
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
  size_t pending_ = 0;
  double placement_ms_ = 0;
};

}  // namespace qm::service
