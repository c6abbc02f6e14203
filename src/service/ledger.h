#pragma once

// The device-allocation ledger rows (ARCHITECTURE.md §4) that stand for a claim's allocation:
// one per allocated device, written in the same store transaction as the allocation itself, by
// the scheduler and by the object service when a client writes an allocation. Each row carries
// what it takes from limits the store enforces (store::DeviceCharge), found in the
// ResourceSlices the allocation was made against.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "allocator/inventory.h"
#include "model/dra.h"
#include "store/store.h"

namespace qm::service {

// A device as its ResourceSlice publishes it, and its pool's counter sets (set -> counter ->
// value). A null device: the device is not known, and its row takes from no limit.
struct LedgerDevice {
  const model::Device* device = nullptr;
  const std::map<std::string, std::map<std::string, Quantity>>* counter_sets = nullptr;
};
// Finds a device by driver, pool and name.
using LedgerDeviceLookup = std::function<LedgerDevice(
    const std::string& driver, const std::string& pool, const std::string& device)>;

// One row per result of `allocation`, held by the claim `claim_uid`. With `lookup`, each row
// carries its charges as the allocator counts them: a share (shareID set) its consumed capacity
// against each capacity of its device; any device what it consumes from its pool's counter sets
// (the store counts that once per device however many shares hold it); an admin-access result
// nothing. Amounts against capacities or counters the device or pool does not publish are left
// out: no limit is known for them.
std::vector<store::DeviceClaim> LedgerRows(const model::AllocationResult& allocation,
                                           const std::string& claim_uid,
                                           const LedgerDeviceLookup& lookup = nullptr);

// The scheduler's lookup: devices of `inventory`, from the newest generation of their pool that
// has them. `inventory` must outlive the returned function.
LedgerDeviceLookup InventoryDevices(const allocator::Inventory& inventory);

// The devices and counter sets of a set of ResourceSlices, the newest generation of each pool,
// for clients that write allocations themselves.
class SliceDevices {
 public:
  explicit SliceDevices(std::vector<model::ResourceSlice> slices);
  SliceDevices(const SliceDevices&) = delete;
  SliceDevices& operator=(const SliceDevices&) = delete;

  LedgerDevice Find(const std::string& driver, const std::string& pool,
                    const std::string& device) const;
  // Find as a lookup; this object must outlive it.
  LedgerDeviceLookup Lookup() const;

 private:
  using PoolKey = std::pair<std::string, std::string>;  // driver, pool
  std::vector<model::ResourceSlice> slices_;
  std::map<std::tuple<std::string, std::string, std::string>, const model::Device*> devices_;
  std::map<PoolKey, std::map<std::string, std::map<std::string, Quantity>>> counter_sets_;
};

}  // namespace qm::service
