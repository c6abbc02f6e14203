#pragma once

// Graceful deletion of pods, as Kubernetes does it, with qm-agent in the kubelet's place.
//
// A pod whose devices an agent prepared carries the finalizer kDevicesPreparedFinalizer (added
// by the agent API when the agent reports the pod's claim prepared). Deleting it then only marks
// it: metadata.deletionTimestamp = now + the grace period (the request's gracePeriodSeconds, else
// the pod's spec.terminationGracePeriodSeconds), metadata.deletionGracePeriodSeconds = the grace
// period; watchers see MODIFIED. The scheduler's claim controller drops the pod from its claims'
// reservedFor, so the agent unprepares them; once none of the pod's claims is prepared any more
// for it (or its node is unreachable and the deletion timestamp has passed) the controller
// removes the finalizer and the pod goes (DELETED). A delete with gracePeriodSeconds 0
// (`kubectl delete --force --grace-period=0`) removes the finalizer at once. Pods without the
// finalizer (no agent, nothing prepared yet) go at once, as before.

#include <chrono>
#include <cstdint>
#include <optional>

#include "model/object.h"

namespace qm::service {

// The finalizer of a pod whose devices an agent holds prepared.
inline constexpr char kDevicesPreparedFinalizer[] = "quartermaster.io/devices-prepared";

// The grace period a deletion without gracePeriodSeconds gets: a pod's
// spec.terminationGracePeriodSeconds (30 when absent or unreadable), 0 for any other object.
int64_t DefaultGracePeriodSeconds(const model::Object& obj);

// Marks `meta` for deletion `grace_seconds` from `now` (negative counts as 0). An object already
// marked keeps its mark unless the new grace period ends earlier (Kubernetes shortens, never
// lengthens). Returns whether `meta` changed.
bool MarkForDeletion(model::ObjectMeta& meta, std::chrono::system_clock::time_point now,
                     int64_t grace_seconds);

// Removes `finalizer` from `meta`; returns whether it was there.
bool RemoveFinalizer(model::ObjectMeta& meta, const char* finalizer);
bool HasFinalizer(const model::ObjectMeta& meta, const char* finalizer);

}  // namespace qm::service
