#pragma once

// What an object counts against ResourceQuota keys, computed from its stored hub-version body.
// One function for every place that counts: quota admission and status (service/quota.h) and
// the in-memory store's usage; the PostgreSQL store keeps the same counts with the SQL function
// qm_quota_usage (migrations/0005), which tests hold to this one.

#include <cstdint>
#include <map>
#include <string>

#include "model/object.h"

namespace qm::model::json {

// Usage by quota key of `obj` (a pod or a resource claim, by obj.resource):
//  * a pod that has not finished: `pods` and `count/pods`;
//  * a claim: `count/resourceclaims.resource.k8s.io` and, per device class, the devices it
//    requests (`<class>.deviceclass.resource.k8s.io/devices`; the largest subrequest of a
//    firstAvailable request; an All request counts nothing, its size is unknown until
//    allocation).
// Other kinds count nothing. Keys may map to 0.
std::map<std::string, int64_t> QuotaUsage(const Object& obj);

}  // namespace qm::model::json
