#include "service/inventory_cache.h"

#include <algorithm>
#include <functional>

#include "model/json/stored.h"
#include "service/decode_failures.h"
#include "service/decoded_slices.h"
#include "spdlog/spdlog.h"

namespace qm::service {
namespace {

// The kinds the inventory is built from, in the order Refresh lists them.
const std::vector<std::string>& KindNames() {
  static const auto* names = new std::vector<std::string>{"resourceslices.resource.k8s.io",
                                                          "deviceclasses.resource.k8s.io",
                                                          "devicetaintrules.resource.k8s.io"};
  return *names;
}

uint64_t Mix(uint64_t h, uint64_t v) {
  // boost::hash_combine's mixing, widened to 64 bits.
  return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 12) + (h >> 4));
}

}  // namespace

InventoryCache::~InventoryCache() {
  {
    qm::MutexLock lock(&prewarm_mu_);
    stopping_ = true;
  }
  prewarm_cv_.SignalAll();
  if (prewarm_.joinable()) prewarm_.join();
}

void InventoryCache::StartPrewarming(std::chrono::milliseconds settle, std::chrono::minutes idle) {
  prewarm_ = std::thread([this, settle, idle] { PrewarmLoop(settle, idle); });
}

void InventoryCache::PrewarmLoop(std::chrono::milliseconds settle, std::chrono::minutes idle) {
  std::vector<int64_t> previous;
  while (true) {
    {
      qm::MutexLock lock(&prewarm_mu_);
      const auto deadline = std::chrono::steady_clock::now() + settle;
      while (!stopping_ && prewarm_cv_.WaitUntil(&prewarm_mu_, deadline)) {
      }
      if (stopping_) return;
    }
    auto revisions = objects_.LastChanges(KindNames());
    if (!revisions.ok()) continue;
    const bool settled = *revisions == previous;
    previous = *revisions;
    bool wanted = false;
    {
      qm::MutexLock lock(&mu_);
      wanted = snapshot_ != nullptr && *revisions != revisions_ &&
               std::chrono::steady_clock::now() - last_get_ < idle;
    }
    if (!settled || !wanted) continue;
    try {
      (void)Refresh(revisions);
    } catch (const std::exception& e) {
      spdlog::warn("inventory cache: building ahead failed: {}", e.what());
    }
  }
}

absl::StatusOr<std::shared_ptr<const InventorySnapshot>> InventoryCache::Get() {
  auto revisions = objects_.LastChanges(KindNames());
  {
    qm::MutexLock lock(&mu_);
    last_get_ = std::chrono::steady_clock::now();
    if (revisions.ok() && snapshot_ != nullptr && *revisions == revisions_) return snapshot_;
  }
  return Refresh(revisions);
}

absl::StatusOr<std::shared_ptr<const InventorySnapshot>> InventoryCache::Refresh(
    const absl::StatusOr<std::vector<int64_t>>& revisions) {
  // `revisions` were read before the listing below: a change in between leaves them older than
  // the snapshot, and the next Get lists again.
  const std::vector<int64_t> seen = revisions.ok() ? *revisions : std::vector<int64_t>{};
  std::vector<model::ObjectPtr> listed[3];
  uint64_t fingerprint = 0;
  for (int k = 0; k < 3; ++k) {
    ListRequest request;
    request.store.resource = KindNames()[k];
    auto r = objects_.ListCached(request);
    if (!r.ok()) return r.status();
    fingerprint = Mix(fingerprint, 0x51ed27 + k + r->items.size());
    for (const auto& o : r->items) {
      fingerprint = Mix(fingerprint, std::hash<std::string>{}(o->meta.namespace_));
      fingerprint = Mix(fingerprint, std::hash<std::string>{}(o->meta.name));
      fingerprint = Mix(fingerprint, static_cast<uint64_t>(o->meta.resource_version));
    }
    listed[k] = std::move(r->items);
  }
  qm::MutexLock lock(&mu_);
  if (snapshot_ != nullptr && fingerprint == fingerprint_) {
    revisions_ = seen;
    return snapshot_;
  }

  allocator::InventoryInput input;
  auto snapshot = std::make_shared<InventorySnapshot>();
  // Objects that do not decode are reported by the scheduler (DecodeFailed); the admin views
  // treat them as it does: slices and classes left out, a taint rule's fail-safe taint shown.
  std::map<model::ResourceKey, std::pair<int64_t, allocator::SharedSlice>> slices;
  for (const auto& listed_obj : listed[0]) {
    const model::Object& o = *listed_obj;
    model::ResourceKey key = o.Key();
    auto before = slices_.find(key);
    if (before != slices_.end() && before->second.first == o.meta.resource_version) {
      input.slices.emplace_back(before->second.second);
      slices.emplace(std::move(key), before->second);
    } else if (auto s = DecodedSlices::Shared().Get(
                   o, [&] { return model::json::DecodeResourceSlice(o); });
               s.ok()) {
      allocator::SharedSlice shared = *std::move(s);
      input.slices.emplace_back(shared);
      slices.emplace(std::move(key), std::make_pair(o.meta.resource_version, std::move(shared)));
    }
  }
  for (const auto& listed_obj : listed[1]) {
    const model::Object& o = *listed_obj;
    if (auto c = model::json::DecodeDeviceClass(o); c.ok()) {
      snapshot->class_names.push_back(o.meta.name);
      input.classes.push_back(std::move(*c));
    }
  }
  for (const auto& listed_obj : listed[2]) {
    const model::Object& o = *listed_obj;
    if (auto r = model::json::DecodeDeviceTaintRule(o); r.ok()) {
      input.taint_rules.push_back(std::move(*r));
    } else {
      input.taint_rules.push_back(FailSafeTaintRule(o));
    }
  }
  std::sort(snapshot->class_names.begin(), snapshot->class_names.end());
  snapshot->inventory = allocator::Inventory::Build(
      std::move(input), &programs_, snapshot_ != nullptr ? snapshot_->inventory.get() : nullptr);
  snapshot_ = std::move(snapshot);
  slices_ = std::move(slices);
  fingerprint_ = fingerprint;
  revisions_ = seen;
  ++builds_;
  return snapshot_;
}

uint64_t InventoryCache::builds() const {
  qm::MutexLock lock(&mu_);
  return builds_;
}

}  // namespace qm::service
