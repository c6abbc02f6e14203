#pragma once

// Utilization history behind UtilizationHistoryReview (admin.quartermaster.io/v1alpha1, see
// api/rest/admin_api.h): allocated, free and unhealthy devices over time, in buckets of a fixed
// step, per DeviceClass, device model, node or claim namespace. The allocations come from the
// store's allocation history (recorded with every ledger change, store/store.h), the devices'
// health from its health history (recorded with every write of a slice or DeviceTaintRule that
// changes an unhealthy taint), both replayed back from now; the devices and their groups from
// the current inventory.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "service/inventory_cache.h"
#include "store/store.h"

namespace qm::service {

enum class UtilizationGroupBy { kNone, kClass, kModel, kNode, kNamespace };

struct UtilizationRequest {
  std::chrono::system_clock::time_point start;  // the first bucket starts here
  std::chrono::system_clock::time_point end;    // after start; the last bucket ends at or after
  std::chrono::seconds step{60};                // > 0
  UtilizationGroupBy group_by = UtilizationGroupBy::kNone;
};

// One group's series; vectors have one value per bucket. For every device group (all of them
// but namespaces) each bucket splits the group's devices into allocated + free + unhealthy.
struct UtilizationSeries {
  // The class, model (productName, model or type attribute, else the driver), node ("" for
  // devices not bound to one node) or claim namespace; "" for kNone.
  std::string name;
  int64_t devices = 0;  // devices of the group now; 0 for namespaces
  int64_t tainted = 0;  // of them, devices with any taint now (their own or a DeviceTaintRule's)
  // Devices held by at least one claim (admin access does not count) at the end of the bucket
  // (or now, for a bucket that has not ended), and the most held at any moment within it.
  std::vector<int64_t> allocated;
  std::vector<int64_t> peak_allocated;
  // Not allocated at the end of the bucket: unhealthy then (covered by a
  // quartermaster.io/unhealthy taint of its own or of a DeviceTaintRule,
  // model::kUnhealthyTaintKey), and the rest. Empty for namespaces.
  std::vector<int64_t> unhealthy;
  std::vector<int64_t> free;
};

struct UtilizationResult {
  std::vector<std::chrono::system_clock::time_point> bucket_starts;
  std::vector<UtilizationSeries> groups;  // sorted by name
};

// Buckets [start + i*step, start + (i+1)*step) for i < ceil((end - start) / step). Devices are
// those of the newest generation of every pool now; allocations of devices no longer in the
// inventory count only for namespaces. Pure: `history` must have been read with `since` <=
// request.start. Each class group holds the devices the class's selectors match now.
UtilizationResult ComputeUtilization(const InventorySnapshot& inventory,
                                     const store::AllocationHistory& history,
                                     const UtilizationRequest& request);

}  // namespace qm::service
