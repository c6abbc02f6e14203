#include "api/grpc/assignments.h"

#include <algorithm>
#include <atomic>

#include "model/json/document.h"
#include "model/json/read.h"
#include "spdlog/spdlog.h"

namespace qm::api::nodeapi {
namespace {

constexpr char kClaims[] = "resourceclaims.resource.k8s.io";

bool Names(const v1::WatchAssignmentsResponse& msg, const std::string& uid) {
  for (const auto& a : msg.prepare()) {
    if (a.claim().uid() == uid) return true;
  }
  for (const auto& c : msg.unprepare()) {
    if (c.uid() == uid) return true;
  }
  return false;
}

}  // namespace

// ---- AssignmentFeed ------------------------------------------------------------------------

AssignmentFeed::AssignmentFeed(AssignmentRouter* router, std::string node,
                               std::vector<std::string> drivers)
    : router_(router),
      node_(std::move(node)),
      drivers_(std::move(drivers)),
      last_sent_(std::chrono::steady_clock::now()) {}

AssignmentFeed::~AssignmentFeed() = default;

void AssignmentFeed::SetNotify(std::function<void()> notify) {
  qm::MutexLock lock(&mu_);
  if (!closed_) notify_ = std::move(notify);
}

bool AssignmentFeed::Pop(v1::WatchAssignmentsResponse* out) {
  qm::MutexLock lock(&mu_);
  if (queue_.empty()) return false;
  *out = std::move(queue_.front());
  queue_.pop_front();
  if (queue_.empty()) tail_open_ = false;
  last_sent_ = std::chrono::steady_clock::now();
  last_rv_ = std::max(last_rv_, out->resource_version());
  return true;
}

std::optional<absl::Status> AssignmentFeed::Ended() {
  qm::MutexLock lock(&mu_);
  return ended_;
}

void AssignmentFeed::Close() {
  {
    qm::MutexLock lock(&mu_);
    if (closed_) return;
    closed_ = true;
    notify_ = nullptr;
  }
  router_->Remove(this);
}

void AssignmentFeed::Notify() {
  std::function<void()> notify;
  {
    qm::MutexLock lock(&mu_);
    notify = notify_;
  }
  if (notify) notify();
}

v1::WatchAssignmentsResponse& AssignmentFeed::TailFor(const std::string& uid, int64_t rv) {
  if (!tail_open_ || queue_.empty() || Names(queue_.back(), uid)) {
    queue_.emplace_back();
    tail_open_ = true;
  }
  v1::WatchAssignmentsResponse& msg = queue_.back();
  msg.set_resource_version(std::max(msg.resource_version(), rv));
  return msg;
}

void AssignmentFeed::OfferLocked(const v1::Assignment* full, const v1::ClaimRef& claim,
                                 int64_t rv) {
  qm::MutexLock lock(&mu_);
  if (ended_.has_value() || closed_) return;
  std::optional<v1::Assignment> mine;
  if (full != nullptr) mine = ForDrivers(*full, drivers_);
  auto held = held_.find(claim.uid());
  if (mine.has_value()) {
    if (held != held_.end() && held->second.allocation_id == mine->allocation_id()) return;
    v1::WatchAssignmentsResponse& msg = TailFor(claim.uid(), rv);
    // Held for an earlier allocation: undo that first (a message's unprepares come first).
    if (held != held_.end()) *msg.add_unprepare() = held->second.claim;
    held_[claim.uid()] = Held{mine->claim(), mine->allocation_id()};
    *msg.add_prepare() = std::move(*mine);
  } else {
    if (held == held_.end()) return;
    *TailFor(claim.uid(), rv).add_unprepare() = held->second.claim;
    held_.erase(held);
  }
  if (queue_.size() > router_->options_.max_queued) {
    queue_.clear();
    ended_ = absl::AbortedError("the agent fell too far behind its assignments; reconnect");
  }
}

std::optional<AssignmentFeed::BookmarkCheck> AssignmentFeed::Bookmark(
    int64_t rv, std::chrono::steady_clock::time_point now) {
  qm::MutexLock lock(&mu_);
  if (ended_.has_value() || closed_) return std::nullopt;
  const auto interval = router_->options_.bookmark_interval;
  if (now - last_sent_ < interval) return BookmarkCheck{false, last_sent_ + interval};
  // Something unsent is queued (it carries a revision), or nothing newer happened.
  if (!queue_.empty() || rv <= last_rv_) return BookmarkCheck{false, now + interval};
  queue_.emplace_back().set_resource_version(rv);
  tail_open_ = true;
  return BookmarkCheck{true, now + interval};
}

void AssignmentFeed::EndLocked(absl::Status status) {
  qm::MutexLock lock(&mu_);
  if (!ended_.has_value()) ended_ = std::move(status);
}

// ---- AssignmentRouter ----------------------------------------------------------------------

// The router's subscription to the hub. Stop() detaches it, after which no call reaches the
// router (the hub drops the subscription at its next call).
class AssignmentRouter::HubWatcher final : public service::Watcher {
 public:
  explicit HubWatcher(AssignmentRouter* router) : router_(router) {}
  bool Deliver(const model::WatchEvent& event) override {
    qm::MutexLock lock(&mu_);
    if (router_ == nullptr) return false;
    router_->OnEvent(event);
    return true;
  }
  bool Tick(int64_t rv) override {
    qm::MutexLock lock(&mu_);
    if (router_ == nullptr) return false;
    router_->OnTick(rv);
    return true;
  }
  void Expire(const absl::Status& status) override {
    qm::MutexLock lock(&mu_);
    if (router_ == nullptr) return;
    spdlog::warn("node-agent assignments: the change feed ended ({}); reloading",
                 std::string(status.message()));
    router_->OnExpired();
    router_ = nullptr;
  }
  void Detach() {
    qm::MutexLock lock(&mu_);
    router_ = nullptr;
  }

