#pragma once

// The scheduler and the claim-lifecycle controllers (ARCHITECTURE.md §2 steps 5, 6 and 8).
//
// One pass (RunOnce) reads a snapshot of the object cache and:
//  1. releases claims whose consumers are gone: drops them from reservedFor, deallocates a claim
//     that the scheduler allocated (it carries the delete-protection finalizer) once no consumer
//     is left (ledger rows released in the same transaction), and deletes claims generated for
//     a pod that no longer exists;
//  2. works out the claim of every pod x claim template (owned by the pod, annotated with the pod
//     claim name) and the claim behind extended-resource requests (`nvidia.com/gpu: 2`), recorded
//     in the pod's status.resourceClaimStatuses / extendedResourceClaimStatus. For a pod that is
//     about to be scheduled these writes join its binding (or its unschedulable status); for any
//     other pod they are committed on their own;
//  3. schedules pending pods, highest priority first: placement over all nodes, then ONE store
//     transaction with the ledger rows, every claim's allocation and reservedFor (new claims are
//     created allocated), and the pod's nodeName, claim statuses and PodScheduled condition. A
//     lost race (device taken, stale revision) is retried on the next pass with a fresh
//     snapshot. Pods that do not fit get PodScheduled=False with the counted reason and a
//     FailedScheduling Event, and back off (initial_backoff, doubling up to max_backoff): they
//     are tried again once the backoff has passed AND something that can make them fit changed
//     (slices, classes, taint rules, nodes, templates, quotas, a released device, a new claim, the
//     pod itself), or after five minutes in any case, as kube-scheduler's queue does.
// Objects that do not decode are never dropped silently (decode_failures.h): each version is
// logged, counted and gets a DecodeFailed Event; a claim whose allocation does not decode keeps
// the devices it may hold in use and is not allocated anew.
// Parsed objects, the inventory and the node list are kept between passes and rebuilt only for
// what changed. The loop (Start) runs a pass whenever the object cache changes, and at least
// every `resync`. Several replicas may run it at once: the store's device ledger and revision
// checks keep their decisions consistent.

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "cel/program_cache.h"
#include "common/clock.h"
#include "common/id_generator.h"
#include "common/mutex.h"
#include "service/decode_failures.h"
#include "service/watch_hub.h"
#include "store/store.h"

namespace qm::service {

struct SchedulerOptions {
  std::chrono::milliseconds resync{1000};
  // Per-node allocation budget (Kubernetes' DRA filter timeout is 10 s).
  std::chrono::milliseconds allocation_budget{10000};
  std::string component = "quartermaster-scheduler";
  // Backoff of an unschedulable pod (kube-scheduler's podInitialBackoffSeconds and
  // podMaxBackoffSeconds); 0 retries on the next relevant change.
  std::chrono::milliseconds initial_backoff{1000};
  std::chrono::milliseconds max_backoff{10000};
  // A pod whose own tolerations do not mention node.kubernetes.io/not-ready or unreachable
  // (NoExecute) tolerates them this long, as if DefaultTolerationSeconds had added them
  // (--default-unreachable-toleration-seconds; pod defaulting adds them to pods that list none).
  int64_t default_toleration_seconds = 300;
  // The most devices one claim is allocated (--max-results-per-claim, the REST limit on
  // allocation results; allocator::Options::max_results_per_claim). 0: no limit.
  int64_t max_results_per_claim = 32;
  // How long a pass whose commits are in flight goes on placing pods created meanwhile (their
  // commits join the store's next group commit) before it waits for the rest; 0: it waits at
  // once, and they wait for the next pass.
  std::chrono::milliseconds late_arrival_window{25};
};

struct PassStats {
  int bound = 0;
  int unschedulable = 0;
  int conflicts = 0;  // commits lost to a concurrent writer, retried next pass
  int claims_created = 0;
  int claims_released = 0;
  int evicted = 0;      // pods deleted for an untolerated NoExecute device or node taint
  int backing_off = 0;  // unschedulable pods not tried this pass (backoff, nothing changed)
  int deferred = 0;     // late arrivals that did not fit the pass's views, tried next pass
};

class Scheduler {
 public:
  Scheduler(store::Store& store, WatchHub& hub, const Clock& clock, IdGenerator& ids,
            SchedulerOptions options = {});
  ~Scheduler();

  void Start();
  void Stop();

  // One pass over the current cache (the loop calls this; tests call it directly after
  // waiting for the cache to catch up with their writes).
  absl::StatusOr<PassStats> RunOnce();

  // Objects that did not decode (see decode_failures.h), for /metrics.
  const DecodeFailures& decode_failures() const { return decode_failures_; }
  // Passes of the loop that ended with an exception (each is logged; the loop lists everything
  // again and carries on), for /metrics.
  uint64_t unexpected_errors() const { return unexpected_errors_.load(); }

 private:
  class Feed;
  class PassRun;
  struct State;
  struct Dirty;
  void Loop();
  void Wake();
  // Brings the views up to date with the object cache: applies the changes the feed collected,
  // or (first pass, or the feed lost its place) subscribes anew and lists everything.
  absl::Status Sync(bool read_your_writes, Dirty& dirty);
  absl::StatusOr<PassStats> Pass(bool read_your_writes);

  store::Store& store_;
  WatchHub& hub_;
  const Clock& clock_;
  IdGenerator& ids_;
  const SchedulerOptions options_;
  cel::ProgramCache programs_{4096};
  DecodeFailures decode_failures_;
  std::unique_ptr<State> state_;  // caches kept between passes; used by the pass thread only

  qm::Mutex mu_;
  qm::CondVar wake_;
  bool dirty_ ABSL_GUARDED_BY(mu_) = true;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<Feed> feed_;  // used by the pass thread; Close() detaches it
  // Set by a loop pass that put off rebuilding the snapshot: run the next pass this soon.
  // Used by the pass thread only.
  std::optional<std::chrono::milliseconds> refresh_delay_;
  std::atomic<uint64_t> unexpected_errors_{0};
  std::thread thread_;
};

}  // namespace qm::service
