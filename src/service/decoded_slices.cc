#include "service/decoded_slices.h"

#include <functional>
#include <string_view>
#include <utility>

namespace qm::service {
namespace {

// Expired entries are dropped once this many have been added since the last sweep (and at
// least as many as there are entries, so sweeping stays linear overall).
constexpr size_t kSweepEvery = 4096;

}  // namespace

DecodedSlices& DecodedSlices::Shared() {
  static DecodedSlices* const shared = new DecodedSlices();
  return *shared;
}

absl::StatusOr<std::shared_ptr<const model::ResourceSlice>> DecodedSlices::Get(
    const model::Object& object, absl::FunctionRef<absl::StatusOr<model::ResourceSlice>()> decode) {
  // The body is part of the identity: tests (and a restored backup) may reuse a uid and
  // resourceVersion for other content.
  const size_t body_hash = std::hash<std::string_view>{}(object.body);
  const int64_t rv = object.meta.resource_version;
  {
    qm::MutexLock lock(&mu_);
    auto it = by_uid_.find(object.meta.uid);
    if (it != by_uid_.end() && it->second.resource_version == rv &&
        it->second.body_hash == body_hash) {
      if (auto held = it->second.slice.lock()) return held;
    }
  }
  absl::StatusOr<model::ResourceSlice> decoded = decode();
  if (!decoded.ok()) return decoded.status();
  // Not make_shared: an entry's weak pointer would keep the slice's storage.
  std::shared_ptr<const model::ResourceSlice> slice(new model::ResourceSlice(*std::move(decoded)));
  qm::MutexLock lock(&mu_);
  auto [it, inserted] = by_uid_.try_emplace(object.meta.uid);
  Entry& e = it->second;
  if (!inserted && e.resource_version == rv && e.body_hash == body_hash) {
    // Another reader decoded the same version meanwhile: share the one it keeps.
    if (auto held = e.slice.lock()) return held;
  }
  if (inserted || rv >= e.resource_version || e.slice.expired()) {
    e = Entry{rv, body_hash, slice};
  }
  if (++inserts_ >= kSweepEvery && inserts_ >= by_uid_.size()) {
    inserts_ = 0;
    std::erase_if(by_uid_, [](const auto& kv) { return kv.second.slice.expired(); });
  }
  return slice;
}

size_t DecodedSlices::live() const {
  qm::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [uid, e] : by_uid_) n += e.slice.expired() ? 0 : 1;
  return n;
}

}  // namespace qm::service
