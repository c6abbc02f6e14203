#pragma once

// Structured allocation as in Kubernetes' DRA allocator (incubating/experimental variants):
// given an inventory snapshot, the devices already in use, the claims of one workload and a
// candidate node, find devices for all claims together or explain why there are none.
//
// The search is deterministic: pools by (driver, pool) with pools that use binding conditions
// last, slices by name, devices in slice order; combinations (not permutations) within a request;
// depth-first over claims then requests; every mutation is undone through an undo log when a
// branch fails. It is bounded by a deadline and a cancellation flag.

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "allocator/inventory.h"
#include "model/dra.h"

namespace qm::allocator {

struct Options {
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // The monotonic clock `deadline` is read against (qm::Clock::Monotonic); the steady clock
  // when unset.
  std::function<std::chrono::steady_clock::time_point()> now;
  const std::atomic<bool>* cancelled = nullptr;
  // Makes shareIDs for consumable-capacity allocations; random UUIDs when unset.
  std::function<std::string()> new_share_id;
  // The most devices one claim may be allocated (its results); 0: no limit. The engine has no
  // ceiling of its own: the server passes the limit its REST validation applies to allocation
  // results (Kubernetes' 32 unless raised, api/rest/validation_limits.h), so that it never
  // allocates what the API would refuse to store.
  int64_t max_results_per_claim = 0;
};

enum class OutcomeKind {
  kAllocated,      // `allocations` holds one result per claim, in input order
  kUnschedulable,  // does not fit on this node; `reason` says why
  kInvalid,        // invalid input, fatal for every node; `error` names the claim and field
  kTimeout,        // deadline passed or cancelled; `error` says which
};

// What the scheduler needs to score a feasible node.
struct PoolUsage {
  std::string driver;
  std::string pool;
  int total = 0;       // devices of the pool usable on this node
  int free_after = 0;  // of those, free after this allocation
};

struct Score {
  int free_after = 0;            // free devices left in the pools the allocation touched
  std::vector<PoolUsage> pools;  // the pools touched
  // Per matchAttribute constraint of each claim (in order): how many devices share the chosen
  // value and are still free after this allocation.
  std::vector<int> match_group_free_after;
};

struct Outcome {
  OutcomeKind kind = OutcomeKind::kUnschedulable;
  std::vector<model::AllocationResult> allocations;
  std::string reason;
  // For kUnschedulable: the device class of the first request that cannot be satisfied on its
  // own, or empty when the requests only fail together (constraints, shared devices) or a pool
  // is invalid. Lets the scheduler count nodes per cause.
  std::string failed_class;
  absl::Status error;
  Score score;
};

// Allocates `claims` (all or nothing) on `node` (nullptr: no node, only devices usable from
// everywhere). Thread-safe: many calls may share one Inventory and AllocatedState.
Outcome Allocate(const Inventory& inventory, const AllocatedState& allocated,
                 const std::vector<const model::ResourceClaim*>& claims,
                 const model::NodeInfo* node, const Options& options = {});

// The UI's live preview: which devices of the inventory (ids driver/pool/device, inventory order)
// satisfy a class and extra selectors, ignoring availability. A selector that fails to compile
// is an InvalidArgument error; a device whose evaluation fails is reported in `errors`.
struct MatchPreview {
  std::vector<std::string> devices;
  std::vector<std::string> errors;
};
absl::StatusOr<MatchPreview> PreviewMatches(const Inventory& inventory,
                                            const std::string& class_name,
                                            const std::vector<std::string>& selectors);

}  // namespace qm::allocator
