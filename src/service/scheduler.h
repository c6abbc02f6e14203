#pragma once

// The scheduler and the claim-lifecycle controllers (ARCHITECTURE.md §2 steps 5, 6 and 8).
//
// One pass (RunOnce) reads a snapshot of the object cache and:
//  1. releases claims whose consumers are gone: drops them from reservedFor, deallocates a claim
//     with no consumer left (ledger rows released in the same transaction), and deletes claims
//     generated for a pod that no longer exists;
//  2. creates the claim of every pod x claim template (owned by the pod, annotated with the pod
//     claim name) and the claim behind extended-resource requests (`nvidia.com/gpu: 2`), and
//     records them in the pod's status.resourceClaimStatuses;
//  3. schedules pending pods, highest priority first: placement over all nodes, then ONE store
//     transaction with the ledger rows, every claim's allocation and reservedFor, and the pod's
//     nodeName and PodScheduled condition. A lost race (device taken, stale revision) is retried
//     on the next pass with a fresh snapshot. Pods that do not fit get PodScheduled=False with
//     the counted reason and a FailedScheduling Event.
// The loop (Start) runs a pass whenever the object cache changes, and at least every
// `resync` while some pod is pending. Several replicas may run it at once: the store's device
// ledger and revision checks keep their decisions consistent.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "cel/program_cache.h"
#include "common/clock.h"
#include "common/id_generator.h"
#include "service/watch_hub.h"
#include "store/store.h"

namespace qm::service {

struct SchedulerOptions {
  std::chrono::milliseconds resync{1000};
  // Per-node allocation budget (Kubernetes' DRA filter timeout is 10 s).
  std::chrono::milliseconds allocation_budget{10000};
  std::string component = "quartermaster-scheduler";
};

struct PassStats {
  int bound = 0;
  int unschedulable = 0;
  int conflicts = 0;  // commits lost to a concurrent writer, retried next pass
  int claims_created = 0;
  int claims_released = 0;
  int evicted = 0;  // pods deleted for an untolerated NoExecute device taint
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

 private:
  class Trigger;
  void Loop();

  store::Store& store_;
  WatchHub& hub_;
  const Clock& clock_;
  IdGenerator& ids_;
  const SchedulerOptions options_;
  cel::ProgramCache programs_{4096};
  size_t next_start_ = 0;  // rotates the first node tried, as kube-scheduler does

  std::mutex mu_;
  std::condition_variable wake_;
  bool dirty_ = true;
  bool stopping_ = false;
  std::shared_ptr<Trigger> trigger_;
  std::thread thread_;
};

}  // namespace qm::service
