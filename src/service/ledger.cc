#include "service/ledger.h"

#include "absl/strings/str_cat.h"
#include "model/json/stored.h"

namespace qm::service {
namespace {

// The capacity of `device` that an allocation result names `name` ("memory", or qualified with
// the driver's domain as requests may write it), or nullptr.
const std::pair<Symbol, model::DeviceCapacity>* FindCapacity(const model::Device& device,
                                                             const std::string& driver,
                                                             const std::string& name) {
  auto it = device.capacity.find(name);
  if (it == device.capacity.end() && name.size() > driver.size() + 1 &&
      name.compare(0, driver.size(), driver) == 0 && name[driver.size()] == '/') {
    it = device.capacity.find(name.substr(driver.size() + 1));
  }
  return it == device.capacity.end() ? nullptr : &*it;
}

std::vector<store::DeviceCharge> Charges(const model::DeviceRequestAllocationResult& r,
                                         const LedgerDevice& found) {
  std::vector<store::DeviceCharge> out;
  if (r.admin_access || found.device == nullptr) return out;
  if (!r.share_id.empty()) {
    for (const auto& [name, amount] : r.consumed_capacity) {
      const auto* capacity = FindCapacity(*found.device, r.driver, name);
      if (capacity == nullptr) continue;
      out.push_back({store::DeviceCharge::Kind::kCapacity, r.device, capacity->first, amount,
                     capacity->second.value});
    }
  }
  for (const auto& consumption : found.device->consumes_counters) {
    if (found.counter_sets == nullptr) break;
    auto set = found.counter_sets->find(consumption.counter_set);
    if (set == found.counter_sets->end()) continue;
    for (const auto& [counter, amount] : consumption.counters) {
      auto value = set->second.find(counter);
      if (value == set->second.end()) continue;
      out.push_back({store::DeviceCharge::Kind::kCounter, consumption.counter_set, counter, amount,
                     value->second});
    }
  }
  return out;
}

}  // namespace

std::vector<store::DeviceClaim> LedgerRows(const model::AllocationResult& allocation,
                                           const std::string& claim_uid,
                                           const LedgerDeviceLookup& lookup) {
  std::vector<store::DeviceClaim> rows;
  for (const auto& r : allocation.results) {
    rows.push_back({r.driver,
                    r.pool,
                    r.device,
                    r.share_id,
                    claim_uid,
                    r.admin_access,
                    model::json::EncodeCapacityMap(r.consumed_capacity),
                    {}});
    if (lookup) rows.back().charges = Charges(r, lookup(r.driver, r.pool, r.device));
  }
  return rows;
}

LedgerDeviceLookup InventoryDevices(const allocator::Inventory& inventory) {
  return [&inventory](const std::string& driver, const std::string& pool,
                      const std::string& device) -> LedgerDevice {
    const allocator::Inventory::DeviceEntry* newest = nullptr;
    for (uint32_t i : inventory.FindDevice(driver, pool, device)) {
      const auto& entry = inventory.devices()[i];
      if (newest == nullptr || inventory.groups()[entry.group].generation >
                                   inventory.groups()[newest->group].generation) {
        newest = &entry;
      }
    }
    if (newest == nullptr) return {};
    return {newest->device, &inventory.groups()[newest->group].counter_sets};
  };
}

SliceDevices::SliceDevices(std::vector<model::ResourceSlice> slices) : slices_(std::move(slices)) {
  std::map<PoolKey, int64_t> newest;
  for (const auto& s : slices_) {
    auto [it, added] = newest.try_emplace({s.driver, s.pool}, s.generation);
    if (!added && s.generation > it->second) it->second = s.generation;
  }
  for (const auto& s : slices_) {
    if (s.generation != newest[{s.driver, s.pool}]) continue;
    for (const auto& d : s.devices) devices_.try_emplace({s.driver, s.pool, d.name}, &d);
    auto& sets = counter_sets_[{s.driver, s.pool}];
    for (const auto& set : s.shared_counters) sets.try_emplace(set.name, set.counters);
  }
}

LedgerDevice SliceDevices::Find(const std::string& driver, const std::string& pool,
                                const std::string& device) const {
  auto d = devices_.find({driver, pool, device});
  if (d == devices_.end()) return {};
  auto sets = counter_sets_.find({driver, pool});
  return {d->second, sets == counter_sets_.end() ? nullptr : &sets->second};
}

LedgerDeviceLookup SliceDevices::Lookup() const {
  return [this](const std::string& driver, const std::string& pool, const std::string& device) {
    return Find(driver, pool, device);
  };
}

}  // namespace qm::service
