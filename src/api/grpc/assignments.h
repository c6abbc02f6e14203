#pragma once

// Which claims each node must prepare, delivered to the nodes' agents as streams of changes
// (NodeAgent.WatchAssignments).
//
// A claim is assigned to a node while its status.allocation names that node and its
// status.reservedFor has a consumer (convert.h AssignmentOf). The router keeps an index from node
// to assigned claims, fed by the watch hub: each claim change is parsed once however many agents
// are connected, and only the feeds of the nodes it concerns hear of it.
//
// Resumption: an agent opens its feed with the claims it holds prepared (uid and allocation id,
// from its checkpoint). The first message brings it from that state to the current assignments
// (unprepare what it holds and is no longer assigned, or assigned anew; prepare what is assigned
// and not held); later messages carry each change. So a reconnect neither misses work (the
// comparison is with the complete current state) nor repeats it (claims held with the current
// allocation id are not sent again), whatever happened while the agent was away. Every message
// carries the revision it reflects; an agent that reconnects with the last one it processed is
// answered only once the router has caught up with it, so it never sees older state.

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "api/grpc/convert.h"
#include "common/mutex.h"
#include "service/object_service.h"
#include "service/watch_hub.h"

namespace qm::api::nodeapi {

class AssignmentRouter;

// One agent's stream: the messages to send, in order. Filled by the router, drained by the
// transport. Thread-safe.
class AssignmentFeed {
 public:
  AssignmentFeed(AssignmentRouter* router, std::string node, std::vector<std::string> drivers);
  ~AssignmentFeed();

  // Called (without locks held) whenever a message is queued or the feed ends. Set once, before
  // the first Pop; Close() drops it.
  void SetNotify(std::function<void()> notify);
  // Moves the next message into `out`; false when none is queued.
  bool Pop(v1::WatchAssignmentsResponse* out);
  // Set once the stream must end (after the queued messages): Unavailable when the server shuts
  // down, Aborted when the agent fell too far behind or the router lost the change feed.
  std::optional<absl::Status> Ended();
  // Unregisters from the router; no more notifications. Idempotent.
  void Close();

  const std::string& node() const { return node_; }

 private:
  friend class AssignmentRouter;
  struct Held {
    v1::ClaimRef claim;
    std::string allocation_id;
  };
  // Queue operations, called by the router with its lock held; the caller notifies afterwards.
  // `full` has every driver's devices; the feed keeps what its drivers need.
  void OfferLocked(const v1::Assignment* full, const v1::ClaimRef& claim, int64_t rv);
  // Queues a bookmark at `rv` when the stream has been idle for the bookmark interval. nullopt
  // once the feed has ended or closed (it leaves the schedule); else when to ask again and
  // whether one was queued (the stream then needs a wake-up). Takes only the feed's lock: `rv`
  // is a revision whose changes the router has already offered.
  struct BookmarkCheck {
    bool queued = false;
    std::chrono::steady_clock::time_point next;
  };
  std::optional<BookmarkCheck> Bookmark(int64_t rv, std::chrono::steady_clock::time_point now);
  void EndLocked(absl::Status status);
  // Appends to the unsent last message unless it already names `uid` (order within a message:
  // unprepare before prepare, so one claim appears once per message).
  v1::WatchAssignmentsResponse& TailFor(const std::string& uid, int64_t rv)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Notify();

  AssignmentRouter* router_;
  const std::string node_;
  const std::vector<std::string> drivers_;
  qm::Mutex mu_;
  std::map<std::string, Held> held_ ABSL_GUARDED_BY(mu_);  // by claim uid
  std::deque<v1::WatchAssignmentsResponse> queue_ ABSL_GUARDED_BY(mu_);
  bool tail_open_ ABSL_GUARDED_BY(mu_) = false;  // the back of queue_ may take more changes
  std::optional<absl::Status> ended_ ABSL_GUARDED_BY(mu_);
  std::function<void()> notify_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::chrono::steady_clock::time_point last_sent_ ABSL_GUARDED_BY(mu_);
  int64_t last_rv_ ABSL_GUARDED_BY(mu_) = 0;
};

struct AssignmentRouterOptions {
  // An idle feed gets a bookmark (a message with only the revision) this often, so agents can
  // resume from a recent revision and idle streams carry traffic.
  std::chrono::milliseconds bookmark_interval{10000};
  // How long Open waits for the router to catch up with the agent's revision.
  std::chrono::milliseconds catch_up_timeout{5000};
  // Messages queued for one feed before it is ended as too slow (Aborted).
  size_t max_queued = 10000;
};

class AssignmentRouter {
 public:
  AssignmentRouter(service::ObjectService& objects, service::WatchHub& hub,
                   AssignmentRouterOptions options = {});
  ~AssignmentRouter();