 private:
  qm::Mutex mu_;
  AssignmentRouter* router_ ABSL_GUARDED_BY(mu_);
};

AssignmentRouter::AssignmentRouter(service::ObjectService& objects, service::WatchHub& hub,
                                   AssignmentRouterOptions options)
    : objects_(objects), hub_(hub), options_(options) {}

AssignmentRouter::~AssignmentRouter() { Stop(); }

absl::Status AssignmentRouter::Start() {
  if (auto st = Load(); !st.ok()) return st;
  reload_thread_ = std::thread([this] { ReloadLoop(); });
  bookmark_thread_ = std::thread([this] { BookmarkLoop(); });
  return absl::OkStatus();
}

void AssignmentRouter::Stop() {
  std::vector<std::shared_ptr<AssignmentFeed>> touched;
  std::shared_ptr<HubWatcher> watcher;
  {
    qm::MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& [node, feed] : feeds_) {
      feed->EndLocked(absl::UnavailableError("the server is shutting down"));
      touched.push_back(feed);
    }
    watcher = std::move(watcher_);
  }
  changed_.SignalAll();
  reload_wanted_.SignalAll();
  bookmark_wanted_.SignalAll();
  if (watcher) watcher->Detach();
  for (auto& f : touched) f->Notify();
  if (reload_thread_.joinable()) reload_thread_.join();
  if (bookmark_thread_.joinable()) bookmark_thread_.join();
}

