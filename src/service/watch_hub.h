#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "model/object.h"
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

// Follows the store's change log (LISTEN/NOTIFY plus catch-up by revision) and fans each change
// out to the subscribed watchers, in revision order, each change exactly once. Thread-safe.
class WatchHub {
 public:
  WatchHub(store::Store& store, WatchHubOptions options);
  ~WatchHub();

  void Start();
  void Stop();

  // Subscribes `watcher` to every change with revision > `from_rv`. Changes already in the log
  // are replayed to it before this returns. OutOfRange when `from_rv` has been compacted.
  absl::Status Subscribe(std::shared_ptr<Watcher> watcher, int64_t from_rv);

  int64_t last_dispatched() const { return last_rv_.load(); }
  size_t watcher_count();

 private:
  struct Entry {
    std::shared_ptr<Watcher> watcher;
    int64_t start_rv;
  };

  void Run();
  void DispatchLocked(const model::WatchEvent& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  store::Store& store_;
  const WatchHubOptions options_;
  std::mutex mu_;
  std::vector<Entry> watchers_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> last_rv_{0};
  std::atomic<bool> running_{false};
  std::thread thread_;
};

}  // namespace qm::service
