#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "common/mutex.h"
#include "model/object.h"
#include "service/list_request.h"
#include "store/store.h"

namespace qm::service {

// A consumer of the change feed (one watch request). Its methods are never called concurrently:
// by the thread calling Subscribe while it replays history, then by the hub's threads, one at a
// time.
class Watcher {
 public:
  virtual ~Watcher() = default;
  // A synchronous watcher is called on the hub's follower thread, before a change becomes
  // visible in the cache: once a List with min_rv R returns, it has been given every change up
  // to R. Only for in-process consumers whose calls are cheap and never block (an index kept in
  // memory); one that is slow delays every watch. Others are called from the hub's delivery
  // threads, shortly after the cache shows the change.
  virtual bool Synchronous() const { return false; }
  // Whether this watcher wants WatchEvent::previous on changes the hub follows live (a watch
  // with a label or field selector). Fixed for the watcher's life.
  virtual bool WantsPrevious() const { return false; }
  // Delivers one change. Return false to be unsubscribed (client gone, timeout reached).
  virtual bool Deliver(const model::WatchEvent& event) = 0;
  // The same, with the hub's shared, immutable copy of the change: a watcher that keeps the
  // change for later keeps that instead of a copy. Changes replayed from the store's log come
  // through Deliver.
  virtual bool DeliverShared(const std::shared_ptr<const model::WatchEvent>& event) {
    return Deliver(*event);
  }
  // Called at least once a second when idle; `rv` is the newest revision dispatched, for
  // bookmarks. Return false to be unsubscribed.
  virtual bool Tick(int64_t rv) = 0;
  // The hub cannot go on delivering every change in order: it fell behind compaction,
  // restarted after an internal error, or this watcher fell too far behind. The watch must end
  // with `status` (OutOfRange, a 410) and the client re-list. The watcher is unsubscribed
  // afterwards.
  virtual void Expire(const absl::Status& status) = 0;
};

struct WatchHubOptions {
  // Change-log entries kept for watch resumption; older ones are compacted (410 Expired).
  int64_t history = 100000;
  // Threads that call watchers: a slow watcher holds up one of them, not the others.
  int delivery_threads = 4;
  // Changes waiting for one watcher before it is ended with 410 as too slow (Kubernetes' watch
  // cache ends watchers that cannot keep up the same way).
  size_t max_queued_per_watcher = 100000;
};

// Follows the store's change log (LISTEN/NOTIFY plus catch-up by revision), keeps an in-memory
// copy of every object up to date with it (ARCHITECTURE.md §5), and fans each change out to
// the subscribed watchers, in revision order, each change exactly once. Thread-safe.
//
// The hub's lock guards only the cache and the list of watchers: it is never held while the
// store is read or a watcher is called (watchers encode and write). Changes are queued per
// watcher and delivered by a small pool of threads, so a watcher that is slow, or one that is
// still reading old history from the store, holds up neither the other watches nor lists nor
// the scheduler.
class WatchHub {
 public:
  WatchHub(store::Store& store, WatchHubOptions options);
  ~WatchHub();

  void Start();
  void Stop();

  // Subscribes `watcher` to every change with revision > `from_rv`. Changes already dispatched
  // are read from the store's change log and replayed to it, on the calling thread, before
  // this returns; later ones follow from the delivery threads. OutOfRange when `from_rv` has
  // been compacted (or the hub lost its place meanwhile).
  absl::Status Subscribe(std::shared_ptr<Watcher> watcher, int64_t from_rv);

  // Lists from the cache once it reflects at least revision `min_rv` (normally the store's
  // current revision, so a client reads its own writes). DeadlineExceeded when the cache does
  // not catch up within a second; FailedPrecondition when it has no snapshot: callers then
  // read the store.
  absl::StatusOr<store::ListResult> List(const ListRequest& request, int64_t min_rv);

  // The key and resourceVersion of every cached object of `resource`, in key order, once the
  // cache reflects `min_rv` (no copies of the objects). Errors as List.
  absl::StatusOr<std::vector<std::pair<model::ResourceKey, int64_t>>> Versions(
      const std::string& resource, int64_t min_rv);

  // The cached object at `key` (null when the cache has none; it may lag the store by a few
  // ms). Cached objects are immutable and shared: a change replaces the pointer, never the
  // object, so the caller may keep it as long as it likes without a copy.
  model::ObjectPtr Find(const model::ResourceKey& key);
  // Its resourceVersion only (no copy of the object).
  std::optional<int64_t> ResourceVersionOf(const model::ResourceKey& key);
  // The object at `key` as the store held it at `min_rv` or later (null inside: none), once
  // the cache has applied every change up to `min_rv`; Unavailable when it has not within
  // `wait` (or holds no objects).
  absl::StatusOr<model::ObjectPtr> FindCurrent(const model::ResourceKey& key, int64_t min_rv,
                                               std::chrono::milliseconds wait);

  // For each of `resources`, the revision of the newest change to one of its objects that the
  // cache shows (a create, update or delete; the revision the cache was loaded at when none came
  // since), once the cache reflects at least `min_rv`. Equal answers mean no object of that
  // resource changed in between. Errors as List.
  absl::StatusOr<std::vector<int64_t>> LastChanges(const std::vector<std::string>& resources,
                                                   int64_t min_rv);

