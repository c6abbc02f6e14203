#pragma once

// The allocator's immutable view of the device inventory: ResourceSlices grouped into pools and
// generations, DeviceClasses with compiled selectors, DeviceTaintRules applied to the devices,
// and a `device` CEL value prebuilt per device. Built once per inventory change and shared by
// every Allocate call (and thread) until the next change. Which devices are in use is not part
// of it: see AllocatedState, which changes with every binding.

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "cel/interpreter.h"
#include "cel/program_cache.h"
#include "cel/value.h"
#include "common/mutex.h"
#include "model/dra.h"

namespace qm::allocator {

// An attribute's value as a sorted set of value ids, for the matchAttribute and
// distinctAttribute constraints: within one Inventory::AttributeSets result, equal typed values
// have equal ids (the int 1 and the string "1" differ), so the search compares integers, not
// texts. A scalar is a one-element set.
using AttrSet = std::vector<uint32_t>;

// A decoded slice, shared (immutable) between whoever keeps it and the inventories built from
// it: the scheduler decodes a slice once per change, not once per inventory.
using SharedSlice = std::shared_ptr<const model::ResourceSlice>;

// A slice for InventoryInput: a shared one, or a value moved into one.
class SliceRef {
 public:
  SliceRef(SharedSlice slice) : slice_(std::move(slice)) {}  // NOLINT(google-explicit-constructor)
  SliceRef(model::ResourceSlice slice)                       // NOLINT(google-explicit-constructor)
      : slice_(std::make_shared<const model::ResourceSlice>(std::move(slice))) {}
  const model::ResourceSlice& operator*() const { return *slice_; }
  const model::ResourceSlice* operator->() const { return slice_.get(); }
  const SharedSlice& shared() const { return slice_; }

 private:
  SharedSlice slice_;
};

struct InventoryInput {
  std::vector<SliceRef> slices;
  std::vector<model::DeviceClass> classes;
  std::vector<model::DeviceTaintRule> taint_rules;
};

// A device already given to a claim (one entry of some claim's status.allocation).
struct AllocatedDevice {
  std::string driver;
  std::string pool;
  std::string device;
  std::string share_id;  // set for devices with allowMultipleAllocations
  std::map<std::string, Quantity> consumed_capacity;
  bool admin_access = false;  // admin-access results block nothing and are ignored
};

class Inventory;

// Devices in use, resolved against one Inventory. Cheap to build (no CEL); kept up to date with
// AddAllocated and RemoveAllocated as allocations come and go, or resolved anew. Not
// thread-safe to change: Allocate calls may share one only while nobody changes it.
class AllocatedState {
 public:
  AllocatedState() = default;

  bool Exclusive(uint32_t device) const {
    return device < exclusive_.size() && exclusive_[device] != 0;
  }
  // Summed consumed capacity of a shared device, or nullptr when none is in use.
  const std::map<std::string, Quantity>* SharedConsumed(uint32_t device) const;
  // What allocated devices of one pool generation consume from its counter sets.
  const std::map<std::string, std::map<std::string, Quantity>>* CountersConsumed(
      uint32_t group) const;
  size_t size() const { return allocated_count_; }

 private:
  friend class Inventory;
  // The shares of one device with allowMultipleAllocations and what they consume together.
  struct Shares {
    uint32_t count = 0;
    std::map<std::string, Quantity> consumed;
  };
  // How many allocations hold each device exclusively (more than one only when the store holds
  // conflicting or undecodable allocations).
  std::vector<uint16_t> exclusive_;
  std::unordered_map<uint32_t, Shares> shared_;
  std::unordered_map<uint32_t, std::map<std::string, std::map<std::string, Quantity>>> counters_;
  size_t allocated_count_ = 0;
};

class Inventory {
 public:
  // The tri-state of a cached selector evaluation.
  enum class Match : uint8_t { kUnknown = 0, kYes = 1, kNo = 2, kError = 3 };

  struct DeviceEntry {
    const model::Device* device = nullptr;
    uint32_t slice = 0;  // index into slices()
    uint32_t group = 0;  // index into groups()
    // The device's taints followed by the taints of matching DeviceTaintRules.
    std::vector<model::DeviceTaint> taints;
    std::optional<cel::Value> value;  // unset when building it failed
    std::string value_error;
  };

  struct SliceEntry {
    SharedSlice slice;  // never null
    uint32_t group = 0;
    uint32_t first_device = 0;  // devices of the slice are consecutive in devices()
  };

  // All slices of one pool at one generation (on any node).
  struct Group {
    uint32_t pool = 0;
    int64_t generation = 0;
    std::vector<uint32_t> slices;  // sorted by name
    size_t slice_count = 0;        // how many slices the pool says it has
    std::string invalid;           // why the group is invalid, or empty
    bool has_binding_conditions = false;
    std::map<std::string, std::map<std::string, Quantity>> counter_sets;
  };

  struct Pool {
    std::string driver;
    std::string name;
    std::vector<uint32_t> groups;  // by generation, ascending
    int64_t max_generation = 0;
  };

