#include "service/scheduler.h"

#include "service/scheduler_pass.h"

namespace qm::service {

// While no pod waits, the next rebuild of the snapshot comes no sooner than this many times the
// last one's cost after it, and no sooner than kIdleSnapshotInterval (Pass): rebuilds then take
// at most a seventeenth of the loop's time. With 4 (a fifth) they were 10% of the server's CPU
// while 50,000 nodes x 8 devices joined; with 16 that setup took 7% less server CPU. A pod that
// arrives ends the wait, so it is scheduled on a fresh snapshot all the same.
constexpr int kIdleSnapshotCostFactor = 16;
constexpr std::chrono::milliseconds kIdleSnapshotInterval{500};

// Follows the object cache for the scheduler: collects every change for the next pass and wakes
// the loop. Called from the hub's delivery threads; Close() detaches it from the scheduler.
class Scheduler::Feed final : public Watcher {
 public:
  explicit Feed(Scheduler* s) : s_(s) {}
  bool Deliver(const model::WatchEvent& event) override {
    return DeliverShared(std::make_shared<const model::WatchEvent>(event));
  }
  // The hub's copy is kept, not copied: most changes the scheduler gets are its own commits,
  // which the views show already (State::Known), and those it never copies at all.
  bool DeliverShared(const std::shared_ptr<const model::WatchEvent>& event) override {
    qm::MutexLock lock(&mu_);
    if (s_ == nullptr) return false;
    seen_rv_ = std::max(seen_rv_, event->object.meta.resource_version);
    caught_up_.SignalAll();
    if (event->object.resource == kEvents) return true;  // they make nothing schedulable
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
  // The changes received so far, waiting up to `wait` for one while there are none (nothing
  // once the feed lost its place: the next Sync lists again).
  void TakeWithin(std::chrono::milliseconds wait, std::vector<SharedEvent>* out) {
    qm::MutexLock lock(&mu_);
    const auto deadline = std::chrono::steady_clock::now() + wait;
    while (!expired_ && inbox_.empty() && caught_up_.WaitUntil(&mu_, deadline)) {
    }
    if (expired_) return;
    out->swap(inbox_);
    inbox_.clear();
  }
  // The newest revision delivered or ticked.
  int64_t seen() {
    qm::MutexLock lock(&mu_);
    return seen_rv_;
  }
  // The changes received so far, once they reach revision `min_rv` or `timeout` passes. False
  // when the feed lost its place (the scheduler must list again).
  bool Take(int64_t min_rv, std::chrono::milliseconds timeout, std::vector<SharedEvent>* out) {
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
  std::vector<SharedEvent> inbox_ ABSL_GUARDED_BY(mu_);
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
      // A snapshot rebuild put off by the last pass (Pass) is due sooner than the resync.
      const auto wait =
          refresh_delay_.has_value()
              ? std::min<std::chrono::steady_clock::duration>(*refresh_delay_, options_.resync)
              : std::chrono::steady_clock::duration(options_.resync);
      refresh_delay_.reset();
      const auto deadline = std::chrono::steady_clock::now() + wait;
      bool due = false;
      while (!stopping_ && !dirty_ && !due) {
        due = !wake_.WaitUntil(&mu_, deadline);
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
      if (stats->conflicts > 0 || stats->deferred > 0) {
        qm::MutexLock lock(&mu_);
        dirty_ = true;  // retry lost races and late arrivals at once, on a fresh snapshot
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
  std::vector<SharedEvent> changes;
  if (st.synced && feed_->Take(min_rv, std::chrono::seconds(1), &changes)) {
    // What the last pass left (PassRun::ScheduleLateArrivals) came before these.
    for (const auto& ev : st.deferred) st.Apply(ev, dirty);
    st.deferred.clear();
    for (const auto& ev : changes) st.Apply(ev, dirty);
    dirty.pods.merge(st.carried_pods);
    dirty.claims.merge(st.carried_claims);
    st.carried_pods.clear();
    st.carried_claims.clear();
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
    for (const auto& o : listed.items) {
      st.Apply(model::WatchEvent{model::EventType::kAdded, *o}, dirty);
    }
  }
  // Each kind was listed at its own revision: a claim listed after its pod was created may be
  // reserved for a pod the earlier pod listing did not show, and the claim controller would
  // release it. Bring every kind up to the newest listing from the feed before any pass.
  std::vector<SharedEvent> catch_up;
  if (!feed_->Take(listed_rv, std::chrono::seconds(5), &catch_up) || feed_->seen() < listed_rv) {
    return absl::UnavailableError("the scheduler's feed did not reach the listed revision " +
                                  std::to_string(listed_rv));
  }
  for (const auto& ev : catch_up) st.Apply(ev, dirty);
  st.synced = true;
  dirty.all = true;
  dirty.relevant = true;
  return absl::OkStatus();
}

absl::StatusOr<PassStats> Scheduler::RunOnce() { return Pass(/*read_your_writes=*/true); }

Scheduler::PassRun::~PassRun() {
  for (;;) {
    try {
      commits_.Drain();
      return;
    } catch (...) {
      spdlog::error("scheduler: a commit callback failed while a pass was being abandoned");
    }
  }
}

PassStats Scheduler::PassRun::Run() {
  ReportUndecodable();
  ReleaseClaims();
  FinishTerminatingPods();
  CreateClaims();
  Evict();
  const double controllers_ms = MsSince(start_);
  Schedule();
  ScheduleLateArrivals();
  commits_.Drain();
  UpdateQuotaStatus();
  for (const auto& key : gone_) {
    auto it = claims_.find(key);
    if (it == claims_.end() || !it->second.removed) continue;
    st_.Disown(it->second);
    claims_.erase(it);
  }
  if (reset_allocated_) st_.ForgetAllocated();
  // The views this pass looked at let go of the parsed bodies no pass is about to edit.
  if (dirty_.all) {
    for (auto& [uid, p] : pods_) p.Settle();
    for (auto& [key, c] : claims_) c.Settle();
  } else {
    for (const auto& uid : dirty_.pods) {
      if (auto it = pods_.find(uid); it != pods_.end()) it->second.Settle();
    }
    for (const auto& key : dirty_.claims) {
      if (auto it = claims_.find(key); it != claims_.end()) it->second.Settle();
    }
  }
  spdlog::debug(
      "scheduler pass: {} pending, {} bound, {} unschedulable, {} backing off, {} conflicts; "
      "controllers {:.1f} ms, placement {:.1f} ms, total {:.1f} ms",
      pending_, stats_.bound, stats_.unschedulable, stats_.backing_off, stats_.conflicts,
      controllers_ms, placement_ms_, MsSince(start_));
  return stats_;
}

// Here, not in scheduler_queue.cc, because it reads the feed, which only this file defines.
void Scheduler::PassRun::ScheduleLateArrivals() {
  if (feed_ == nullptr) return;
  const auto until = clock_.Monotonic() + options_.late_arrival_window;
  // Objects with a change left for the next pass: a later change of theirs waits too, so each
  // object's changes are still applied in order.
  std::set<std::string> deferred_pods;
  while (!commits_.Empty() && clock_.Monotonic() < until) {
    if (commits_.PopDone()) continue;
    std::vector<SharedEvent> events;
    feed_->TakeWithin(kLateArrivalPoll, &events);
    std::vector<PodView*> late;
    Dirty touched;
    for (auto& ev : events) {
      const std::string uid = ev->object.meta.uid;
      const bool new_pod = ev->object.resource == kPods && ev->type == model::EventType::kAdded &&
                           !pods_.contains(uid) && !deferred_pods.contains(uid);
      if (!new_pod) {
        if (ev->object.resource == kPods) deferred_pods.insert(uid);
        st_.deferred.push_back(std::move(ev));
        continue;
      }
      st_.Apply(ev, touched);
      auto it = pods_.find(uid);
      if (it != pods_.end() && it->second.Unbound() && ClaimsKnown(it->second)) {
        late.push_back(&it->second);
      }
    }
    st_.carried_pods.insert(touched.pods.begin(), touched.pods.end());
    st_.carried_claims.insert(touched.claims.begin(), touched.claims.end());
    for (PodView* pod : late) CreateClaimsFor(pod->obj.meta.uid, *pod);
    pending_ += late.size();
    late_ = true;
    SchedulePods(std::move(late));
    late_ = false;
  }
}

void Scheduler::PassRun::ReportUndecodable() {
  for (auto& [obj, reason] : st_.undecodable) Report(obj, reason);
  st_.undecodable.clear();
}

void Scheduler::PassRun::Report(const model::Object& obj, const std::string& reason) {
  if (!failures_.Note(obj, reason)) return;
  std::string consequence;
  if (obj.resource == kClaims) {
    consequence = !model::json::DecodeStoredAllocation(obj.body).present
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

absl::StatusOr<PassStats> Scheduler::Pass(bool read_your_writes) {
  State& st = *state_;
  const auto start = clock_.Monotonic();
  Dirty dirty;
  if (auto synced = Sync(read_your_writes, dirty); !synced.ok()) {
    st.synced = false;
    return synced;
  }
  // Now and then, look at every pod and claim (a missed consumer, an orphaned claim), and
  // evaluate every node again (a verdict that timed out, say).
  if (start - st.last_sweep >= std::chrono::seconds(10)) dirty.all = true;
  if (dirty.all) {
    st.last_sweep = start;
    st.ForgetVerdicts();
  }
  if (dirty.relevant) ++st.generation;
  // While slices or nodes stream in (a fleet joining, agents' heartbeats) and no pod waits, each
  // rebuild of the inventory and node list would start over with one more node: the loop puts the
  // next one off until kIdleSnapshotCostFactor times the last one's time, and at least
  // kIdleSnapshotInterval, has passed.
  // A pod that arrives ends the wait. What runs meanwhile (releases, evictions) sees the previous
  // snapshot, as it would have a moment earlier. RunOnce always rebuilds.
  if (!read_your_writes && (st.inventory_dirty || st.nodes_dirty) && st.inventory != nullptr) {
    const auto due =
        st.snapshot_built + std::max<std::chrono::steady_clock::duration>(
                                kIdleSnapshotCostFactor * st.snapshot_cost, kIdleSnapshotInterval);
    if (start < due && !st.AnyPending()) {
      refresh_delay_ = std::chrono::duration_cast<std::chrono::milliseconds>(due - start) +
                       std::chrono::milliseconds(1);
      return PassRun(*this, std::move(dirty)).Run();
    }
  }
  if (st.RefreshSnapshot(&programs_)) {
    st.snapshot_built = clock_.Monotonic();
    st.snapshot_cost = st.snapshot_built - start;
  }
  return PassRun(*this, std::move(dirty)).Run();
}

}  // namespace qm::service
