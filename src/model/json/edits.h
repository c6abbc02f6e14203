#pragma once

// The writes of the controllers that edit stored bodies (the scheduler and its claim
// controllers), as named operations on a Document: they set what Kubernetes' controllers set
// (conditions, spec.nodeName, claim allocations and consumers, pod claim statuses) and keep every
// other field as stored. Also the decoders those controllers use on the Documents they hold.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/core.h"
#include "model/dra.h"
#include "model/json/document.h"
#include "model/object.h"

namespace qm::model::json {

// --- Objects and their bodies ---

// The body of a stored object, parsed (an empty object when it is not a JSON object).
SharedDocument BodyOf(const Object& obj);

// `obj` with `body`, and the spec digest and field-selector values that go with it, computed as
// the REST codecs compute them.
Object WithBody(const Object& obj, const Document& body);
// The same for a body whose spec is `obj`'s (only status or metadata changed): keeps its spec
// digest instead of serializing and hashing the spec again.
Object WithStatus(const Object& obj, const Document& body);
// Both, keeping `body` with the object (Object::parsed) for the controllers the write travels
// to: `body` must not change afterwards (Documents are shared, an edit copies first).
Object WithBody(const Object& obj, SharedDocument body);
Object WithStatus(const Object& obj, SharedDocument body);

// The uids of an object's owners (metadata.ownerReferences).
std::vector<std::string> OwnerUids(const Object& obj);
// The metadata.ownerReferences text that makes `owner` (a pod) the controller of an object.
std::string PodControllerReference(const Object& owner);

// --- Decoders of held bodies ---

Pod DecodePod(const Document& body);
void DecodePodStatus(const Document& body, Pod& pod);
ResourceClaimStatus DecodeResourceClaimStatus(const Document& body);
StoredAllocation StoredAllocationOf(const Document& body);
NodeRelations NodeRelationsOf(const Document& body);
// A claim from its stored object's metadata and a body held for it.
absl::StatusOr<ResourceClaim> DecodeResourceClaim(const Object& obj, const Document& body);
// A claim body's status.allocation as dump() writes it (so equal allocations give equal text),
// "" without one (absent or null).
std::string AllocationText(const Document& claim);

// --- Status conditions (pods) ---

// Sets (or replaces) the condition of `type` in status.conditions; returns true when the status
// changed (the transition time moves only when the status does).
bool SetCondition(Document& body, const std::string& type, const std::string& status,
                  const std::string& reason, const std::string& message, const std::string& now);

// --- Pods ---

// spec.nodeName: the binding.
void SetNodeName(Document& pod, const std::string& node);

// `pod` with status.resourceClaimStatuses and status.extendedResourceClaimStatus as given (each
// where given); nullopt when the pod says so already.
std::optional<Document> WithPodClaimStatuses(
    const Document& pod, const std::optional<std::vector<PodResourceClaimStatus>>& statuses,
    const std::optional<ExtendedResourceClaimStatus>& extended);

// --- ResourceClaims ---

// status.allocation set to `allocation`, reserved for `consumer` alone.
void SetAllocation(Document& claim, const AllocationResult& allocation,
                   const ResourceClaimConsumerReference& consumer);
// `consumer` added to status.reservedFor unless an entry with its uid is there.
void ReserveFor(Document& claim, const ResourceClaimConsumerReference& consumer);
// status.reservedFor cut down to the entries at the positions `keep` lists, in that order
// (removed when none is kept); other fields of the entries stay as stored.
void KeepConsumers(Document& claim, const std::vector<size_t>& keep);
// status.allocation removed, with the drivers' status.devices that described it.
void Deallocate(Document& claim);

// A claim's body generated from a ResourceClaimTemplate's body: its spec.spec, and the labels and
// annotations of spec.metadata for the claim's metadata.
struct ClaimFromTemplate {
  Document body;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
};
ClaimFromTemplate ClaimBodyFromTemplate(const Document& template_body);

// One ExactCount request of a generated claim.
struct ExactCountRequest {
  std::string name;
  std::string device_class_name;
  int64_t count = 0;
};
// A claim's body with these requests (the claim for a pod's extended resources).
Document ClaimBodyWithRequests(const std::vector<ExactCountRequest>& requests);

}  // namespace qm::model::json
