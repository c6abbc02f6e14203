#include "store/memory_store.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <tuple>

#include "common/status.h"
#include "model/json/quota_usage.h"
#include "model/json/stored.h"

namespace qm::store {
namespace {

constexpr char kClaims[] = "resourceclaims.resource.k8s.io";

// A device's ledger key.
using DeviceKey = std::tuple<std::string, std::string, std::string>;  // driver, pool, device

DeviceKey KeyOf(const DeviceClaim& row) { return {row.driver, row.pool, row.device}; }

// The charges of `row` of one kind.
std::vector<DeviceCharge> ChargesOf(const DeviceClaim& row, DeviceCharge::Kind kind) {
  std::vector<DeviceCharge> out;
  for (const auto& c : row.charges) {
    if (c.kind == kind) out.push_back(c);
  }
  return out;
}

// As the PostgreSQL store's usage rows (migrations/0005) see it: every share's capacity charges
// add up per device; a device's counter charges (those of the row that took it first) count
// once per pool counter. `added` are the rows this transaction inserts, last in `ledger`.
absl::Status CheckCharges(const std::vector<DeviceClaim>& ledger,
                          const std::map<DeviceKey, std::vector<DeviceCharge>>& holds,
                          const std::vector<DeviceClaim>& added) {
  using UsageKey = std::tuple<std::string, std::string, std::string, std::string>;
  std::map<UsageKey, Quantity> capacity;  // driver, pool, device, capacity
  for (const auto& row : ledger) {
    if (row.admin_access) continue;
    for (const auto& c : ChargesOf(row, DeviceCharge::Kind::kCapacity)) {
      auto& used = capacity[{row.driver, row.pool, c.owner, c.name}];
      used = used + c.amount;
    }
  }
  std::map<UsageKey, Quantity> counters;  // driver, pool, counter set, counter
  for (const auto& [device, charges] : holds) {
    for (const auto& c : charges) {
      auto& used = counters[{std::get<0>(device), std::get<1>(device), c.owner, c.name}];
      used = used + c.amount;
    }
  }
  for (const auto& row : added) {
    if (row.admin_access) continue;
    for (const auto& c : row.charges) {
      const auto& usage = c.kind == DeviceCharge::Kind::kCapacity ? capacity : counters;
      auto used = usage.find({row.driver, row.pool, c.owner, c.name});
      if (used != usage.end() && used->second > c.limit) return DeviceOvercommittedError(row);
    }
  }
  return absl::OkStatus();
}

}  // namespace

void MemoryStore::AppendLocked(model::EventType type, const model::Object& obj) {
  log_.push_back(model::WatchEvent{type, obj});
  changed_.SignalAll();
  std::vector<model::UnhealthySource> next;
  if (type != model::EventType::kDeleted) next = model::json::UnhealthySourcesOf(obj);
  auto it = unhealthy_.find(obj.Key());
  if (it == unhealthy_.end() && next.empty()) return;
  const std::vector<model::UnhealthySource> none;
  const auto& before = it == unhealthy_.end() ? none : it->second;
  auto record = [&](const model::UnhealthySource& s, int delta) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    health_history_.push_back(
        HealthEvent{++history_id_, clock_.Now(), s.driver, s.pool, s.device, delta});
  };
  // Both are sorted: what went first, then what came.
  std::vector<model::UnhealthySource> gone, came;
  std::set_difference(before.begin(), before.end(), next.begin(), next.end(),
                      std::back_inserter(gone));
  std::set_difference(next.begin(), next.end(), before.begin(), before.end(),
                      std::back_inserter(came));
  for (const auto& s : gone) record(s, -1);
  for (const auto& s : came) record(s, +1);
  if (next.empty()) {
    unhealthy_.erase(it);
  } else {
    unhealthy_[obj.Key()] = std::move(next);
  }
}

