#pragma once

// Decoded ResourceSlices shared by everything in this process that decodes them: the scheduler
// (one per slice change) and the admin views' inventory (InventoryCache). Without it each kept a
// copy of every slice; at 50,000 nodes x 8 devices the first DeviceMatchReview took the server
// from about 0.9 to 1.35 GB. A reader asks for the slice of an object; when another reader
// still holds the same version decoded, it gets that one, without parsing anything.

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "model/dra.h"
#include "model/object.h"

namespace qm::service {

// Thread-safe. Holds no slice alive by itself: an entry lasts as long as some reader keeps the
// slice.
class DecodedSlices {
 public:
  // The one instance of the process.
  static DecodedSlices& Shared();

  // The decoded slice of `object` (a ResourceSlice): one still held by another reader when it
  // decoded the same object (uid, resourceVersion and body), else what `decode` returns. Decode
  // errors are returned and not kept.
  absl::StatusOr<std::shared_ptr<const model::ResourceSlice>> Get(
      const model::Object& object,
      absl::FunctionRef<absl::StatusOr<model::ResourceSlice>()> decode);

  // Entries whose slice is still held (for tests).
  size_t live() const;

 private:
  struct Entry {
    int64_t resource_version = 0;
    size_t body_hash = 0;
    std::weak_ptr<const model::ResourceSlice> slice;
  };

  mutable qm::Mutex mu_;
  std::unordered_map<std::string, Entry> by_uid_ ABSL_GUARDED_BY(mu_);
  size_t inserts_ ABSL_GUARDED_BY(mu_) = 0;  // since the last sweep of expired entries
};

}  // namespace qm::service
