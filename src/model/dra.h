#pragma once

// Typed hub-version (resource.k8s.io/v1) DRA objects, as the allocator and the scheduler read
// them. The REST layer stores JSON bodies; model/json decodes them into these structs once per
// object version. Only the fields that take part in allocation are kept; everything else stays
// in the JSON body.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/flat_map.h"
#include "common/quantity.h"
#include "common/symbol.h"

namespace qm::model {

// --- core/v1 pieces -------------------------------------------------------------------------

struct NodeSelectorRequirement {
  std::string key;
  std::string op;  // In, NotIn, Exists, DoesNotExist, Gt, Lt
  std::vector<std::string> values;
  bool operator==(const NodeSelectorRequirement&) const = default;
};

struct NodeSelectorTerm {
  std::vector<NodeSelectorRequirement> match_expressions;
  std::vector<NodeSelectorRequirement> match_fields;
  bool operator==(const NodeSelectorTerm&) const = default;
};

// The terms are ORed; the requirements of one term are ANDed. No terms selects nothing.
struct NodeSelector {
  std::vector<NodeSelectorTerm> terms;
  bool operator==(const NodeSelector&) const = default;
};

// What node selection needs to know about a node.
struct NodeInfo {
  std::string name;
  std::map<std::string, std::string> labels;
};

// Kubernetes' nodeaffinity semantics: matchExpressions against labels (Gt/Lt compare integers),
// matchFields against `metadata.name` only.
bool NodeSelectorMatches(const NodeSelector& selector, const NodeInfo& node);

// --- resource.k8s.io/v1 ---------------------------------------------------------------------

struct Version {
  std::string value;
  bool operator==(const Version&) const = default;
};

// One attribute value; exactly one alternative is set (monostate: a value kind this version
// does not know, which makes the attribute unusable).
using AttributeValue =
    std::variant<std::monostate, int64_t, bool, std::string, Version, std::vector<int64_t>,
                 std::vector<bool>, std::vector<std::string>, std::vector<Version>>;

struct CapacityRange {
  Quantity min;
  std::optional<Quantity> max;
  std::optional<Quantity> step;
};

struct CapacityRequestPolicy {
  std::optional<Quantity> default_value;
  std::vector<Quantity> valid_values;
  std::optional<CapacityRange> valid_range;
};

struct DeviceCapacity {
  Quantity value;
  // Null when the capacity has none. Shared and immutable: few capacities have a policy, and
  // inline it would make every device's capacity entry five times larger.
  std::shared_ptr<const CapacityRequestPolicy> request_policy;
};

struct DeviceCounterConsumption {
  std::string counter_set;
  std::map<std::string, Quantity> counters;
};

struct CounterSet {
  std::string name;
  std::map<std::string, Quantity> counters;
};

struct DeviceTaint {
  std::string key;
  std::string value;
  std::string effect;  // None, NoSchedule, NoExecute (others are treated like None)
  std::string time_added;
  bool operator==(const DeviceTaint&) const = default;
};

struct DeviceToleration {
  std::string key;
  std::string op;  // "" (= Equal), Equal, Exists
  std::string value;
  std::string effect;  // "" = every effect
  std::optional<int64_t> toleration_seconds;
  bool operator==(const DeviceToleration&) const = default;
};

// True when `toleration` tolerates `taint` (dra/resourceclaim ToleratesTaint).
bool Tolerates(const DeviceToleration& toleration, const DeviceTaint& taint);

// Where a device may be used and when its allocation may bind: per-device node selection (only
// with slice.per_device_node_selection) and binding conditions. Few devices set any of these, so
// a Device holds them out of line (Device::binding).
struct DeviceBinding {
  std::string node_name;
  std::optional<NodeSelector> node_selector;
  bool all_nodes = false;
  bool binds_to_node = false;
  std::vector<std::string> binding_conditions;
  std::vector<std::string> binding_failure_conditions;

  // True when nothing is set (a device without any of these holds no DeviceBinding).
  bool Empty() const {
    return node_name.empty() && !node_selector.has_value() && !all_nodes && !binds_to_node &&
           binding_conditions.empty() && binding_failure_conditions.empty();
  }
};

struct Device {
  std::string name;
  // Keys as written in the slice: "productName" or "gpu.nvidia.com/productName". Sorted vectors
  // (FlatMap), not std::map: a fleet holds hundreds of thousands of devices, each with a handful
  // of entries, and a node per entry cost ~300 bytes a device more.
  // Names are Symbols: a fleet's devices repeat a few dozen names hundreds of thousands of times.
  FlatMap<Symbol, AttributeValue> attributes;
  FlatMap<Symbol, DeviceCapacity> capacity;
  std::vector<DeviceCounterConsumption> consumes_counters;
  std::vector<DeviceTaint> taints;
  // Null when the device sets none of its fields; shared and immutable (inline they made every
  // device 112 bytes larger). Read through Binding().
  std::shared_ptr<const DeviceBinding> binding;
  bool allow_multiple_allocations = false;

