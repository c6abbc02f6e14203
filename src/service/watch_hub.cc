#include "service/watch_hub.h"

#include <algorithm>
#include <iterator>
#include <memory>
#include <string>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "common/status.h"
#include "spdlog/spdlog.h"

namespace qm::service {
namespace {

constexpr int64_t kBatch = 1000;
constexpr auto kIdleWait = std::chrono::milliseconds(1000);
constexpr auto kCompactEvery = std::chrono::seconds(60);
// How long the hub pauses after an exception before it starts over.
constexpr auto kRestartDelay = std::chrono::milliseconds(200);

using SharedEvent = std::shared_ptr<const model::WatchEvent>;

}  // namespace

// One subscription. The hub's lock guards the list of entries; an entry's own lock guards its
// queue and flags, and is never held while its watcher is called.
struct WatchHub::Entry {
  Entry(std::shared_ptr<Watcher> w, int64_t start, bool is_live)
      : watcher(std::move(w)),
        start_rv(start),
        synchronous(watcher->Synchronous()),
        live(is_live) {}

  const std::shared_ptr<Watcher> watcher;
  const int64_t start_rv;  // changes after this revision are for it
  const bool synchronous;  // called on the follower thread, never posted
  qm::Mutex mu;
  std::deque<SharedEvent> queue ABSL_GUARDED_BY(mu);
  int64_t tick_rv ABSL_GUARDED_BY(mu) = 0;  // > 0: a Tick is due
  std::optional<absl::Status> expire ABSL_GUARDED_BY(mu);
  // False while Subscribe still replays history: queued changes wait until it is done.
  bool live ABSL_GUARDED_BY(mu);
  bool scheduled ABSL_GUARDED_BY(mu) = false;  // a delivery thread has it (or will)
  bool done ABSL_GUARDED_BY(mu) = false;       // unsubscribed: nothing more is delivered

  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return !queue.empty() || tick_rv > 0 || expire.has_value();
  }
  // Marks the entry scheduled when it has work a delivery thread may do now; true when the
  // caller must Post it.
  bool Schedule() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (synchronous || !live || scheduled || done || !HasWork()) return false;
    scheduled = true;
    return true;
  }
  // Ends the entry with `status`: what is queued is dropped, Expire comes next.
  void EndWith(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (done || expire.has_value()) return;
    expire = status;
    queue.clear();
  }
};

namespace {

// The cache's own copy of an object, without its parsed tree (a tree is several times its
// text: the cache keeps the text only).
model::ObjectPtr Immutable(model::Object obj) {
  obj.parsed.reset();
  return model::Share(std::move(obj));
}

// The fields FieldIndex holds, by index.
struct IndexedField {
  std::string_view resource, field;
};
constexpr IndexedField kIndexedFields[] = {
    {"pods", "spec.nodeName"},
    {"resourceslices.resource.k8s.io", "spec.nodeName"},
    {"resourceslices.resource.k8s.io", "spec.pool.name"},
};

}  // namespace

