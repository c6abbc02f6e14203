#include "service/graceful_deletion.h"

#include <algorithm>

#include "model/json/stored.h"

namespace qm::service {

int64_t DefaultGracePeriodSeconds(const model::Object& obj) {
  if (obj.resource != "pods") return 0;
  model::Pod pod;
  pod.termination_grace_period_seconds = model::json::PodTerminationGracePeriodSeconds(obj);
  return pod.GracePeriodSeconds();
}

bool MarkForDeletion(model::ObjectMeta& meta, std::chrono::system_clock::time_point now,
                     int64_t grace_seconds) {
  grace_seconds = std::max<int64_t>(0, grace_seconds);
  // Stored with second precision, as creationTimestamp.
  const auto at =
      std::chrono::time_point_cast<std::chrono::seconds>(now) + std::chrono::seconds(grace_seconds);
  if (meta.deletion_timestamp.has_value() && *meta.deletion_timestamp <= at) return false;
  meta.deletion_timestamp = at;
  meta.deletion_grace_period_seconds = grace_seconds;
  return true;
}

bool HasFinalizer(const model::ObjectMeta& meta, const char* finalizer) {
  return std::find(meta.finalizers.begin(), meta.finalizers.end(), finalizer) !=
         meta.finalizers.end();
}

bool RemoveFinalizer(model::ObjectMeta& meta, const char* finalizer) {
  auto it = std::remove(meta.finalizers.begin(), meta.finalizers.end(), finalizer);
  if (it == meta.finalizers.end()) return false;
  meta.finalizers.erase(it, meta.finalizers.end());
  return true;
}

}  // namespace qm::service