  const DeviceBinding& Binding() const;
};

struct ResourceSlice {
  std::string name;
  std::string driver;
  std::string pool;
  int64_t generation = 0;
  int64_t resource_slice_count = 1;
  std::string node_name;
  std::optional<NodeSelector> node_selector;
  bool all_nodes = false;
  bool per_device_node_selection = false;
  std::vector<Device> devices;
  std::vector<CounterSet> shared_counters;
  std::vector<std::string> skip_node_operations;
};

struct OpaqueConfig {
  std::string driver;
  std::string parameters;  // the JSON text of `parameters`
  bool operator==(const OpaqueConfig&) const = default;
};

struct DeviceClass {
  std::string name;
  std::vector<std::string> selectors;  // CEL expressions
  std::vector<OpaqueConfig> config;
  std::string extended_resource_name;
};

// DeviceTaintRule: one taint for every device its selector matches (empty fields match all).
struct DeviceTaintRule {
  std::string name;
  std::string driver;
  std::string pool;
  std::string device;
  DeviceTaint taint;
};

// The taint that marks a device unhealthy: node agents' health reports put it on the device
// (a DeviceTaintRule per device), and the utilization history counts the devices it covers.
inline constexpr char kUnhealthyTaintKey[] = "quartermaster.io/unhealthy";

// A source of that taint, as the health history records it (store::HealthEvent): a
// ResourceSlice device with such a taint of its own, or a DeviceTaintRule with that taint and its
// deviceSelector ("" where the selector leaves a field open, matching every device there).
struct UnhealthySource {
  std::string driver;
  std::string pool;
  std::string device;
  auto operator<=>(const UnhealthySource&) const = default;
};

inline constexpr std::string_view kAllocationModeExactCount = "ExactCount";
inline constexpr std::string_view kAllocationModeAll = "All";

// ExactDeviceRequest and DeviceSubRequest share everything but the name and adminAccess.
struct ExactDeviceRequest {
  std::string device_class_name;
  std::vector<std::string> selectors;  // CEL expressions
  std::string allocation_mode = "ExactCount";
  int64_t count = 1;
  bool admin_access = false;
  std::vector<DeviceToleration> tolerations;
  std::map<std::string, Quantity> capacity_requests;
};

struct DeviceSubRequest {
  std::string name;
  ExactDeviceRequest request;
};

struct DeviceRequest {
  std::string name;
  std::optional<ExactDeviceRequest> exactly;
  std::vector<DeviceSubRequest> first_available;
};

struct DeviceConstraint {
  std::vector<std::string> requests;
  std::string match_attribute;
  std::string distinct_attribute;
};

struct DeviceClaimConfiguration {
  std::vector<std::string> requests;
  OpaqueConfig opaque;
};

struct ResourceClaimSpec {
  std::vector<DeviceRequest> requests;
  std::vector<DeviceConstraint> constraints;
  std::vector<DeviceClaimConfiguration> config;
};

struct DeviceRequestAllocationResult {
  std::string request;
  std::string driver;
  std::string pool;
  std::string device;
  bool admin_access = false;
  std::vector<DeviceToleration> tolerations;
  std::vector<std::string> binding_conditions;
  std::vector<std::string> binding_failure_conditions;
  std::string share_id;
  std::map<std::string, Quantity> consumed_capacity;
  std::vector<std::string> skip_node_operations;
};

struct DeviceAllocationConfiguration {
  std::string source;  // FromClass, FromClaim
  std::vector<std::string> requests;
  OpaqueConfig opaque;
};

struct AllocationResult {
  std::vector<DeviceRequestAllocationResult> results;
  std::vector<DeviceAllocationConfiguration> config;
  std::optional<NodeSelector> node_selector;
};

struct ResourceClaim {
  std::string namespace_;
  std::string name;
  std::string uid;
  ResourceClaimSpec spec;
  std::optional<AllocationResult> allocation;
};

// What a ResourceClaim's stored body says of its allocation. Validation keeps undecodable
// allocations out, but a body written before a rule existed, by a newer version or straight
// into the database may hold one: callers must not take it for none.
struct StoredAllocation {
  bool present = false;                     // status.allocation is set
  std::optional<AllocationResult> decoded;  // present and it decodes
  std::string error;                        // present and why it does not decode
};

// The devices status.allocation.devices.results names, read leniently (for a claim whose
// allocation may not decode): each result's driver, pool and device as far as they are strings.
struct AllocatedRefs {
  struct Ref {
    std::string driver;
    std::string pool;
    std::string device;
    bool admin_access = false;
  };
  // status.allocation is there but its devices or results are not of the right JSON type (or
  // the body is not JSON): the allocation could hold anything.
  bool unreadable = false;
  std::vector<Ref> results;
};

// status.reservedFor[i]: a consumer of a claim.
struct ResourceClaimConsumerReference {
  std::string api_group;
  std::string resource;
  std::string name;
  std::string uid;
  bool operator==(const ResourceClaimConsumerReference&) const = default;
};

// What a claim's status says besides its allocation.
struct ResourceClaimStatus {
  // One entry per status.reservedFor element, in order (an element that is not an object reads
  // as an empty reference), so that an edit of the stored list can keep entries by position.
  std::vector<ResourceClaimConsumerReference> reserved_for;
  // A node agent reported some device prepared: a status.devices entry has the condition
  // Ready=True. Entries that failed to prepare hold nothing on the node.
  bool prepared = false;
};

}  // namespace qm::model
