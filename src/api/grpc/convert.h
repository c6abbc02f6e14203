#pragma once

// The node-agent API's messages (proto/qm/agent/v1/agent.proto) and the API objects' hub-version
// JSON: the one place where they meet. Nothing here validates; the REST validation runs on what
// these functions produce, so a gRPC write is held to exactly the rules of a REST write.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "qm/agent/v1/agent.pb.h"

namespace qm::api::nodeapi {

namespace v1 = ::qm::agent::v1;

// The spec.devices and spec.sharedCounters of a ResourceSlice (resource.k8s.io/v1) for one
// published slice. An attribute without a value becomes `{}`, which validation refuses.
nlohmann::json SliceDevicesJson(const v1::Slice& slice);

// A whole ResourceSlice object (apiVersion, kind, metadata.name, spec) for `slice` as slice
// `name` of pool `pool` (generation, slice count) of `driver` on `node`.
nlohmann::json SliceJson(const v1::Slice& slice, const std::string& name, const std::string& node,
                         const std::string& driver, const std::string& pool, int64_t generation,
                         int64_t slice_count);

// The name of slice `index` of `count` of pool `pool`: "<node>-<driver>" for the usual single
// slice of the pool named after the node (the name the seed inventories use), otherwise
// "<node>-<driver>-<pool>[-<index>]" with characters a name cannot hold replaced by '-'.
std::string SliceName(const std::string& node, const std::string& driver, const std::string& pool,
                      size_t index, size_t count);

// Identifies one allocation of a claim: a hash of the claim's uid and its status.allocation, so
// it changes when the claim is deallocated and allocated anew (even to the same devices: a new
// allocation must be prepared again).
std::string AllocationId(const std::string& uid, const nlohmann::json& allocation);

// What a node must do for one claim.
struct ClaimAssignment {
  std::string node;
  v1::Assignment assignment;  // every driver's results and configs
};

// The assignment of a ResourceClaim (its body as stored: spec and status, hub version): set when
// status.allocation names exactly one node and status.reservedFor has at least one consumer.
std::optional<ClaimAssignment> AssignmentOf(const std::string& namespace_, const std::string& name,
                                            const std::string& uid, const nlohmann::json& body);

// The allocation id an assignment of the claim would have (AllocationId of its
// status.allocation), or nullopt where the body gives no assignment for lack of an allocation
// object or of consumers. Equal ids mean equal allocations, so equal devices, configs and node:
// an assignment with this id needs SetConsumers only.
std::optional<std::string> AssignmentAllocationId(const std::string& uid,
                                                  const nlohmann::json& body);
// Replaces the assignment's consumers with the pods of the body's status.reservedFor.
void SetConsumers(const nlohmann::json& body, v1::Assignment& assignment);

// False when a claim body's text (as stored: compact JSON, keys unescaped) cannot give an
// assignment because it has no "allocation" or no "reservedFor" member anywhere: such a body
// need not be parsed (most claim changes are of claims not yet allocated).
bool MayHaveAssignment(std::string_view body_text);

// `assignment` restricted to `drivers` (empty: all): nullopt when no device of theirs is left.
std::optional<v1::Assignment> ForDrivers(const v1::Assignment& assignment,
                                         const std::vector<std::string>& drivers);

}  // namespace qm::api::nodeapi
