#include "store/memory_store.h"

#include <algorithm>

namespace qm::store {
namespace {}  // namespace

void MemoryStore::AppendLocked(model::EventType type, const model::Object& obj) {
  log_.push_back(model::WatchEvent{type, obj});
  changed_.notify_all();
}

absl::StatusOr<model::Object> MemoryStore::Create(const model::Object& obj) {
  std::lock_guard<std::mutex> lock(mu_);
  model::ResourceKey key = obj.Key();
  if (objects_.count(key)) {
    return absl::AlreadyExistsError(key.resource + " \"" + key.name + "\" already exists");
  }
  model::Object stored = obj;
  stored.meta.resource_version = ++revision_;
  objects_[key] = stored;
  AppendLocked(model::EventType::kAdded, stored);
  return stored;
}

absl::StatusOr<model::Object> MemoryStore::Update(const model::Object& obj, int64_t expected_rv) {
  std::lock_guard<std::mutex> lock(mu_);
  model::ResourceKey key = obj.Key();
  auto it = objects_.find(key);
  if (it == objects_.end()) return NotFoundError(key);
  if (expected_rv != 0 && it->second.meta.resource_version != expected_rv)
    return ConflictError(key);
  model::Object stored = obj;
  stored.meta.resource_version = ++revision_;
  it->second = stored;
  AppendLocked(model::EventType::kModified, stored);
  return stored;
}

absl::StatusOr<model::Object> MemoryStore::Delete(const model::ResourceKey& key,
                                                  int64_t expected_rv) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return NotFoundError(key);
  if (expected_rv != 0 && it->second.meta.resource_version != expected_rv)
    return ConflictError(key);
  model::Object last = it->second;
  last.meta.resource_version = ++revision_;
  objects_.erase(it);
  AppendLocked(model::EventType::kDeleted, last);
  return last;
}

absl::StatusOr<model::Object> MemoryStore::Get(const model::ResourceKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return NotFoundError(key);
  return it->second;
}

absl::StatusOr<ListResult> MemoryStore::List(const ListOptions& options) {
  std::lock_guard<std::mutex> lock(mu_);
  ListResult result;
  result.resource_version = revision_;
  auto it = objects_.lower_bound(
      model::ResourceKey{options.resource, options.after_namespace, options.after_name});
  for (; it != objects_.end() && it->first.resource == options.resource; ++it) {
    const auto& key = it->first;
    if (!options.after_name.empty() && key.namespace_ == options.after_namespace &&
        key.name == options.after_name) {
      continue;
    }
    if (!options.namespace_.empty() && key.namespace_ != options.namespace_) continue;
    if (options.limit > 0 && static_cast<int64_t>(result.items.size()) == options.limit) {
      result.more = true;
      break;
    }
    result.items.push_back(it->second);
  }
  return result;
}

absl::StatusOr<ListResult> MemoryStore::ListAll() {
  std::lock_guard<std::mutex> lock(mu_);
  ListResult result;
  result.resource_version = revision_;
  result.items.reserve(objects_.size());
  for (const auto& [key, obj] : objects_) result.items.push_back(obj);
  return result;
}

absl::StatusOr<int64_t> MemoryStore::CurrentRevision() {
  std::lock_guard<std::mutex> lock(mu_);
  return revision_;
}

absl::StatusOr<std::vector<model::WatchEvent>> MemoryStore::ChangesSince(int64_t after_rv,
                                                                         int64_t limit) {
  std::lock_guard<std::mutex> lock(mu_);
  if (after_rv < compacted_through_) {
    return absl::OutOfRangeError("too old resource version: " + std::to_string(after_rv) + " (" +
                                 std::to_string(compacted_through_ + 1) + ")");
  }
  std::vector<model::WatchEvent> out;
  auto it = std::upper_bound(
      log_.begin(), log_.end(), after_rv,
      [](int64_t rv, const model::WatchEvent& e) { return rv < e.object.meta.resource_version; });
  for (; it != log_.end() && (limit <= 0 || static_cast<int64_t>(out.size()) < limit); ++it) {
    out.push_back(*it);
  }
  return out;
}

void MemoryStore::WaitForChanges(int64_t after_rv, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait_for(lock, timeout,
                    [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return revision_ > after_rv; });
}

absl::Status MemoryStore::Compact(int64_t through_rv) {
  std::lock_guard<std::mutex> lock(mu_);
  through_rv = std::min(through_rv, revision_ - 1);
  while (!log_.empty() && log_.front().object.meta.resource_version <= through_rv) {
    log_.pop_front();
  }
  compacted_through_ = std::max(compacted_through_, through_rv);
  return absl::OkStatus();
}

}  // namespace qm::store
