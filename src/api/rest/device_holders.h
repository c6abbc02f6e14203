#pragma once

// DeviceHolderReview (admin.quartermaster.io/v1alpha1, create-only, like SubjectAccessReview):
// who holds which devices now, for the devices of the pools asked for, without the caller
// reading every ResourceClaim (Kubernetes has no field selector that finds the claims holding
// given devices):
//   POST /apis/admin.quartermaster.io/v1alpha1/deviceholderreviews
//     spec.pools[] {driver, pool} (at most 1000; absent or empty: every held device) in;
//     201 with status.devices[] (driver, pool, device, holders[]: claim {namespace, name, uid},
//     request, shareID, consumedCapacity, adminAccess, consumers [{resource, name, uid}] (the
//     claim's status.reservedFor), claimCreationTimestamp, nodeName (the node the allocation's
//     node selector names, when it names one)), sorted by driver, pool, device, and
//     status.heldDevices out. Nothing is stored.
//     With spec.deviceClassName: the claims whose requests name that class (exactly, or a
//     firstAvailable subrequest), allocated or not: the first spec.limit of them (default 500,
//     at most 5000, like DeviceMatchReview; only with a class) in status.claims[] {namespace,
//     name, uid, allocated} (by namespace and name), how many name it in status.claimCount,
//     status.claimsTruncated when claims were left out, and in status.devices only the devices
//     the listed claims hold (in spec.pools, when given): what a class's delete confirmation
//     warns about, without the caller reading every claim.
// The holders come from an index of the claims kept from the watch hub's change feed by one
// in-process watcher (started by the first review with one list of the claims; a claim's JSON
// parsed when it is first seen, for its classes, which do not change, and then once per change
// of it while it is allocated), so a review costs no list; like a list it shows every write this
// process has committed.

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "api/rest/rest_api.h"
#include "common/mutex.h"
#include "nlohmann/json.hpp"
#include "service/object_service.h"
#include "service/watch_hub.h"

namespace qm::api {

inline constexpr char kDeviceHolderResource[] = "deviceholderreviews";
inline constexpr char kDeviceHolderKind[] = "DeviceHolderReview";

class HolderIndex;

// Thread-safe.
class DeviceHolders {
 public:
  DeviceHolders(service::ObjectService& objects, service::WatchHub& hub)
      : objects_(objects), hub_(hub) {}
  ~DeviceHolders();

  // The review's answer (201), or 422 with field paths for a malformed spec. `body` is a JSON
  // object, already checked for unknown fields.
  HttpResponse Review(const nlohmann::json& body);

 private:
  absl::StatusOr<std::shared_ptr<HolderIndex>> Index();

  service::ObjectService& objects_;
  service::WatchHub& hub_;
  qm::Mutex mu_;
  std::shared_ptr<HolderIndex> index_ ABSL_GUARDED_BY(mu_);
};

}  // namespace qm::api