absl::Status AssignmentRouter::Load() {
  {
    std::shared_ptr<HubWatcher> old;
    {
      qm::MutexLock lock(&mu_);
      old = std::move(watcher_);
    }
    if (old) old->Detach();
  }
  service::ListRequest request;
  request.store.resource = kClaims;
  auto list = objects_.List(request);
  if (!list.ok()) return list.status();
  std::vector<std::shared_ptr<AssignmentFeed>> touched;
  auto watcher = std::make_shared<HubWatcher>(this);
  {
    qm::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("stopping");
    const int64_t rv = list->resource_version;
    std::set<std::string> listed;
    for (const auto& listed_obj : list->items) {
      const model::Object& obj = *listed_obj;
      listed.insert(obj.meta.uid);
      std::optional<ClaimAssignment> assignment;
      if (MayHaveAssignment(obj.body)) {
        auto body = model::json::Read(obj.body);
        if (body.is_discarded()) continue;  // keeps whatever the index had for it
        assignment = AssignmentOf(obj.meta.namespace_, obj.meta.name, obj.meta.uid, body);
      }
      v1::ClaimRef ref;
      ref.set_namespace_(obj.meta.namespace_);
      ref.set_name(obj.meta.name);
      ref.set_uid(obj.meta.uid);
      ApplyLocked(obj.meta.uid, ref, std::move(assignment), rv, &touched);
    }
    std::vector<std::pair<std::string, v1::ClaimRef>> gone;
    for (const auto& [uid, entry] : claims_) {
      if (!listed.contains(uid)) gone.emplace_back(uid, entry.assignment.claim());
    }
    for (const auto& [uid, ref] : gone) ApplyLocked(uid, ref, std::nullopt, rv, &touched);
    rv_ = std::max(rv_, rv);
    ready_ = true;
    watcher_ = watcher;
  }
  changed_.SignalAll();
  for (auto& f : touched) f->Notify();
  absl::Status st = hub_.Subscribe(watcher, list->resource_version);
  if (!st.ok()) {
    watcher->Detach();
    return st;
  }
  return absl::OkStatus();
}

void AssignmentRouter::ApplyLocked(const std::string& uid, const v1::ClaimRef& claim,
                                   std::optional<ClaimAssignment> next, int64_t rv,
                                   std::vector<std::shared_ptr<AssignmentFeed>>* touched) {
  auto it = claims_.find(uid);
  if (it != claims_.end() && next.has_value() && it->second.node == next->node &&
      it->second.assignment.allocation_id() == next->assignment.allocation_id()) {
    it->second.assignment = std::move(next->assignment);  // consumers may have changed
    return;
  }
  if (it != claims_.end()) {
    const std::string node = it->second.node;
    const v1::ClaimRef ref = it->second.assignment.claim();
    claims_.erase(it);
    auto n = by_node_.find(node);
    if (n != by_node_.end()) {
      n->second.erase(uid);
      if (n->second.empty()) by_node_.erase(n);
    }
    OfferLocked(node, nullptr, ref, rv, touched);
  }
  if (next.has_value()) {
    Entry& e = claims_[uid];
    e.node = next->node;
    e.assignment = std::move(next->assignment);
    by_node_[e.node].insert(uid);
    OfferLocked(e.node, &e.assignment, claim, rv, touched);
  }
}

void AssignmentRouter::OfferLocked(const std::string& node, const v1::Assignment* assignment,
                                   const v1::ClaimRef& claim, int64_t rv,
                                   std::vector<std::shared_ptr<AssignmentFeed>>* touched) {
  auto [first, last] = feeds_.equal_range(node);
  for (auto f = first; f != last; ++f) {
    f->second->OfferLocked(assignment, claim, rv);
    touched->push_back(f->second);
  }
}

