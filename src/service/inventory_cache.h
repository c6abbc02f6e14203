#pragma once

// The allocator's Inventory of the object cache's ResourceSlices, DeviceClasses and
// DeviceTaintRules, for the read-only admin views (DeviceMatchReview, UtilizationHistoryReview):
// built once and reused until one of those objects changes, so that a page asking for the
// counts of every class does not decode and index the whole inventory once per class.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "allocator/inventory.h"
#include "cel/program_cache.h"
#include "common/mutex.h"
#include "service/object_service.h"

namespace qm::service {

// One built inventory and the names of the classes in it (every DeviceClass that decodes).
struct InventorySnapshot {
  std::shared_ptr<const allocator::Inventory> inventory;
  std::vector<std::string> class_names;  // sorted
};

// Thread-safe. Any create, update or delete of a ResourceSlice, DeviceClass or DeviceTaintRule
// builds a new inventory; other writes (claims, pods) do not. Each Get first asks the object
// cache for the revisions of the three kinds' newest changes (ObjectService::LastChanges, no
// listing): unchanged, it returns the current inventory at once. Otherwise (or without a cache)
// it lists the three kinds (no decoding) and compares their keys and resourceVersions with those
// the inventory was built from. Snapshots stay valid for as long as callers hold them, also
// after a rebuild.
class InventoryCache {
 public:
  explicit InventoryCache(ObjectService& objects) : objects_(objects) {}
  ~InventoryCache();  // stops prewarming

  // Errors only when the object cache cannot be read.
  absl::StatusOr<std::shared_ptr<const InventorySnapshot>> Get();

  // Builds the next inventory ahead of the Get that needs it, on a thread of its own: every
  // `settle`, once the three kinds have not changed for one period, when Get was called in the
  // last `idle` (nobody is looking: nothing is built). Building 40,000 devices takes about a
  // second, which the first admin view after a change of the inventory would otherwise wait.
  // Call once.
  void StartPrewarming(std::chrono::milliseconds settle, std::chrono::minutes idle);

  // How many inventories have been built (for tests and metrics).
  uint64_t builds() const;

 private:
  absl::StatusOr<std::shared_ptr<const InventorySnapshot>> Refresh(
      const absl::StatusOr<std::vector<int64_t>>& revisions);
  void PrewarmLoop(std::chrono::milliseconds settle, std::chrono::minutes idle);

  ObjectService& objects_;
  cel::ProgramCache programs_{1024};  // selectors compiled once across rebuilds
  mutable qm::Mutex mu_;
  uint64_t fingerprint_ ABSL_GUARDED_BY(mu_) = 0;
  // LastChanges of the three kinds when the snapshot was found current (empty: unknown).
  std::vector<int64_t> revisions_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const InventorySnapshot> snapshot_ ABSL_GUARDED_BY(mu_);
  // The slices snapshot_ was built from, decoded, by key with their resourceVersion: the next
  // build decodes only slices that changed and takes the CEL values of the others from
  // snapshot_'s inventory.
  std::map<model::ResourceKey, std::pair<int64_t, allocator::SharedSlice>> slices_
      ABSL_GUARDED_BY(mu_);
  uint64_t builds_ ABSL_GUARDED_BY(mu_) = 0;
  std::chrono::steady_clock::time_point last_get_ ABSL_GUARDED_BY(mu_);

  qm::Mutex prewarm_mu_;
  qm::CondVar prewarm_cv_;
  bool stopping_ ABSL_GUARDED_BY(prewarm_mu_) = false;
  std::thread prewarm_;
};

}  // namespace qm::service
