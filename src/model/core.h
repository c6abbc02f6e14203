#pragma once

// Typed core/v1 objects, as the service reads them: the parts of Node, Pod, ResourceQuota and
// Event that scheduling, admission, quota and node authorization act on. Like model/dra.h, the
// REST layer stores JSON bodies and model/json/stored.h decodes them into these structs; every
// field not listed here stays in the stored body, verbatim, and nothing in the service edits it.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/quantity.h"
#include "model/dra.h"

namespace qm::model {

// A node taint (effects NoSchedule, PreferNoSchedule, NoExecute).
struct Taint {
  std::string key;
  std::string value;
  std::string effect;
  // timeAdded (NoExecute taints): tolerationSeconds count from it; unset counts from now.
  std::optional<std::chrono::system_clock::time_point> time_added;
  bool operator==(const Taint&) const = default;
};

// A pod toleration.
struct Toleration {
  std::string key;
  std::string op;  // "" = Equal, Equal, Exists
  std::string value;
  std::string effect;  // "" = all effects
  // NoExecute only: how long the pod may stay once the taint is added (unset: forever).
  std::optional<int64_t> toleration_seconds;
  bool operator==(const Toleration&) const = default;
};

struct Node {
  std::string name;
  std::map<std::string, std::string> labels;
  bool unschedulable = false;  // spec.unschedulable: cordoned
  std::vector<Taint> taints;
  // The Ready condition's status is "True". A node without a Ready condition counts as ready
  // (one created by hand, before any agent reported on it).
  bool ready = true;
};

// spec.resourceClaims[i]: the claim a pod names, or the template its claim is made from.
struct PodResourceClaim {
  std::string name;
  std::string resource_claim_name;
  std::string resource_claim_template_name;
  bool operator==(const PodResourceClaim&) const = default;
};

// status.resourceClaimStatuses[i]: the claim generated for a template entry.
struct PodResourceClaimStatus {
  std::string name;
  std::string resource_claim_name;
  bool operator==(const PodResourceClaimStatus&) const = default;
};

// status.extendedResourceClaimStatus.requestMappings[]: which claim request serves a container's
// extended resource.
struct ContainerRequestMapping {
  std::string container_name;
  std::string resource_name;
  std::string request_name;
  bool operator==(const ContainerRequestMapping&) const = default;
};

// status.extendedResourceClaimStatus: the claim generated for a pod's extended resources.
struct ExtendedResourceClaimStatus {
  std::string resource_claim_name;
  std::vector<ContainerRequestMapping> request_mappings;
  bool operator==(const ExtendedResourceClaimStatus&) const = default;
};

// What a container asks for (spec.containers[].resources): its limits, and the requests of the
// resources without a limit, as written (a whole number becomes its decimal text; values of other
// types are left out).
struct ContainerResources {
  std::string name;
  std::map<std::string, std::string> amounts;
  bool operator==(const ContainerResources&) const = default;
};

struct Pod {
  std::string node_name;  // spec.nodeName: "" until bound
  int64_t priority = 0;   // spec.priority
  std::string phase;      // status.phase
  // spec.terminationGracePeriodSeconds; unset: Kubernetes' default of 30 s applies.
  std::optional<int64_t> termination_grace_period_seconds;
  std::map<std::string, std::string> node_selector;
  // spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
  std::optional<NodeSelector> required_affinity;
  std::vector<Toleration> tolerations;
  std::vector<PodResourceClaim> resource_claims;
  std::vector<PodResourceClaimStatus> resource_claim_statuses;
  // status.extendedResourceClaimStatus.resourceClaimName and .requestMappings
  std::string extended_resource_claim_name;
  std::vector<ContainerRequestMapping> extended_resource_request_mappings;
  std::vector<ContainerResources> containers;  // spec.containers, in order
  // The text of spec.nodeSelector, spec.affinity and spec.tolerations as stored: pods with the
  // same text are placed alike (the scheduler shares placement verdicts between them).
  std::string placement_signature;

  bool Terminal() const { return phase == "Succeeded" || phase == "Failed"; }
  // Kubernetes' default terminationGracePeriodSeconds, and the value deletion uses.
  static constexpr int64_t kDefaultGracePeriodSeconds = 30;
  int64_t GracePeriodSeconds() const;
};

// spec.hard of a ResourceQuota: each key with its limit, nullopt where the value is not a
// quantity (it limits nothing).
using QuotaHard = std::map<std::string, std::optional<Quantity>>;

// The object an Event is about (involvedObject).
struct ObjectReference {
  std::string kind;
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string api_version;
  std::string resource_version;  // "" when the event is not about one version
};

// A core/v1 Event as the service records one (count 1; first and last time the same).
struct Event {
  ObjectReference involved;
  std::string reason;
  std::string message;
  std::string type;       // Normal, Warning
  std::string component;  // source.component and reportingComponent
  std::string timestamp;  // RFC 3339: firstTimestamp and lastTimestamp
};

// What ties an object to nodes, for node authorization (service/node_restriction.h): its
// metadata.name, its spec.nodeName (pods, slices), and for a claim the nodes its allocation's
// node selector names one by one (metadata.name or kubernetes.io/hostname In exactly one value).
struct NodeRelations {
  std::string name;
  std::string spec_node_name;
  std::vector<std::string> allocated_nodes;
};

// The one node a claim's allocation is for; nullopt when none is named, or several different
// ones are (network-attached devices).
std::optional<std::string> AllocatedNode(const NodeRelations& claim);

}  // namespace qm::model