  // The newest revision the cache shows.
  int64_t last_dispatched() const { return last_rv_.load(); }
  size_t watcher_count();
  // Exceptions the hub's threads caught (each is logged; an exception in the change-log
  // follower ends every watch with 410 and reloads the cache, one in a watcher ends that
  // watch), for /metrics.
  uint64_t unexpected_errors() const { return unexpected_errors_.load(); }

 private:
  struct Entry;
  using EntryPtr = std::shared_ptr<Entry>;

  // The follower thread: Follow(), started over by Reload() after an exception.
  void Run();
  // Follows the change log until Stop().
  void Follow();
  // Reads a fresh snapshot of the store (no lock held), installs it as the cache, moves the
  // dispatch position to it, and ends every watch subscribed before with `expired`.
  void Reload(const absl::Status& expired);
  // Gives `events` to the synchronous watchers, queues them for the others, then applies them
  // to the cache.
  void Dispatch(std::vector<model::WatchEvent> events);
  // Sets WatchEvent::previous of the kModified events in `events` from the cache (or an earlier
  // event of the batch).
  void AttachPreviousLocked(std::vector<model::WatchEvent>& events)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits (up to a second) until the cache reflects `min_rv`; errors as List.
  absl::Status AwaitLocked(int64_t min_rv) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Asks every watcher for a Tick.
  void TickAll();
  // Calls a synchronous watcher on the follower thread (`call` returns false to unsubscribe).
  template <typename Call>
  void CallSynchronous(const EntryPtr& entry, Call call);
  // Hands `entry` to a delivery thread.
  void Post(EntryPtr entry);
  void DeliveryLoop();
  // Delivers what is queued for `entry`; false when it still has work (post it again).
  bool Drain(const EntryPtr& entry);
  void Unsubscribe(const Entry* entry);
  // Logs and counts the exception being handled; call from a catch block only.
  void Unexpected(const char* where);

  store::Store& store_;
  const WatchHubOptions options_;
  qm::Mutex mu_;
  qm::CondVar dispatched_;
  std::vector<EntryPtr> watchers_ ABSL_GUARDED_BY(mu_);
  // Immutable objects without their parsed trees (a tree is several times its text), shared
  // with Find's callers and with WatchEvent::previous. Keyed by views of each object's own
  // resource, namespace and name (the entry holds the object), so a key costs no strings of its
  // own; ordered as model::ResourceKey, which looks entries up too.
  struct CacheKey {
    std::string_view resource, namespace_, name;
    static CacheKey Of(const model::Object& o) {
      return {o.resource, o.meta.namespace_, o.meta.name};
    }
  };
  struct CacheKeyLess {
    using is_transparent = void;
    using Parts = std::tuple<std::string_view, std::string_view, std::string_view>;
    static Parts PartsOf(const CacheKey& k) { return {k.resource, k.namespace_, k.name}; }
    static Parts PartsOf(const model::ResourceKey& k) { return {k.resource, k.namespace_, k.name}; }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return PartsOf(a) < PartsOf(b);
    }
  };
  using Cache = std::map<CacheKey, model::ObjectPtr, CacheKeyLess>;
  Cache cache_ ABSL_GUARDED_BY(mu_);
  // The cached objects by the values of the fields that lists select one value of often:
  // pods and ResourceSlices by spec.nodeName (what a node's agent and a kubelet ask for), slices
  // by spec.pool.name (a claim allocation written through REST looks up its pool's slices), so
  // that such a list visits those objects only, not every object of the resource. Keyed by a
  // view of the value in the object's own fields; objects without the field (or with "") are not
  // in it. Kept with cache_.
  class FieldIndex {
   public:
    // The index of `field` of `resource`'s objects; -1 when there is none.
    static int Of(std::string_view resource, std::string_view field);
    void Add(const model::ObjectPtr& obj);
    void Remove(const model::Object& obj);
    void Clear();
    // How many objects index `of` holds with `value`, and which (in no order).
    size_t Count(int of, const std::string& value) const;
    std::vector<model::ObjectPtr> With(int of, const std::string& value) const;

   private:
    static constexpr size_t kIndexes = 3;
    std::unordered_multimap<std::string_view, model::ObjectPtr> by_value_[kIndexes];
  };
  FieldIndex field_index_ ABSL_GUARDED_BY(mu_);
  // The list of `request` through field_index_, when its field selector asks for one value of
  // an indexed field.
  std::optional<store::ListResult> ListByFieldLocked(const ListRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The newest change per resource since the cache was loaded (at loaded_rv_).
  std::map<std::string, int64_t, std::less<>> last_change_ ABSL_GUARDED_BY(mu_);
  int64_t loaded_rv_ ABSL_GUARDED_BY(mu_) = 0;
  bool cache_ready_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int64_t> last_rv_{0};  // written with mu_ held
  // The newest revision given to (or queued for) the watchers, ahead of last_rv_ while a batch
  // is being dispatched: a new subscription starts after it.
  int64_t queued_rv_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<bool> running_{false};
  std::atomic<uint64_t> unexpected_errors_{0};
  std::thread thread_;

  qm::Mutex run_mu_;
  qm::CondVar run_cv_;
  std::deque<EntryPtr> runnable_ ABSL_GUARDED_BY(run_mu_);
  bool delivery_stopping_ ABSL_GUARDED_BY(run_mu_) = false;
  std::vector<std::thread> delivery_;
};

}  // namespace qm::service