void AssignmentRouter::OnEvent(const model::WatchEvent& event) {
  const model::Object& obj = event.object;
  std::vector<std::shared_ptr<AssignmentFeed>> touched;
  bool wake = false;  // an Open waits for the revision to move
  if (obj.resource == kClaims) {
    std::optional<ClaimAssignment> next;
    bool refreshed = false;  // the index's assignment stands; its consumers were updated
    if (event.type != model::EventType::kDeleted && MayHaveAssignment(obj.body)) {
      // The tree the writer kept (the scheduler's bindings keep theirs), else the text parsed.
      nlohmann::json parsed;
      const nlohmann::json* body = nullptr;
      if (const model::json::SharedDocument* kept = model::json::ParsedBody(obj)) {
        body = &(*kept)->value();
      } else {
        parsed = model::json::Read(obj.body);
        // A body that does not decode changes nothing: the devices stay prepared, as the
        // scheduler keeps them allocated (decode_failures.h).
        if (parsed.is_discarded()) return;
        body = &parsed;
      }
      // The allocation the index holds (an agent's report, a consumer added or gone): only its
      // consumers may have changed, and nothing is offered, as ApplyLocked does for an equal
      // assignment; the devices and configs are not decoded again.
      if (auto id = AssignmentAllocationId(obj.meta.uid, *body); id.has_value()) {
        qm::MutexLock lock(&mu_);
        auto it = claims_.find(obj.meta.uid);
        if (it != claims_.end() && it->second.assignment.allocation_id() == *id) {
          SetConsumers(*body, it->second.assignment);
          rv_ = std::max(rv_, obj.meta.resource_version);
          wake = open_waiters_ > 0;
          refreshed = true;
        }
      }
      if (!refreshed) next = AssignmentOf(obj.meta.namespace_, obj.meta.name, obj.meta.uid, *body);
    }
    if (!refreshed) {
      v1::ClaimRef ref;
      ref.set_namespace_(obj.meta.namespace_);
      ref.set_name(obj.meta.name);
      ref.set_uid(obj.meta.uid);
      qm::MutexLock lock(&mu_);
      ApplyLocked(obj.meta.uid, ref, std::move(next), obj.meta.resource_version, &touched);
      rv_ = std::max(rv_, obj.meta.resource_version);
      wake = open_waiters_ > 0;
    }
  } else {
    qm::MutexLock lock(&mu_);
    rv_ = std::max(rv_, obj.meta.resource_version);
    wake = open_waiters_ > 0;
  }
  if (wake) changed_.SignalAll();
  for (auto& f : touched) f->Notify();
}

void AssignmentRouter::OnTick(int64_t rv) {
  bool wake = false;
  {
    qm::MutexLock lock(&mu_);
    rv_ = std::max(rv_, rv);
    wake = open_waiters_ > 0;
  }
  if (wake) changed_.SignalAll();
}

void AssignmentRouter::BookmarkLoop() {
  // Passes come at most this often, each taking every feed then due: thousands of feeds fall
  // due at scattered times, and a wake-up for each was a context switch per bookmark.
  const auto pass_interval = std::min<std::chrono::steady_clock::duration>(
      options_.bookmark_interval / 10, std::chrono::milliseconds(250));
  auto next_pass = std::chrono::steady_clock::now();
  qm::MutexLock lock(&mu_);
  while (!stopping_) {
    const auto now = std::chrono::steady_clock::now();
    if (bookmarks_.empty()) {
      bookmark_wanted_.Wait(&mu_);
      continue;
    }
    if (bookmarks_.top().due > now || next_pass > now) {
      bookmark_wanted_.WaitUntil(&mu_, std::max(bookmarks_.top().due, next_pass));
      continue;
    }
    next_pass = now + pass_interval;
    std::vector<BookmarkDue> due;
    while (!bookmarks_.empty() && bookmarks_.top().due <= now) {
      due.push_back(bookmarks_.top());
      bookmarks_.pop();
    }
    // Every change up to rv_ has been offered to the feeds (OnEvent moves rv_ after applying).
    const int64_t rv = rv_;
    mu_.Unlock();
    for (auto& d : due) {
      std::shared_ptr<AssignmentFeed> feed = d.feed.lock();
      std::optional<AssignmentFeed::BookmarkCheck> check;
      if (feed != nullptr) check = feed->Bookmark(rv, now);
      if (!check.has_value()) {
        d.feed.reset();  // closed or ended: out of the schedule
        continue;
      }
      if (check->queued) feed->Notify();
      d.due = check->next;
    }
    mu_.Lock();
    for (auto& d : due) {
      if (!d.feed.expired()) bookmarks_.push(std::move(d));
    }
  }
}

void AssignmentRouter::OnExpired() {
  {
    qm::MutexLock lock(&mu_);
    reload_ = true;
  }
  reload_wanted_.SignalAll();
}

