#pragma once

#include <functional>

// ResourceQuota (core/v1) for the kinds the scheduler manages: what a pod or a ResourceClaim
// counts against quota keys, the admission check Kubernetes' quota admission plugin makes when
// one is created, and the status.used the quota controller records. Pure functions (callers
// bring the quotas and the usage already counted in the namespace), and the admission of a
// create over a Store that every API path shares (CreateWithinQuota).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/object.h"
#include "store/store.h"

namespace qm::service {

// Usage by quota key ("pods" -> 1, "gpu.deviceclass.resource.k8s.io/devices" -> 2).
using QuotaAmounts = std::map<std::string, int64_t>;

// What `obj` (a pod or a resource claim, by obj.resource) counts against quota keys:
//  * a pod that has not finished: `pods` and `count/pods`;
//  * a claim: `count/resourceclaims.resource.k8s.io` and, per device class, the devices it
//    requests (`<class>.deviceclass.resource.k8s.io/devices`; the largest subrequest of a
//    firstAvailable request; an All request counts nothing, its size is unknown until
//    allocation).
// Other kinds count nothing. The stores count the same (model::json::QuotaUsage).
QuotaAmounts QuotaUsage(const model::Object& obj);

// The hard limits of a ResourceQuota object (spec.hard), in whole units; keys whose quantity
// does not parse are left out.
QuotaAmounts QuotaHard(const model::Object& quota);

// OK, or PermissionDenied with Kubernetes' message (`pods "p" is forbidden: exceeded quota: q,
// requested: pods=1, used: pods=2, limited: pods=2`) when creating `obj` would take a key of one
// of `quotas` past its hard limit. `used` is the namespace's usage without `obj`.
absl::Status CheckQuota(const model::Object& obj, const std::vector<model::ObjectPtr>& quotas,
                        const QuotaAmounts& used);

// The body of `quota` with status.hard = spec.hard and status.used = `used` for every hard key
// (0 when absent), or "" when its status already says so.
std::string QuotaStatusBody(const model::Object& quota, const QuotaAmounts& used);

// What the store must check, in the transaction that creates `obj`, so that the create passes no
// hard limit of `quotas` whatever else commits first: for each key `obj` requests (amount > 0)
// that a quota limits, a check that the namespace's usage, `obj` counted, stays within that
// quota's limit (in whole units: a fractional limit is rounded down, no count reaches its
// fraction). Empty when no quota limits anything `obj` requests.
std::vector<store::QuotaCheck> QuotaChecks(const model::Object& obj,
                                           const std::vector<model::ObjectPtr>& quotas);

// Lists the ResourceQuotas of a namespace from a cache (ObjectService::ListCached).
using CachedQuotas =
    std::function<absl::StatusOr<std::vector<model::ObjectPtr>>(const std::string& ns)>;

// Quota admission of a create, atomic with the write and failing closed, for every API path:
// stores `obj` (metadata complete) unless that would pass a hard limit of a ResourceQuota in its
// namespace. The create commits in one transaction with its QuotaChecks, so that of concurrent
// creates on any number of replicas only those that fit commit. The quotas come from `cached`
// when given, and the transaction then also states what it saw (a store::QuotaSetCheck): when
// the namespace's quotas in the store differ (one the cache does not show yet), they are read
// from the store itself and the create is tried again, so a lagging cache never lets a create
// pass a quota; without `cached` they are read from the store. A refusal is PermissionDenied
// with Kubernetes' message, computed from the usage the store holds then. When the quotas or
// the usage cannot be read, that error is returned and nothing is written. Objects no quota
// counts are created as Store::Create does.
absl::StatusOr<model::Object> CreateWithinQuota(store::Store& store, const model::Object& obj,
                                                const CachedQuotas& cached = nullptr);

// The admission decision of CreateWithinQuota without the write (dry run): OK, the
// PermissionDenied refusal, or the error that kept the quotas or the usage from being read.
absl::Status CheckQuotaNow(store::Store& store, const model::Object& obj);

}  // namespace qm::service
