#pragma once

// JSON <-> typed DRA model (model/dra.h) for objects in the hub version resource.k8s.io/v1.
// Decoding reads bodies the REST layer has already validated and defaulted, so it is lenient:
// absent fields take their Kubernetes defaults; only values that cannot be represented (a
// malformed quantity, a wrong JSON type) are errors, InvalidArgument naming the field path.

#include <string>

#include "absl/status/statusor.h"
#include "model/dra.h"
#include "nlohmann/json.hpp"

namespace qm::model::json {

// Each takes the whole object (metadata + spec [+ status]).
absl::StatusOr<ResourceSlice> DecodeResourceSlice(const nlohmann::json& object);
absl::StatusOr<DeviceClass> DecodeDeviceClass(const nlohmann::json& object);
absl::StatusOr<DeviceTaintRule> DecodeDeviceTaintRule(const nlohmann::json& object);
absl::StatusOr<ResourceClaim> DecodeResourceClaim(const nlohmann::json& object);
// A core/v1 Node: name and labels.
absl::StatusOr<NodeInfo> DecodeNodeInfo(const nlohmann::json& object);

// A claim spec (spec of a ResourceClaim, spec.spec of a ResourceClaimTemplate).
absl::StatusOr<ResourceClaimSpec> DecodeResourceClaimSpec(const nlohmann::json& spec,
                                                          const std::string& path);
absl::StatusOr<AllocationResult> DecodeAllocationResult(const nlohmann::json& allocation,
                                                        const std::string& path);
absl::StatusOr<NodeSelector> DecodeNodeSelector(const nlohmann::json& selector,
                                                const std::string& path);

// The v1 wire form of status.allocation (empty lists and false flags omitted).
nlohmann::json EncodeAllocationResult(const AllocationResult& allocation);
nlohmann::json EncodeNodeSelector(const NodeSelector& selector);
nlohmann::json EncodeToleration(const DeviceToleration& toleration);

}  // namespace qm::model::json
