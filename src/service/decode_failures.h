#pragma once

// Stored objects whose bodies do not decode: written before a validation rule existed, by a
// newer version, or straight into the database. Whoever reads them must not drop them silently.
// Each object version is logged once (name, resourceVersion, reason), counted by resource for
// /metrics, and reported on the object with a Warning Event (reason DecodeFailed), which
// `kubectl describe` shows.

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "allocator/inventory.h"
#include "common/mutex.h"
#include "model/object.h"

namespace qm::service {

inline constexpr char kDecodeFailedReason[] = "DecodeFailed";
// The taint a DeviceTaintRule that does not decode puts on the devices it may select.
inline constexpr char kUndecodableRuleTaint[] = "quartermaster.io/undecodable-taint-rule";

class DecodeFailures {
 public:
  // Records that `obj`, at its resourceVersion, does not decode because of `reason`. The first
  // time for this object version it logs a warning, counts it and returns true (the caller then
  // writes the Event); later calls for the same version return false. Thread-safe.
  bool Note(const model::Object& obj, const std::string& reason);

  // Object versions counted so far, by storage resource ("resourceclaims.resource.k8s.io").
  std::map<std::string, uint64_t> Counts() const;

 private:
  mutable qm::Mutex mu_;
  // The last version noted per object: (uid, resourceVersion).
  std::map<model::ResourceKey, std::pair<std::string, int64_t>> seen_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> counts_ ABSL_GUARDED_BY(mu_);
};

// The Warning Event (reason DecodeFailed) about `obj`, ready to create: in the object's
// namespace ("default" for cluster-scoped objects, as Kubernetes does), named after the object
// and its resourceVersion so that several replicas reporting the same version create it once
// (the others get AlreadyExists).
model::Object DecodeFailedEvent(const model::Object& obj, const std::string& message,
                                std::chrono::system_clock::time_point now,
                                const std::string& component, const std::string& uid);

// The devices a claim's status.allocation may hold when it does not decode, so that they are
// never taken for free: each result whose driver, pool and device can be read, as a whole
// device (which blocks its shares and counts its counters too); every device of the pool of a
// result whose device cannot be read; every device of `inventory` when the allocation, its
// results or a result's driver or pool cannot be read. An allocation without results holds
// nothing. `body` is the claim's stored body.
std::vector<allocator::AllocatedDevice> DevicesPossiblyHeld(const std::string& body,
                                                            const allocator::Inventory& inventory);

// What a DeviceTaintRule that does not decode does instead of nothing (`o` is its stored
// object): it keeps new work off every device it may select with kUndecodableRuleTaint=<rule
// name>:NoSchedule (never NoExecute: nothing is evicted for a broken object). A selector field
// that is not a string counts as absent, which in Kubernetes selects every value, so the taint
// covers at least the devices the rule meant. The scheduler and the admin views both apply it.
model::DeviceTaintRule FailSafeTaintRule(const model::Object& o);

}  // namespace qm::service