absl::StatusOr<model::Object> MemoryStore::Create(const model::Object& obj) {
  qm::MutexLock lock(&mu_);
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
  qm::MutexLock lock(&mu_);
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
  qm::MutexLock lock(&mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return NotFoundError(key);
  if (expected_rv != 0 && it->second.meta.resource_version != expected_rv)
    return ConflictError(key);
  model::Object last = it->second;
  last.meta.resource_version = ++revision_;
  objects_.erase(it);
  AppendLocked(model::EventType::kDeleted, last);
  if (key.resource == kClaims) ReleaseLocked(last.meta.uid);
  if (key.resource == "nodes") node_leases_.erase(key.name);
  return last;
}

void MemoryStore::ReleaseLocked(const std::string& claim_uid) {
  std::vector<DeviceClaim> next = device_claims_;
  std::erase_if(next, [&](const DeviceClaim& row) { return row.claim_uid == claim_uid; });
  RecordLedgerChangesLocked(next);
  device_claims_ = std::move(next);
  std::set<DeviceKey> held;
  for (const auto& row : device_claims_) {
    if (!row.admin_access) held.insert(KeyOf(row));
  }
  std::erase_if(counter_holds_, [&](const auto& hold) { return !held.contains(hold.first); });
}

absl::StatusOr<std::vector<model::Object>> MemoryStore::Commit(const Transaction& txn) {
  qm::MutexLock lock(&mu_);
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
  for (const QuotaSetCheck& check : txn.quota_sets) {
    int64_t count = 0, newest = 0;
    for (auto it = objects_.lower_bound({"resourcequotas", check.namespace_, ""});
         it != objects_.end() && it->first.resource == "resourcequotas" &&
         it->first.namespace_ == check.namespace_;
         ++it) {
      ++count;
      newest = std::max(newest, it->second.meta.resource_version);
    }
    if (count != check.count || newest != check.newest) return QuotaSetChangedError(check);
  }
  // A claim deleted here takes its ledger rows with it, as if released.
  std::set<std::string> released(txn.release_claims.begin(), txn.release_claims.end());
  for (const Write& w : txn.writes) {
    if (w.kind != Write::Kind::kDelete || w.key.resource != kClaims) continue;
    released.insert(objects_.at(w.key).meta.uid);
  }
  std::vector<DeviceClaim> ledger;
  for (const auto& row : device_claims_) {
    if (!released.contains(row.claim_uid)) ledger.push_back(row);
  }
  std::vector<DeviceClaim> added;
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
    added.push_back(row);
  }
  // Counters: a device whose last row went keeps them no longer; one that gains its first row
  // takes them.
  std::map<DeviceKey, std::vector<DeviceCharge>> holds;
  for (const auto& row : ledger) {
    if (row.admin_access) continue;
    auto held = counter_holds_.find(KeyOf(row));
    if (held != counter_holds_.end()) holds.insert(*held);
  }
  for (const auto& row : added) {
    auto counters = ChargesOf(row, DeviceCharge::Kind::kCounter);
    if (!row.admin_access && !counters.empty()) holds.try_emplace(KeyOf(row), std::move(counters));
  }
  QM_RETURN_IF_ERROR(CheckCharges(ledger, holds, added));
  if (!txn.quota_checks.empty()) {
    // The namespaces' usage as it will be once the writes are applied.
    std::map<std::string, std::map<std::string, int64_t>> used;
    for (const auto& check : txn.quota_checks) {
      if (!used.contains(check.namespace_))
        used[check.namespace_] = QuotaUsedLocked(check.namespace_);
    }
    for (const Write& w : txn.writes) {
      const model::ResourceKey key = w.kind == Write::Kind::kDelete ? w.key : w.object.Key();
      auto ns = used.find(key.namespace_);
      if (ns == used.end()) continue;
      if (auto it = objects_.find(key); it != objects_.end()) {
        for (const auto& [k, n] : model::json::QuotaUsage(it->second)) ns->second[k] -= n;
      }
      if (w.kind != Write::Kind::kDelete) {
        for (const auto& [k, n] : model::json::QuotaUsage(w.object)) ns->second[k] += n;
      }
    }
    for (const auto& check : txn.quota_checks) {
      if (used[check.namespace_][check.key] > check.hard) return QuotaCheckError(check);
    }
  }
  std::vector<model::Object> out;
  for (const Write& w : txn.writes) {
    model::ResourceKey key = w.kind == Write::Kind::kDelete ? w.key : w.object.Key();
    if (w.kind == Write::Kind::kDelete) {
      model::Object last = objects_[key];
      last.meta.resource_version = ++revision_;
      objects_.erase(key);
      if (key.resource == "nodes") node_leases_.erase(key.name);
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
  counter_holds_ = std::move(holds);
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
  auto record = [&](const DeviceClaim& r, int delta) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
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
  qm::MutexLock lock(&mu_);
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
  for (const auto& e : health_history_) {
    if (e.time > since) out.health.push_back(e);
  }
  std::stable_sort(out.health.begin(), out.health.end(),
                   [](const HealthEvent& a, const HealthEvent& b) {
                     return std::tie(a.time, a.id) < std::tie(b.time, b.id);
                   });
  return out;
}

absl::StatusOr<AllocationHistory> MemoryStore::ReadDeviceHistory(
    const std::string& driver, const std::string& pool, const std::string& device,
    std::chrono::system_clock::time_point since, int64_t limit, bool* truncated) {
  QM_ASSIGN_OR_RETURN(AllocationHistory all, ReadAllocationHistory(since));
  auto other = [&](const AllocationRecord& r) {
    return r.driver != driver || r.pool != pool || r.device != device;
  };
  std::erase_if(all.current, other);
  std::erase_if(all.events, [&](const AllocationEvent& e) { return other(e.row); });
  all.health.clear();
  std::reverse(all.events.begin(), all.events.end());
  *truncated = static_cast<int64_t>(all.events.size()) > limit;
  if (*truncated) all.events.resize(static_cast<size_t>(limit));
  return all;
}

absl::StatusOr<int64_t> MemoryStore::PruneAllocationHistory(
    std::chrono::system_clock::time_point before) {
  qm::MutexLock lock(&mu_);
  const size_t size = history_.size() + health_history_.size();
  std::erase_if(history_, [&](const AllocationEvent& e) { return e.time < before; });
  std::erase_if(health_history_, [&](const HealthEvent& e) { return e.time < before; });
  return static_cast<int64_t>(size - history_.size() - health_history_.size());
}

absl::Status MemoryStore::RenewNodeLeases(
    const std::map<std::string, std::chrono::system_clock::time_point>& renewals) {
  qm::MutexLock lock(&mu_);
  for (const auto& [node, at] : renewals) {
    auto [it, inserted] = node_leases_.try_emplace(node, at);
    if (!inserted) it->second = std::max(it->second, at);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, std::chrono::system_clock::time_point>>
MemoryStore::NodeLeases() {
  qm::MutexLock lock(&mu_);
  return node_leases_;
}

absl::StatusOr<std::vector<DeviceClaim>> MemoryStore::ListDeviceClaims() {
  qm::MutexLock lock(&mu_);
  std::vector<DeviceClaim> out = device_claims_;
  for (auto& row : out) row.charges.clear();  // as the PostgreSQL store: not read back
  return out;
}

std::map<std::string, int64_t> MemoryStore::QuotaUsedLocked(const std::string& ns) {
  std::map<std::string, int64_t> used;
  for (const char* resource : {"pods", kClaims}) {
    for (auto it = objects_.lower_bound(model::ResourceKey{resource, ns, ""});
         it != objects_.end() && it->first.resource == resource && it->first.namespace_ == ns;
         ++it) {
      for (const auto& [key, n] : model::json::QuotaUsage(it->second)) used[key] += n;
    }
  }
  return used;
}

absl::StatusOr<std::map<std::string, int64_t>> MemoryStore::QuotaUsed(const std::string& ns) {
  qm::MutexLock lock(&mu_);
  return QuotaUsedLocked(ns);
}

absl::StatusOr<model::Object> MemoryStore::Get(const model::ResourceKey& key) {
  qm::MutexLock lock(&mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return NotFoundError(key);
  return it->second;
}

absl::StatusOr<ListResult> MemoryStore::List(const ListOptions& options) {
  qm::MutexLock lock(&mu_);
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
    result.items.push_back(model::Share(it->second));
  }
  return result;
}

absl::StatusOr<ListResult> MemoryStore::ListAll() {
  qm::MutexLock lock(&mu_);
  ListResult result;
  result.resource_version = revision_;
  result.items.reserve(objects_.size());
  for (const auto& [key, obj] : objects_) result.items.push_back(model::Share(obj));
  return result;
}

int64_t MemoryStore::LastCommittedRevision() {
  auto rv = CurrentRevision();
  return rv.ok() ? *rv : 0;
}

absl::StatusOr<int64_t> MemoryStore::CurrentRevision() {
  qm::MutexLock lock(&mu_);
  return revision_;
}

absl::StatusOr<std::vector<model::WatchEvent>> MemoryStore::ChangesSince(int64_t after_rv,
                                                                         int64_t limit) {
  qm::MutexLock lock(&mu_);
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
  qm::MutexLock lock(&mu_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (revision_ <= after_rv && changed_.WaitUntil(&mu_, deadline)) {
  }
}

absl::Status MemoryStore::Compact(int64_t through_rv) {
  qm::MutexLock lock(&mu_);
  through_rv = std::min(through_rv, revision_ - 1);
  while (!log_.empty() && log_.front().object.meta.resource_version <= through_rv) {
    log_.pop_front();
  }
  compacted_through_ = std::max(compacted_through_, through_rv);
  return absl::OkStatus();
}

}  // namespace qm::store