  struct ClassEntry {
    model::DeviceClass device_class;
    std::vector<std::shared_ptr<const cel::CompileResult>> selectors;
  };

  // Builds the inventory. `programs` (optional) caches compiled selectors across inventories.
  // `previous` (optional) is an inventory built before: the devices of slices it shares with
  // `input` (the same SharedSlice, so the same content) take their CEL values from it instead of
  // building them again, so a rebuild after a few slices changed costs little more than those.
  static std::shared_ptr<const Inventory> Build(InventoryInput input,
                                                cel::ProgramCache* programs = nullptr,
                                                const Inventory* previous = nullptr);

  // Resolves allocated devices against this inventory. Devices the inventory does not have (a
  // slice was removed) are ignored: they neither block nor consume counters here.
  AllocatedState ResolveAllocated(const std::vector<AllocatedDevice>& allocated) const;
  // Adds more allocated devices to a state resolved against this inventory (the scheduler's
  // in-flight bindings), in time proportional to `allocated` only.
  void AddAllocated(AllocatedState& state, const std::vector<AllocatedDevice>& allocated) const;
  // Takes out of `state` devices added to it before (by ResolveAllocated or AddAllocated against
  // this inventory), exactly undoing that addition: a release costs time proportional to what
  // it frees, not a new resolution of every allocation.
  void RemoveAllocated(AllocatedState& state, const std::vector<AllocatedDevice>& allocated) const;

  const std::vector<DeviceEntry>& devices() const { return devices_; }
  const std::vector<SliceEntry>& slices() const { return slices_; }
  const std::vector<Group>& groups() const { return groups_; }
  const std::vector<Pool>& pools() const { return pools_; }
  const ClassEntry* FindClass(const std::string& name) const;
  // Slices with spec.nodeName == node.
  const std::vector<uint32_t>& SlicesOnNode(const std::string& node) const;
  // Slices with nodeSelector, allNodes or perDeviceNodeSelection.
  const std::vector<uint32_t>& SlicesNotOnOneNode() const { return other_slices_; }
  // Every device with this driver, pool and name (one per generation that has it, oldest
  // first). Found through the pools (sorted) and the pool's slices: an index of every device
  // by name cost ~180 bytes per device.
  std::vector<uint32_t> FindDevice(std::string_view driver, std::string_view pool,
                                   std::string_view device) const;
  // "driver/pool/device" of a device, as messages and the admin views name it.
  std::string DeviceId(const DeviceEntry& entry) const;
  std::shared_ptr<const cel::CompileResult> Compile(const std::string& expression) const;
  // Compiled regular expressions of `matches()` calls, shared by every evaluation.
  cel::RegexCache* regex_cache() const { return &regexes_; }

  // Per device (inventory order): the set of values of attribute `qualified` (a fully qualified
  // name, also found under the bare id in the driver's own domain), or nullopt when the device
  // lacks it. Computed on first use and kept; thread-safe.
  const std::vector<std::optional<AttrSet>>& AttributeSets(const std::string& qualified) const;

  // The cached result of a class's selectors for a device (evaluated on first use, thread-safe).
  // On kError, `error` receives the message.
  Match ClassMatches(const ClassEntry& cls, uint32_t device, std::string* error) const;

 private:
  Inventory() = default;

  std::vector<SliceEntry> slices_;
  std::vector<DeviceEntry> devices_;
  std::vector<Group> groups_;
  std::vector<Pool> pools_;
  std::map<std::string, ClassEntry> classes_;
  std::unordered_map<std::string, std::vector<uint32_t>> slices_by_node_;
  std::vector<uint32_t> other_slices_;
  // Device values by the shape of their slice (its driver and every device's attributes,
  // capacity and allowMultipleAllocations; names aside), so that a fleet of identical nodes
  // holds one set of values instead of one per node. Handed from each inventory to the next;
  // copied only when a shape is added, and at most kMaxShapes of them.
  struct ShapeEntry {
    SharedSlice slice;
    std::vector<cel::Value> values;
  };
  using ShapeCache = std::unordered_multimap<uint64_t, ShapeEntry>;
  static constexpr size_t kMaxShapes = 1024;
  std::shared_ptr<const ShapeCache> shapes_;
  cel::ProgramCache* programs_ = nullptr;
  std::unique_ptr<cel::ProgramCache> own_programs_;

  // Per class (by address of its ClassEntry): one Match per device.
  mutable std::unordered_map<const ClassEntry*, std::unique_ptr<std::atomic<uint8_t>[]>>
      class_memo_;
  mutable cel::RegexCache regexes_;
  mutable qm::Mutex attr_mu_;
  // A set, once built, is never changed or freed: AttributeSets hands out references.
  mutable std::map<std::string, std::unique_ptr<std::vector<std::optional<AttrSet>>>> attr_sets_
      ABSL_GUARDED_BY(attr_mu_);
  mutable qm::Mutex errors_mu_;
  mutable std::map<std::pair<const ClassEntry*, uint32_t>, std::string> class_errors_
      ABSL_GUARDED_BY(errors_mu_);
};

}  // namespace qm::allocator
