#pragma once

#include <deque>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "model/dra.h"
#include "store/store.h"

namespace qm::store {

// An in-memory Store for unit tests and for running without a database. Holds the whole change
// log until Compact, and the allocation history (timed by `clock`, the system clock by default)
// until PruneAllocationHistory; nothing survives the object. Thread-safe.
class MemoryStore final : public Store {
 public:
  MemoryStore() : clock_(system_clock_) {}
  // `clock` must outlive the store.
  explicit MemoryStore(const Clock& clock) : clock_(clock) {}

  absl::StatusOr<model::Object> Create(const model::Object& obj) override;
  absl::StatusOr<model::Object> Update(const model::Object& obj, int64_t expected_rv) override;
  absl::StatusOr<model::Object> Delete(const model::ResourceKey& key, int64_t expected_rv) override;
  absl::StatusOr<model::Object> Get(const model::ResourceKey& key) override;
  absl::StatusOr<ListResult> List(const ListOptions& options) override;
  absl::StatusOr<ListResult> ListAll() override;
  absl::StatusOr<int64_t> CurrentRevision() override;
  int64_t LastCommittedRevision() override;
  absl::StatusOr<std::vector<model::WatchEvent>> ChangesSince(int64_t after_rv,
                                                              int64_t limit) override;
  void WaitForChanges(int64_t after_rv, std::chrono::milliseconds timeout) override;
  absl::Status Compact(int64_t through_rv) override;
  absl::StatusOr<std::vector<model::Object>> Commit(const Transaction& txn) override;
  absl::StatusOr<std::vector<DeviceClaim>> ListDeviceClaims() override;
  absl::StatusOr<std::map<std::string, int64_t>> QuotaUsed(const std::string& ns) override;
  absl::Status Ping() override { return absl::OkStatus(); }
  absl::StatusOr<AllocationHistory> ReadAllocationHistory(
      std::chrono::system_clock::time_point since) override;
  absl::StatusOr<int64_t> PruneAllocationHistory(
      std::chrono::system_clock::time_point before) override;
  absl::StatusOr<AllocationHistory> ReadDeviceHistory(const std::string& driver,
                                                      const std::string& pool,
                                                      const std::string& device,
                                                      std::chrono::system_clock::time_point since,
                                                      int64_t limit, bool* truncated) override;
  absl::Status RenewNodeLeases(
      const std::map<std::string, std::chrono::system_clock::time_point>& renewals) override;
  absl::StatusOr<std::map<std::string, std::chrono::system_clock::time_point>> NodeLeases()
      override;

 private:
  // Logs a change (and records what it changed of the devices' health, as migrations/0015's
  // triggers do).
  void AppendLocked(model::EventType type, const model::Object& obj)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records the difference between the ledger and `next` in the history, as PostgreSQL's
  // triggers do (migrations/0006).
  void RecordLedgerChangesLocked(const std::vector<DeviceClaim>& next)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The namespace of the object with this uid, else the one the history last recorded for it.
  std::string ClaimNamespaceLocked(const std::string& uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::map<std::string, int64_t> QuotaUsedLocked(const std::string& ns)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the ledger rows of a claim, and the counters of devices left without a holder.
  void ReleaseLocked(const std::string& claim_uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  SystemClock system_clock_;
  const Clock& clock_;
  qm::Mutex mu_;
  qm::CondVar changed_;
  int64_t revision_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t compacted_through_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<model::ResourceKey, model::Object> objects_ ABSL_GUARDED_BY(mu_);
  std::deque<model::WatchEvent> log_ ABSL_GUARDED_BY(mu_);
  std::vector<DeviceClaim> device_claims_ ABSL_GUARDED_BY(mu_);
  std::vector<AllocationEvent> history_ ABSL_GUARDED_BY(mu_);
  std::vector<HealthEvent> health_history_ ABSL_GUARDED_BY(mu_);
  int64_t history_id_ ABSL_GUARDED_BY(mu_) = 0;
  // The unhealthy sources each slice and rule holds now (model::json::UnhealthySourcesOf).
  std::map<model::ResourceKey, std::vector<model::UnhealthySource>> unhealthy_ ABSL_GUARDED_BY(mu_);
  // The counter charges of every device some non-admin row holds (driver, pool, device), as
  // its first row brought them.
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<DeviceCharge>>
      counter_holds_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::chrono::system_clock::time_point> node_leases_ ABSL_GUARDED_BY(mu_);
};

}  // namespace qm::store
