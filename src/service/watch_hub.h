#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "model/object.h"
#include "service/list_request.h"
#include "store/store.h"

namespace qm::service {

// A consumer of the change feed (one watch request). Called from the hub's thread only.
class Watcher {
 public:
  virtual ~Watcher() = default;
  // Delivers one change. Return false to be unsubscribed (client gone, timeout reached).
  virtual bool Deliver(const model::WatchEvent& event) = 0;
  // Called at least once a second when idle; `rv` is the newest revision dispatched, for
  // bookmarks. Return false to be unsubscribed.
  virtual bool Tick(int64_t rv) = 0;
  // The hub lost its place in the change log (it fell behind compaction): changes may have
  // been missed, so the watch must end with `status` (OutOfRange, a 410) and the client
  // re-list. The watcher is unsubscribed afterwards.
  virtual void Expire(const absl::Status& status) = 0;
};

struct WatchHubOptions {
  // Change-log entries kept for watch resumption; older ones are compacted (410 Expired).
  int64_t history = 100000;
};

// Follows the store's change log (LISTEN/NOTIFY plus catch-up by revision), keeps an in-memory
// copy of every object up to date with it (ARCHITECTURE.md §5), and fans each change out to
// the subscribed watchers, in revision order, each change exactly once. Thread-safe.
class WatchHub {
 public:
  WatchHub(store::Store& store, WatchHubOptions options);
  ~WatchHub();

  void Start();
  void Stop();

  // Subscribes `watcher` to every change with revision > `from_rv`. Changes already in the log
  // are replayed to it before this returns. OutOfRange when `from_rv` has been compacted.
  absl::Status Subscribe(std::shared_ptr<Watcher> watcher, int64_t from_rv);

  // Lists from the cache once it reflects at least revision `min_rv` (normally the store's
  // current revision, so a client reads its own writes). DeadlineExceeded when the cache does
  // not catch up within a second; FailedPrecondition when it has no snapshot: callers then
  // read the store.
  absl::StatusOr<store::ListResult> List(const ListRequest& request, int64_t min_rv);

  // The cached object at `key`, if the cache has one (it may lag the store by a few ms).
  std::optional<model::Object> Find(const model::ResourceKey& key);

  int64_t last_dispatched() const { return last_rv_.load(); }
  size_t watcher_count();
  // Exceptions the hub's thread caught (each is logged; every watch then ends with 410 and the
  // cache is reloaded), for /metrics.
  uint64_t unexpected_errors() const { return unexpected_errors_.load(); }

 private:
  struct Entry {
    std::shared_ptr<Watcher> watcher;
    int64_t start_rv;
  };

  // The hub's thread: Follow(), started over by Restart() after an exception.
  void Run();
  // Follows the change log until Stop().
  void Follow();
  // Ends every watch with 410 and reloads the cache.
  void Restart();
  void DispatchLocked(const model::WatchEvent& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Replaces the cache with a fresh snapshot of the store and moves last_rv_ to it.
  void LoadSnapshotLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  store::Store& store_;
  const WatchHubOptions options_;
  std::mutex mu_;
  std::condition_variable dispatched_;
  std::vector<Entry> watchers_ ABSL_GUARDED_BY(mu_);
  std::map<model::ResourceKey, model::Object> cache_ ABSL_GUARDED_BY(mu_);
  bool cache_ready_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int64_t> last_rv_{0};
  std::atomic<bool> running_{false};
  std::atomic<uint64_t> unexpected_errors_{0};
  std::thread thread_;
};

}  // namespace qm::service