void AssignmentRouter::ReloadLoop() {
  qm::MutexLock lock(&mu_);
  while (!stopping_) {
    while (!stopping_ && !reload_) reload_wanted_.Wait(&mu_);
    if (stopping_) return;
    reload_ = false;
    mu_.Unlock();
    absl::Status st = Load();
    mu_.Lock();
    if (!st.ok() && !stopping_) {
      spdlog::warn("node-agent assignments: reload failed ({}); retrying",
                   std::string(st.message()));
      reload_ = true;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      while (!stopping_ && reload_wanted_.WaitUntil(&mu_, deadline)) {
      }
    }
  }
}

absl::StatusOr<std::shared_ptr<AssignmentFeed>> AssignmentRouter::Open(
    const std::string& node, const std::vector<std::string>& drivers,
    const std::vector<v1::PreparedRef>& prepared, int64_t min_rv) {
  qm::MutexLock lock(&mu_);
  const auto deadline = std::chrono::steady_clock::now() + options_.catch_up_timeout;
  ++open_waiters_;
  while (!stopping_ && !(ready_ && rv_ >= min_rv) && changed_.WaitUntil(&mu_, deadline)) {
  }
  --open_waiters_;
  if (stopping_) return absl::UnavailableError("the server is shutting down");
  if (!ready_ || rv_ < min_rv) {
    return absl::UnavailableError("this server has not caught up with resource version " +
                                  std::to_string(min_rv) + " yet (it is at " + std::to_string(rv_) +
                                  "); retry");
  }
  auto feed = std::make_shared<AssignmentFeed>(this, node, drivers);
  {
    qm::MutexLock feed_lock(&feed->mu_);
    std::map<std::string, v1::Assignment> desired;
    if (auto n = by_node_.find(node); n != by_node_.end()) {
      for (const auto& uid : n->second) {
        if (auto mine = ForDrivers(claims_.at(uid).assignment, drivers)) desired[uid] = *mine;
      }
    }
    v1::WatchAssignmentsResponse first;
    first.set_resource_version(rv_);
    for (const auto& p : prepared) {
      if (p.claim().uid().empty()) continue;
      auto d = desired.find(p.claim().uid());
      if (d != desired.end() && d->second.allocation_id() == p.allocation_id()) {
        feed->held_[p.claim().uid()] = AssignmentFeed::Held{p.claim(), p.allocation_id()};
      } else {
        *first.add_unprepare() = p.claim();
      }
    }
    for (auto& [uid, a] : desired) {
      if (feed->held_.contains(uid)) continue;
      feed->held_[uid] = AssignmentFeed::Held{a.claim(), a.allocation_id()};
      *first.add_prepare() = std::move(a);
    }
    feed->queue_.push_back(std::move(first));
    feed->tail_open_ = true;
  }
  feeds_.emplace(node, feed);
  bookmarks_.push(BookmarkDue{std::chrono::steady_clock::now() + options_.bookmark_interval, feed});
  bookmark_wanted_.Signal();
  return feed;
}

void AssignmentRouter::Remove(AssignmentFeed* feed) {
  qm::MutexLock lock(&mu_);
  auto [first, last] = feeds_.equal_range(feed->node());
  for (auto it = first; it != last; ++it) {
    if (it->second.get() == feed) {
      feeds_.erase(it);
      return;
    }
  }
}

std::optional<v1::Assignment> AssignmentRouter::Find(const std::string& node,
                                                     const std::string& uid) {
  qm::MutexLock lock(&mu_);
  auto it = claims_.find(uid);
  if (it == claims_.end() || it->second.node != node) return std::nullopt;
  return it->second.assignment;
}

int64_t AssignmentRouter::revision() {
  qm::MutexLock lock(&mu_);
  return rv_;
}

size_t AssignmentRouter::feed_count() {
  qm::MutexLock lock(&mu_);
  return feeds_.size();
}

}  // namespace qm::api::nodeapi
