#include "store/memory_store.h"

#include <algorithm>
#include <set>
#include <tuple>

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

absl::StatusOr<std::vector<model::Object>> MemoryStore::Commit(const Transaction& txn) {
  std::lock_guard<std::mutex> lock(mu_);
  // Check everything first, so that nothing is applied when anything fails.
  std::set<model::ResourceKey> touched;
  for (const Write& w : txn.writes) {
    model::ResourceKey key = w.kind == Write::Kind::kDelete ? w.key : w.object.Key();
    if (!touched.insert(key).second) {
      return absl::InvalidArgumentError("transaction writes " + key.name + " twice");
    }
    auto it = objects_.find(key);
    if (w.kind == Write::Kind::kCreate) {
      if (it != objects_.end()) {
        return absl::AlreadyExistsError(key.resource + " \"" + key.name + "\" already exists");
      }
    } else if (it == objects_.end()) {
      return NotFoundError(key);
    } else if (w.expected_rv != 0 && it->second.meta.resource_version != w.expected_rv) {
      return ConflictError(key);
    }
  }
  std::vector<DeviceClaim> ledger;
  for (const auto& row : device_claims_) {
    if (std::find(txn.release_claims.begin(), txn.release_claims.end(), row.claim_uid) ==
        txn.release_claims.end()) {
      ledger.push_back(row);
    }
  }
  for (const auto& row : txn.claim_devices) {
    for (const auto& held : ledger) {
      const bool same_device =
          held.driver == row.driver && held.pool == row.pool && held.device == row.device;
      if (!same_device) continue;
      if (held.share_id == row.share_id && held.claim_uid == row.claim_uid) {
        return absl::AlreadyExistsError("device " + row.driver + "/" + row.pool + "/" + row.device +
                                        " is already recorded for this claim");
      }
      if (row.share_id.empty() && !row.admin_access && held.share_id.empty() &&
          !held.admin_access) {
        return DeviceTakenError(row);
      }
    }
    ledger.push_back(row);
  }
  std::vector<model::Object> out;
  for (const Write& w : txn.writes) {
    model::ResourceKey key = w.kind == Write::Kind::kDelete ? w.key : w.object.Key();
    if (w.kind == Write::Kind::kDelete) {
      model::Object last = objects_[key];
      last.meta.resource_version = ++revision_;
      objects_.erase(key);
      AppendLocked(model::EventType::kDeleted, last);
      out.push_back(std::move(last));
      continue;
    }
    model::Object stored = w.object;
    stored.meta.resource_version = ++revision_;
    objects_[key] = stored;
    AppendLocked(
        w.kind == Write::Kind::kCreate ? model::EventType::kAdded : model::EventType::kModified,
        stored);
    out.push_back(std::move(stored));
  }
  std::sort(ledger.begin(), ledger.end(), [](const DeviceClaim& a, const DeviceClaim& b) {
    return std::tie(a.driver, a.pool, a.device, a.share_id, a.claim_uid) <
           std::tie(b.driver, b.pool, b.device, b.share_id, b.claim_uid);
  });
  RecordLedgerChangesLocked(ledger);
  device_claims_ = std::move(ledger);
  return out;
}

std::string MemoryStore::ClaimNamespaceLocked(const std::string& uid) {
  for (const auto& [key, obj] : objects_) {
    if (obj.meta.uid == uid) return key.namespace_;
  }
  for (auto it = history_.rbegin(); it != history_.rend(); ++it) {
    if (it->row.claim_uid == uid) return it->row.claim_namespace;
  }
  return "";
}

void MemoryStore::RecordLedgerChangesLocked(const std::vector<DeviceClaim>& next) {
  auto key = [](const DeviceClaim& r) {
    return std::tie(r.driver, r.pool, r.device, r.share_id, r.claim_uid);
  };
  auto record = [&](const DeviceClaim& r, int delta) {
    AllocationEvent e;
    e.id = ++history_id_;
    e.time = clock_.Now();
    e.row = AllocationRecord{r.driver,      r.pool,      r.device,
                             r.share_id,    r.claim_uid, ClaimNamespaceLocked(r.claim_uid),
                             r.admin_access};
    e.delta = delta;
    history_.push_back(std::move(e));
  };
  // Both lists are sorted by key: releases first, then bindings, as the transaction applies them.
  std::vector<const DeviceClaim*> added;
  size_t i = 0, j = 0;
  while (i < device_claims_.size() || j < next.size()) {
    if (j == next.size() || (i < device_claims_.size() && key(device_claims_[i]) < key(next[j]))) {
      record(device_claims_[i++], -1);
    } else if (i == device_claims_.size() || key(next[j]) < key(device_claims_[i])) {
      added.push_back(&next[j++]);
    } else {
      ++i;
      ++j;
    }
  }
  for (const DeviceClaim* r : added) record(*r, +1);
}

absl::StatusOr<AllocationHistory> MemoryStore::ReadAllocationHistory(
    std::chrono::system_clock::time_point since) {
  std::lock_guard<std::mutex> lock(mu_);
  AllocationHistory out;
  for (const auto& r : device_claims_) {
    out.current.push_back(AllocationRecord{r.driver, r.pool, r.device, r.share_id, r.claim_uid,
                                           ClaimNamespaceLocked(r.claim_uid), r.admin_access});
  }
  for (const auto& e : history_) {
    if (e.time > since) out.events.push_back(e);
  }
  std::stable_sort(out.events.begin(), out.events.end(),
                   [](const AllocationEvent& a, const AllocationEvent& b) {
                     return std::tie(a.time, a.id) < std::tie(b.time, b.id);
                   });
  return out;
}

absl::StatusOr<int64_t> MemoryStore::PruneAllocationHistory(
    std::chrono::system_clock::time_point before) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t size = history_.size();
  std::erase_if(history_, [&](const AllocationEvent& e) { return e.time < before; });
  return static_cast<int64_t>(size - history_.size());
}

absl::StatusOr<std::vector<DeviceClaim>> MemoryStore::ListDeviceClaims() {
  std::lock_guard<std::mutex> lock(mu_);
  return device_claims_;
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

int64_t MemoryStore::LastCommittedRevision() {
  auto rv = CurrentRevision();
  return rv.ok() ? *rv : 0;
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