int WatchHub::FieldIndex::Of(std::string_view resource, std::string_view field) {
  static_assert(std::size(kIndexedFields) == kIndexes);
  for (size_t i = 0; i < kIndexes; ++i) {
    if (kIndexedFields[i].resource == resource && kIndexedFields[i].field == field) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

void WatchHub::FieldIndex::Add(const model::ObjectPtr& obj) {
  for (size_t i = 0; i < kIndexes; ++i) {
    if (kIndexedFields[i].resource != obj->resource) continue;
    auto it = obj->fields.find(std::string(kIndexedFields[i].field));
    if (it != obj->fields.end() && !it->second.empty()) by_value_[i].emplace(it->second, obj);
  }
}

void WatchHub::FieldIndex::Remove(const model::Object& obj) {
  for (size_t i = 0; i < kIndexes; ++i) {
    if (kIndexedFields[i].resource != obj.resource) continue;
    auto field = obj.fields.find(std::string(kIndexedFields[i].field));
    if (field == obj.fields.end() || field->second.empty()) continue;
    auto [first, last] = by_value_[i].equal_range(field->second);
    for (auto it = first; it != last; ++it) {
      if (it->second.get() == &obj) {
        by_value_[i].erase(it);
        break;
      }
    }
  }
}

void WatchHub::FieldIndex::Clear() {
  for (auto& m : by_value_) m.clear();
}

size_t WatchHub::FieldIndex::Count(int of, const std::string& value) const {
  return by_value_[of].count(value);
}

std::vector<model::ObjectPtr> WatchHub::FieldIndex::With(int of, const std::string& value) const {
  std::vector<model::ObjectPtr> out;
  auto [first, last] = by_value_[of].equal_range(value);
  for (auto it = first; it != last; ++it) out.push_back(it->second);
  return out;
}

WatchHub::WatchHub(store::Store& store, WatchHubOptions options)
    : store_(store), options_(options) {}

WatchHub::~WatchHub() { Stop(); }

void WatchHub::Reload(const absl::Status& expired) {
  // The store is read without the lock: lists and subscriptions go on meanwhile, and whoever
  // subscribes before the new snapshot is installed is ended below with the others.
  auto all = store_.ListAll();
  Cache fresh;
  int64_t rv = 0;
  if (all.ok()) {
    for (auto& listed : all->items) {
      // Objects read from PostgreSQL carry no parsed tree; the in-memory store's may.
      model::ObjectPtr cached = listed->parsed ? Immutable(*listed) : std::move(listed);
      fresh.emplace(CacheKey::Of(*cached), std::move(cached));
    }
    rv = all->resource_version;
  } else {
    spdlog::warn("watch hub: cannot load the object cache ({}); lists read the store",
                 all.status().ToString());
    auto current = store_.CurrentRevision();
    rv = current.ok() ? *current : 0;
  }
  std::vector<EntryPtr> ended;
  {
    qm::MutexLock lock(&mu_);
    cache_.swap(fresh);
    field_index_.Clear();
    for (const auto& [key, obj] : cache_) field_index_.Add(obj);
    cache_ready_ = all.ok();
    last_change_.clear();
    loaded_rv_ = rv;
    last_rv_ = rv;
    queued_rv_ = rv;
    ended.swap(watchers_);
    dispatched_.SignalAll();
  }
  for (const auto& e : ended) {
    bool post = false;
    bool expire_now = false;
    {
      qm::MutexLock lock(&e->mu);
      if (e->done) continue;
      if (e->synchronous && e->live) {
        e->done = true;  // this is the follower thread: tell it now
        expire_now = true;
      } else {
        e->EndWith(expired);  // a Subscribe still replaying returns it
        post = e->Schedule();
      }
    }
    if (expire_now) {
      try {
        e->watcher->Expire(expired);
      } catch (...) {
        Unexpected("a watcher");
      }
    }
    if (post) Post(e);
  }
}

void WatchHub::Start() {
  Reload(absl::OkStatus());
  {
    qm::MutexLock lock(&run_mu_);
    delivery_stopping_ = false;
  }
  for (int i = 0; i < std::max(1, options_.delivery_threads); ++i) {
    delivery_.emplace_back([this] { DeliveryLoop(); });
  }
  running_ = true;
  thread_ = std::thread([this] { Run(); });
}

void WatchHub::Stop() {
  if (!running_.exchange(false)) return;
  if (thread_.joinable()) thread_.join();
  {
    qm::MutexLock lock(&run_mu_);
    delivery_stopping_ = true;
    runnable_.clear();
  }
  run_cv_.SignalAll();
  for (auto& t : delivery_) t.join();
  delivery_.clear();
  qm::MutexLock lock(&mu_);
  watchers_.clear();
  cache_ready_ = false;
  dispatched_.SignalAll();
}

size_t WatchHub::watcher_count() {
  qm::MutexLock lock(&mu_);
  return watchers_.size();
}

absl::Status WatchHub::Subscribe(std::shared_ptr<Watcher> watcher, int64_t from_rv) {
  EntryPtr entry;
  int64_t dispatched;
  {
    // Registered at once: changes dispatched from now on (after `dispatched`) are queued for
    // it, and held back until the history before them has been replayed.
    qm::MutexLock lock(&mu_);
    dispatched = queued_rv_;
    entry = std::make_shared<Entry>(watcher, std::max(from_rv, dispatched), from_rv >= dispatched);
    watchers_.push_back(entry);
  }
  if (from_rv >= dispatched) return absl::OkStatus();

  // The history (from_rv, dispatched] comes from the store, read and delivered without any of
  // the hub's locks: other watches, lists and the follower carry on meanwhile.
  bool went_live = false;
  absl::Cleanup unsubscribe = [&] {
    if (went_live) return;
    {
      qm::MutexLock lock(&entry->mu);
      entry->done = true;
      entry->queue.clear();
    }
    Unsubscribe(entry.get());
  };
  int64_t cursor = from_rv;
  while (cursor < dispatched) {
    {
      qm::MutexLock lock(&entry->mu);
      if (entry->expire.has_value()) return *entry->expire;
    }
    auto events = store_.ChangesSince(cursor, kBatch);
    if (!events.ok()) return events.status();
    if (events->empty()) break;
    for (const auto& ev : *events) {
      if (ev.object.meta.resource_version > dispatched) {
        cursor = dispatched;
        break;
      }
      if (!watcher->Deliver(ev)) return absl::OkStatus();
      cursor = ev.object.meta.resource_version;
    }
  }
  // Changes dispatched meanwhile were queued for it: deliver them here too, until none is left
  // and it goes live (from then on the hub's threads call it).
  bool post = false;
  for (;;) {
    std::deque<SharedEvent> pending;
    {
      qm::MutexLock lock(&entry->mu);
      if (entry->expire.has_value()) return *entry->expire;
      if (entry->queue.empty()) {
        entry->live = true;
        post = entry->Schedule();
        break;
      }
      pending.swap(entry->queue);
    }
    for (const auto& ev : pending) {
      if (!watcher->DeliverShared(ev)) return absl::OkStatus();
    }
  }
  went_live = true;
  if (post) Post(entry);
  return absl::OkStatus();
}

model::ObjectPtr WatchHub::Find(const model::ResourceKey& key) {
  qm::MutexLock lock(&mu_);
  if (!cache_ready_) return nullptr;
  auto it = cache_.find(key);
  if (it == cache_.end()) return nullptr;
  return it->second;
}

absl::StatusOr<model::ObjectPtr> WatchHub::FindCurrent(const model::ResourceKey& key,
                                                       int64_t min_rv,
                                                       std::chrono::milliseconds wait) {
  qm::MutexLock lock(&mu_);
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (last_rv_.load() < min_rv && cache_ready_ && dispatched_.WaitUntil(&mu_, deadline)) {
  }
  if (!cache_ready_ || last_rv_.load() < min_rv) {
    return absl::UnavailableError("object cache is behind the store");
  }
  auto it = cache_.find(key);
  if (it == cache_.end()) return model::ObjectPtr();
  return it->second;
}

std::optional<int64_t> WatchHub::ResourceVersionOf(const model::ResourceKey& key) {
  qm::MutexLock lock(&mu_);
  if (!cache_ready_) return std::nullopt;
  auto it = cache_.find(key);
  if (it == cache_.end()) return std::nullopt;
  return it->second->meta.resource_version;
}

absl::Status WatchHub::AwaitLocked(int64_t min_rv) {
  if (!cache_ready_) return absl::FailedPreconditionError("no object cache");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (last_rv_.load() < min_rv && cache_ready_ && dispatched_.WaitUntil(&mu_, deadline)) {
  }
  if (last_rv_.load() < min_rv || !cache_ready_) {
    return absl::DeadlineExceededError("object cache is behind the store");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> WatchHub::LastChanges(
    const std::vector<std::string>& resources, int64_t min_rv) {
  qm::MutexLock lock(&mu_);
  QM_RETURN_IF_ERROR(AwaitLocked(min_rv));
  std::vector<int64_t> out;
  out.reserve(resources.size());
  for (const auto& r : resources) {
    auto it = last_change_.find(r);
    out.push_back(it == last_change_.end() ? loaded_rv_ : it->second);
  }
  return out;
}

absl::StatusOr<std::vector<std::pair<model::ResourceKey, int64_t>>> WatchHub::Versions(
    const std::string& resource, int64_t min_rv) {
  qm::MutexLock lock(&mu_);
  QM_RETURN_IF_ERROR(AwaitLocked(min_rv));
  std::vector<std::pair<model::ResourceKey, int64_t>> out;
  for (auto it = cache_.lower_bound(model::ResourceKey{resource, "", ""});
       it != cache_.end() && it->first.resource == resource; ++it) {
    out.emplace_back(it->second->Key(), it->second->meta.resource_version);
  }
  return out;
}

std::optional<store::ListResult> WatchHub::ListByFieldLocked(const ListRequest& request) {
  const store::ListOptions& o = request.store;
  // Of the requirements an index serves, the one with the fewest objects.
  int best = -1;
  const std::string* value = nullptr;
  size_t fewest = 0;
  for (const auto& r : request.fields.requirements()) {
    if (!r.equals || r.value.empty()) continue;
    const int of = FieldIndex::Of(o.resource, r.field);
    if (of < 0) continue;
    const size_t n = field_index_.Count(of, r.value);
    if (best < 0 || n < fewest) {
      best = of;
      value = &r.value;
      fewest = n;
    }
  }
  if (best < 0) return std::nullopt;
  std::vector<model::ObjectPtr> on = field_index_.With(best, *value);
  auto key = [](const model::ObjectPtr& p) { return std::tie(p->meta.namespace_, p->meta.name); };
  std::sort(on.begin(), on.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });
  store::ListResult result;
  result.resource_version = last_rv_.load();
  const auto after = std::tie(o.after_namespace, o.after_name);
  for (auto& obj : on) {
    // Past the continue point, as the scan below goes.
    if (!o.after_name.empty() ? !(key(obj) > after)
                              : !o.after_namespace.empty() && key(obj) < after) {
      continue;
    }
    if (!request.Matches(*obj)) continue;
    if (o.limit > 0 && static_cast<int64_t>(result.items.size()) == o.limit) {
      result.more = true;
      break;
    }
    result.items.push_back(std::move(obj));
  }
  return result;
}

absl::StatusOr<store::ListResult> WatchHub::List(const ListRequest& request, int64_t min_rv) {
  qm::MutexLock lock(&mu_);
  QM_RETURN_IF_ERROR(AwaitLocked(min_rv));
  if (auto indexed = ListByFieldLocked(request)) return *std::move(indexed);
  store::ListResult result;
  result.resource_version = last_rv_.load();
  const store::ListOptions& o = request.store;
  auto it = cache_.lower_bound(model::ResourceKey{o.resource, o.after_namespace, o.after_name});
  for (; it != cache_.end() && it->first.resource == o.resource; ++it) {
    if (!o.after_name.empty() && it->first.namespace_ == o.after_namespace &&
        it->first.name == o.after_name) {
      continue;
    }
    if (!request.Matches(*it->second)) continue;
    if (o.limit > 0 && static_cast<int64_t>(result.items.size()) == o.limit) {
      result.more = true;
      break;
    }
    result.items.push_back(it->second);
  }
  return result;
}

void WatchHub::Dispatch(std::vector<model::WatchEvent> events) {
  if (events.empty()) return;
  const int64_t newest = events.back().object.meta.resource_version;
  std::vector<EntryPtr> entries;
  {
    // Every entry registered after this starts after these changes.
    qm::MutexLock lock(&mu_);
    entries = watchers_;
    queued_rv_ = newest;
    const bool previous_wanted = std::any_of(
        entries.begin(), entries.end(), [](const auto& e) { return e->watcher->WantsPrevious(); });
    if (previous_wanted) AttachPreviousLocked(events);
  }
  std::vector<SharedEvent> shared;
  shared.reserve(events.size());
  for (auto& ev : events)
    shared.push_back(std::make_shared<const model::WatchEvent>(std::move(ev)));
  for (const auto& e : entries) {
    bool post = false;
    bool deliver_now = false;
    {
      qm::MutexLock lock(&e->mu);
      if (e->done || e->expire.has_value()) continue;
      if (e->synchronous && e->live) {
        deliver_now = true;
      } else {
        for (const auto& ev : shared) {
          if (ev->object.meta.resource_version <= e->start_rv) continue;
          if (e->queue.size() >= options_.max_queued_per_watcher) {
            e->EndWith(absl::OutOfRangeError(
                "the watch fell too far behind the changes; list again and start a new watch"));
            break;
          }
          e->queue.push_back(ev);
        }
        post = e->Schedule();
      }
    }
    if (deliver_now) {
      CallSynchronous(e, [&](Watcher& w) {
        for (const auto& ev : shared) {
          if (ev->object.meta.resource_version > e->start_rv && !w.DeliverShared(ev)) return false;
        }
        return true;
      });
    }
    if (post) Post(e);
  }
  // The cache's copies, made before the lock is taken.
  std::vector<model::ObjectPtr> copies;
  copies.reserve(shared.size());
  for (const auto& ev : shared) {
    copies.push_back(ev->type == model::EventType::kDeleted ? nullptr : Immutable(ev->object));
  }
  // Only now do lists see the changes (synchronous watchers have them already).
  qm::MutexLock lock(&mu_);
  for (size_t i = 0; i < shared.size(); ++i) {
    const auto& ev = shared[i];
    auto it = cache_.find(CacheKey::Of(ev->object));
    if (it != cache_.end()) field_index_.Remove(*it->second);
    if (ev->type == model::EventType::kDeleted) {
      if (it != cache_.end()) cache_.erase(it);
    } else if (it == cache_.end()) {
      field_index_.Add(copies[i]);
      cache_.emplace(CacheKey::Of(*copies[i]), std::move(copies[i]));
    } else {
      // The key views the object it holds: both are replaced together.
      field_index_.Add(copies[i]);
      auto next = std::next(it);
      auto node = cache_.extract(it);
      node.key() = CacheKey::Of(*copies[i]);
      node.mapped() = std::move(copies[i]);
      cache_.insert(next, std::move(node));
    }
    const std::string& resource = ev->object.resource;
    if (auto it = last_change_.find(resource); it != last_change_.end()) {
      it->second = ev->object.meta.resource_version;
    } else {
      last_change_.emplace(resource, ev->object.meta.resource_version);
    }
  }
  last_rv_ = newest;
  dispatched_.SignalAll();
}

void WatchHub::AttachPreviousLocked(std::vector<model::WatchEvent>& events) {
  // An object changed twice in one batch had, before its second change, the first's state.
  std::map<model::ResourceKey, const model::Object*> in_batch;
  for (auto& ev : events) {
    model::ResourceKey key = ev.object.Key();
    if (ev.type == model::EventType::kModified) {
      if (auto b = in_batch.find(key); b != in_batch.end()) {
        ev.previous = Immutable(*b->second);
      } else if (auto c = cache_.find(key); c != cache_.end()) {
        ev.previous = c->second;  // shared, not copied
      }
    }
    in_batch[std::move(key)] = &ev.object;
  }
}

template <typename Call>
void WatchHub::CallSynchronous(const EntryPtr& entry, Call call) {
  bool keep = true;
  try {
    keep = call(*entry->watcher);
  } catch (...) {
    // A watcher that throws ends its own watch, no other.
    Unexpected("a watcher");
    try {
      entry->watcher->Expire(absl::OutOfRangeError("the watch failed; list again"));
    } catch (...) {
    }
    keep = false;
  }
  if (keep) return;
  {
    qm::MutexLock lock(&entry->mu);
    entry->done = true;
    entry->queue.clear();
  }
  Unsubscribe(entry.get());
}

void WatchHub::TickAll() {
  std::vector<EntryPtr> entries;
  {
    qm::MutexLock lock(&mu_);
    entries = watchers_;
  }
  const int64_t rv = last_rv_.load();
  for (const auto& e : entries) {
    bool post = false;
    bool tick_now = false;
    {
      qm::MutexLock lock(&e->mu);
      if (e->done) continue;
      if (e->synchronous) {
        tick_now = e->live;
      } else {
        e->tick_rv = std::max(e->tick_rv, rv);
        post = e->Schedule();
      }
    }
    if (tick_now) CallSynchronous(e, [&](Watcher& w) { return w.Tick(rv); });
    if (post) Post(e);
  }
}

void WatchHub::Post(EntryPtr entry) {
  {
    qm::MutexLock lock(&run_mu_);
    if (delivery_stopping_) return;
    runnable_.push_back(std::move(entry));
  }
  run_cv_.Signal();
}

void WatchHub::DeliveryLoop() {
  for (;;) {
    EntryPtr entry;
    {
      qm::MutexLock lock(&run_mu_);
      while (!delivery_stopping_ && runnable_.empty()) run_cv_.Wait(&run_mu_);
      if (delivery_stopping_) return;
      entry = std::move(runnable_.front());
      runnable_.pop_front();
    }
    // One round per turn, then to the back of the line: a busy watcher shares the threads.
    if (!Drain(entry)) Post(std::move(entry));
  }
}

bool WatchHub::Drain(const EntryPtr& entry) {
  std::deque<SharedEvent> events;
  int64_t tick = 0;
  std::optional<absl::Status> expire;
  {
    qm::MutexLock lock(&entry->mu);
    if (entry->done) {
      entry->scheduled = false;
      return true;
    }
    events.swap(entry->queue);
    tick = std::exchange(entry->tick_rv, 0);
    expire = entry->expire;
  }
  bool keep = true;
  try {
    for (const auto& ev : events) {
      if (!entry->watcher->DeliverShared(ev)) {
        keep = false;
        break;
      }
    }
    if (keep && expire.has_value()) {
      entry->watcher->Expire(*expire);
      keep = false;
    } else if (keep && tick > 0 && !entry->watcher->Tick(tick)) {
      keep = false;
    }
  } catch (...) {
    // A watcher that throws ends its own watch, no other.
    Unexpected("a watcher");
    try {
      entry->watcher->Expire(absl::OutOfRangeError("the watch failed; list again"));
    } catch (...) {
    }
    keep = false;
  }
  {
    qm::MutexLock lock(&entry->mu);
    if (keep) {
      if (entry->HasWork()) return false;  // still scheduled
      entry->scheduled = false;
      return true;
    }
    entry->done = true;
    entry->scheduled = false;
    entry->queue.clear();
  }
  // Unsubscribe takes the hub's lock: never with an entry's lock held.
  Unsubscribe(entry.get());
  return true;
}

void WatchHub::Unsubscribe(const Entry* entry) {
  qm::MutexLock lock(&mu_);
  std::erase_if(watchers_, [&](const EntryPtr& e) { return e.get() == entry; });
}

void WatchHub::Unexpected(const char* where) {
  unexpected_errors_.fetch_add(1);
  try {
    throw;
  } catch (const std::exception& e) {
    spdlog::error("watch hub: {} failed: {}", where, e.what());
  } catch (...) {
    spdlog::error("watch hub: {} failed with an exception of unknown type", where);
  }
}

void WatchHub::Run() {
  bool restart = false;
  while (running_) {
    bool failed = false;
    try {
      if (restart) {
        Reload(
            absl::OutOfRangeError("the watch hub restarted after an internal error; list "
                                  "again"));
      }
      restart = false;
      Follow();
    } catch (...) {
      // Nothing the follower meets (a store that throws, memory running out) may end the
      // process. Where it stopped dispatching is not known for sure, so every watch ends with
      // 410 (clients list again) and the cache is reloaded, after a short pause.
      Unexpected("following the change log");
      failed = true;
    }
    if (!failed) continue;
    restart = true;
    std::this_thread::sleep_for(kRestartDelay);
  }
}

void WatchHub::Follow() {
  auto last_compact = std::chrono::steady_clock::now();
  auto last_tick = std::chrono::steady_clock::now();
  while (running_) {
    auto events = store_.FollowChanges(last_rv_.load(), kBatch);
    if (absl::IsOutOfRange(events.status())) {
      // Compaction overtook us: end every watch with 410 and continue from the present.
      spdlog::warn("watch hub: fell behind the change log ({}); expiring {} watches",
                   events.status().ToString(), watcher_count());
      Reload(events.status());
      continue;
    }
    if (!events.ok()) {
      spdlog::warn("watch hub: reading the change log failed: {}", events.status().ToString());
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    const bool idle = events->empty();
    // A full batch may have left changes behind: read on without waiting or ticking.
    const bool more = events->size() >= static_cast<size_t>(kBatch);
    if (!idle) Dispatch(std::move(*events));
    auto now = std::chrono::steady_clock::now();
    if (!more || now - last_tick >= kIdleWait) {
      TickAll();
      last_tick = now;
    }
    if (now - last_compact >= kCompactEvery) {
      last_compact = now;
      int64_t through = last_rv_.load() - options_.history;
      if (through > 0) {
        if (auto st = store_.Compact(through); !st.ok()) {
          spdlog::warn("watch hub: compaction failed: {}", st.ToString());
        }
      }
    }
    // Until a change after the last one dispatched may exist: the store knows of one at once
    // when this process committed it or a notification named it, which spares the read that
    // would find nothing.
    if (!more) store_.WaitForChanges(last_rv_.load(), kIdleWait);
  }
}

}  // namespace qm::service
