#pragma once

// Stored objects (model::Object: metadata and body text, as the object cache keeps them) ->
// the typed model (model/core.h, model/dra.h, model/rbac.h), and the few writes the service
// makes to core objects it does not own (a quota's status, an Event). The core/v1 decoders read
// bodies the REST layer has already validated and defaulted, so they are lenient: a missing
// field, or one of the wrong JSON type, reads as absent. The DRA and RBAC decoders are those of
// dra_json.h and rbac_json.h, given the object's metadata. Only the REST codecs and the
// scheduler's pod and claim views hold JSON; the rest of the service reads these structs.

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/core.h"
#include "model/dra.h"
#include "model/object.h"
#include "model/rbac.h"
#include "nlohmann/json.hpp"

namespace qm::model::json {

// DRA and RBAC objects (dra_json.h, rbac_json.h).
absl::StatusOr<ResourceSlice> DecodeResourceSlice(const Object& slice);
absl::StatusOr<DeviceClass> DecodeDeviceClass(const Object& device_class);
absl::StatusOr<DeviceTaintRule> DecodeDeviceTaintRule(const Object& rule);
absl::StatusOr<Role> DecodeRole(const Object& role);
absl::StatusOr<RoleBinding> DecodeRoleBinding(const Object& binding);

// A DeviceTaintRule's name and spec.deviceSelector (driver, pool, device) as far as they are
// strings, for a rule that does not decode; no taint.
DeviceTaintRule DecodeDeviceTaintRuleSelector(const Object& rule);

// A Node: name and labels from the object's metadata, the rest from its body.
Node DecodeNode(const Object& node);

// A Pod from its stored body (hub JSON without metadata, as the object cache keeps it) or from
// the parsed body.
Pod DecodePod(const Object& pod);
Pod DecodePod(const nlohmann::json& body);
// The parts of a Pod that come from its status (phase, resourceClaimStatuses,
// extendedResourceClaimStatus), decoded into `pod` over what it held: DecodePod of a body whose
// spec is that of the body `pod` was decoded from gives the same.
void DecodePodStatus(const nlohmann::json& body, Pod& pod);

// A pod's spec.terminationGracePeriodSeconds (nullopt when unset or not an integer), as
// DecodePod reads it, without building the rest of the pod: deletion needs only this.
std::optional<int64_t> PodTerminationGracePeriodSeconds(const Object& pod);

// spec.hard of a ResourceQuota.
QuotaHard DecodeQuotaHard(const Object& quota);

// The quota's body with status.hard (spec.hard) and status.used (`used`, 0 for keys it lacks)
// set; "" when the stored status says exactly that already.
std::string QuotaBodyWithStatus(const Object& quota, const std::map<std::string, int64_t>& used);

// `base` (resource "events", metadata set) with the event's body and field-selector values.
Object EncodeEvent(const Event& event, Object base);

// What ties an object to nodes, from an object in the hub version's JSON (with metadata) or
// from a stored object.
NodeRelations NodeRelationsOf(const nlohmann::json& hub);
NodeRelations NodeRelationsOf(const Object& obj);
// The same for an object that may be absent (a create's old object, a delete's new one).
std::optional<NodeRelations> NodeRelationsOf(const nlohmann::json* hub);

// What a ResourceClaim's stored body says of its allocation, from its text or the parsed body. An
// allocation that is not an object does not decode: it could hold anything.
StoredAllocation DecodeStoredAllocation(const std::string& body);
StoredAllocation StoredAllocationOf(const nlohmann::json& body);

// status.reservedFor and the agents' status.devices of a ResourceClaim's body (hub JSON).
ResourceClaimStatus DecodeResourceClaimStatus(const nlohmann::json& body);

// The devices a ResourceClaim's stored body names in status.allocation, read leniently.
AllocatedRefs ReadAllocatedRefs(const std::string& body);

// The unhealthy sources a stored ResourceSlice or DeviceTaintRule holds, in order, without
// repeats (a rule holds at most one); none for other objects. Read leniently, as
// migrations/0015's triggers read the stored rows.
std::vector<UnhealthySource> UnhealthySourcesOf(const Object& obj);

// The JSON object text of a capacity map ({"memory":"10Gi"}), as the device ledger stores it.
std::string EncodeCapacityMap(const std::map<std::string, Quantity>& capacity);

}  // namespace qm::model::json
