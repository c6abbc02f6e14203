#pragma once

// The allocator's Inventory of the object cache's ResourceSlices, DeviceClasses and
// DeviceTaintRules, for the read-only admin views (DeviceMatchReview, UtilizationHistoryReview):
// built once and reused until one of those objects changes, so that a page asking for the
// counts of every class does not decode and index the whole inventory once per class.

#include <cstdint>
#include <memory>
#include <string>
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

// Thread-safe. Each Get lists the three kinds from the object cache (no decoding) and compares
// their keys and resourceVersions with those the current inventory was built from: any create,
// update or delete of one of them builds a new inventory; other writes (claims, pods) do not.
// Snapshots stay valid for as long as callers hold them, also after a rebuild.
class InventoryCache {
 public:
  explicit InventoryCache(ObjectService& objects) : objects_(objects) {}

  // Errors only when the object cache cannot be read.
  absl::StatusOr<std::shared_ptr<const InventorySnapshot>> Get();

  // How many inventories have been built (for tests and metrics).
  uint64_t builds() const;

 private:
  ObjectService& objects_;
  cel::ProgramCache programs_{1024};  // selectors compiled once across rebuilds
  mutable qm::Mutex mu_;
  uint64_t fingerprint_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<const InventorySnapshot> snapshot_ ABSL_GUARDED_BY(mu_);
  uint64_t builds_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace qm::service
