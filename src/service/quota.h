#pragma once

// ResourceQuota (core/v1) for the kinds the scheduler manages: what a pod or a ResourceClaim
// counts against quota keys, the admission check Kubernetes' quota admission plugin makes when
// one is created, and the status.used the quota controller records. Pure functions: callers
// bring the quotas and the usage already counted in the namespace.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "model/object.h"

namespace qm::service {

// Usage by quota key ("pods" -> 1, "gpu.deviceclass.resource.k8s.io/devices" -> 2).
using QuotaAmounts = std::map<std::string, int64_t>;

// What `obj` (a pod or a resource claim, by obj.resource) counts against quota keys:
//  * a pod that has not finished: `pods` and `count/pods`;
//  * a claim: `count/resourceclaims.resource.k8s.io` and, per device class, the devices it
//    requests (`<class>.deviceclass.resource.k8s.io/devices`; the largest subrequest of a
//    firstAvailable request; an All request counts nothing, its size is unknown until
//    allocation).
// Other kinds count nothing.
QuotaAmounts QuotaUsage(const model::Object& obj);

// The hard limits of a ResourceQuota object (spec.hard), in whole units; keys whose quantity
// does not parse are left out.
QuotaAmounts QuotaHard(const model::Object& quota);

// OK, or PermissionDenied with Kubernetes' message (`pods "p" is forbidden: exceeded quota: q,
// requested: pods=1, used: pods=2, limited: pods=2`) when creating `obj` would take a key of one
// of `quotas` past its hard limit. `used` is the namespace's usage without `obj`.
absl::Status CheckQuota(const model::Object& obj, const std::vector<model::Object>& quotas,
                        const QuotaAmounts& used);

// The body of `quota` with status.hard = spec.hard and status.used = `used` for every hard key
// (0 when absent), or "" when its status already says so.
std::string QuotaStatusBody(const model::Object& quota, const QuotaAmounts& used);

}  // namespace qm::service