  // Lists the claims (from the object cache) and follows the hub. The hub must be started.
  absl::Status Start();
  // Ends every feed with Unavailable and stops following the hub.
  void Stop();

  // Opens a feed for `node`. `prepared` is what the agent holds (claim and allocation id);
  // `min_rv` the newest revision it has seen (0: any). Unavailable when the router has not caught
  // up with `min_rv` within the catch-up timeout or is stopping. The first message is queued.
  absl::StatusOr<std::shared_ptr<AssignmentFeed>> Open(const std::string& node,
                                                       const std::vector<std::string>& drivers,
                                                       const std::vector<v1::PreparedRef>& prepared,
                                                       int64_t min_rv);

  // The current assignment of claim `uid` when it is assigned to `node` (for checking reports).
  std::optional<v1::Assignment> Find(const std::string& node, const std::string& uid);

  // The revision the index reflects.
  int64_t revision();
  size_t feed_count();

 private:
  friend class AssignmentFeed;
  class HubWatcher;
  struct Entry {
    std::string node;
    v1::Assignment assignment;
  };

  // Replaces the index with a fresh listing and follows the hub from it; feeds hear of the
  // differences. Runs on Start and on the reload thread after the hub lost its place.
  absl::Status Load();
  // Applies the new state of claim `uid` (nullopt: not assigned, or gone) at revision `rv`, and
  // collects the feeds to notify.
  void ApplyLocked(const std::string& uid, const v1::ClaimRef& claim,
                   std::optional<ClaimAssignment> next, int64_t rv,
                   std::vector<std::shared_ptr<AssignmentFeed>>* touched)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Offers the change of `claim` (assigned as `assignment`, or nullptr: no longer on `node`) to
  // the feeds of `node`, and adds them to `touched`.
  void OfferLocked(const std::string& node, const v1::Assignment* assignment,
                   const v1::ClaimRef& claim, int64_t rv,
                   std::vector<std::shared_ptr<AssignmentFeed>>* touched)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnEvent(const model::WatchEvent& event);
  void OnTick(int64_t rv);
  void OnExpired();
  void Remove(AssignmentFeed* feed);
  void ReloadLoop();
  // The bookmark thread: visits each feed when its bookmark falls due, not every feed on every
  // tick (at 5,000 agents a pass over all feeds held the router's lock for milliseconds, and
  // the claim changes queued behind it on the hub's delivery thread).
  void BookmarkLoop();

  service::ObjectService& objects_;
  service::WatchHub& hub_;
  const AssignmentRouterOptions options_;

  qm::Mutex mu_;
  // Open waits on `changed_` for the revision to reach the agent's; the events and ticks signal
  // it only while an Open waits (`open_waiters_`): every change of every resource comes through
  // here, and a wake-up per change was a futex call and a context switch each.
  qm::CondVar changed_;
  int open_waiters_ ABSL_GUARDED_BY(mu_) = 0;
  qm::CondVar reload_wanted_;  // the reload thread's: the feed expired, or stopping
  std::map<std::string, Entry> claims_ ABSL_GUARDED_BY(mu_);                   // by uid
  std::map<std::string, std::set<std::string>> by_node_ ABSL_GUARDED_BY(mu_);  // node -> uids
  std::multimap<std::string, std::shared_ptr<AssignmentFeed>> feeds_ ABSL_GUARDED_BY(mu_);
  int64_t rv_ ABSL_GUARDED_BY(mu_) = 0;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool reload_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<HubWatcher> watcher_ ABSL_GUARDED_BY(mu_);
  std::thread reload_thread_;

  struct BookmarkDue {
    std::chrono::steady_clock::time_point due;
    std::weak_ptr<AssignmentFeed> feed;
    bool operator>(const BookmarkDue& o) const { return due > o.due; }
  };
  qm::CondVar bookmark_wanted_;  // the bookmark thread's: a feed opened, or stopping
  // One entry per open feed, the soonest due on top.
  std::priority_queue<BookmarkDue, std::vector<BookmarkDue>, std::greater<>> bookmarks_
      ABSL_GUARDED_BY(mu_);
  std::thread bookmark_thread_;
};

}  // namespace qm::api::nodeapi
