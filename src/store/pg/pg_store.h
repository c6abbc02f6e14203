#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"
#include "store/pg/pool.h"
#include "store/store.h"

namespace qm::store::pg {

struct PendingWrite;
enum class WriteKind { kCreate, kUpdate, kDelete, kTransaction };

// The PostgreSQL Store (ARCHITECTURE.md §4). Writes are queued to one writer thread that
// commits everything waiting in one transaction (group commit: one fsync for many writes) and
// one call of qm_write_batch (migrations/0011), under an advisory lock so revisions commit in
// order even with several replicas; every write appends to change_log, and each batch NOTIFYs
// `qm_changes`. A write returns only after its
// transaction committed. Thread-safe.
class PgStore final : public Store {
 public:
  // Opens a pool of `pool_size` connections to `url` plus one listening connection.
  // Migrations must already be applied (see Migrate).
  static absl::StatusOr<std::unique_ptr<PgStore>> Open(const std::string& url, int pool_size);
  ~PgStore() override;

  absl::StatusOr<model::Object> Create(const model::Object& obj) override;
  absl::StatusOr<model::Object> Update(const model::Object& obj, int64_t expected_rv) override;
  absl::StatusOr<model::Object> Delete(const model::ResourceKey& key, int64_t expected_rv) override;
  absl::StatusOr<model::Object> Get(const model::ResourceKey& key) override;
  absl::StatusOr<ListResult> List(const ListOptions& options) override;
  absl::StatusOr<ListResult> ListAll() override;
  absl::StatusOr<int64_t> CurrentRevision() override;
  int64_t LastCommittedRevision() override { return committed_rv_.load(); }
  int64_t LastCommittedRevisionOf(const std::string& resource) override;
  absl::StatusOr<std::vector<model::WatchEvent>> ChangesSince(int64_t after_rv,
                                                              int64_t limit) override;
  absl::StatusOr<std::vector<model::WatchEvent>> FollowChanges(int64_t after_rv,
                                                               int64_t limit) override;
  void WaitForChanges(int64_t after_rv, std::chrono::milliseconds timeout) override;
  // How many times the change log was read (ChangesSince, and FollowChanges when it asks), for
  // tests.
  uint64_t log_reads() const { return log_reads_.load(); }
  absl::StatusOr<std::vector<model::Object>> Commit(const Transaction& txn) override;
  std::future<absl::StatusOr<std::vector<model::Object>>> CommitAsync(Transaction txn) override;
  absl::StatusOr<std::vector<DeviceClaim>> ListDeviceClaims() override;
  absl::StatusOr<std::map<std::string, int64_t>> QuotaUsed(const std::string& ns) override;
  absl::Status Compact(int64_t through_rv) override;
  absl::Status Ping() override;
  absl::Status AppendAudit(const std::vector<AuditRecord>& records) override;
  absl::StatusOr<std::vector<AuditRecord>> QueryAudit(const AuditQuery& query) override;
  absl::StatusOr<int64_t> PruneAudit(std::chrono::system_clock::time_point before) override;
  absl::StatusOr<AllocationHistory> ReadAllocationHistory(
      std::chrono::system_clock::time_point since) override;
  absl::Status RenewNodeLeases(
      const std::map<std::string, std::chrono::system_clock::time_point>& renewals) override;
  absl::StatusOr<std::map<std::string, std::chrono::system_clock::time_point>> NodeLeases()
      override;
  absl::StatusOr<AllocationHistory> ReadDeviceHistory(const std::string& driver,
                                                      const std::string& pool,
                                                      const std::string& device,
                                                      std::chrono::system_clock::time_point since,
                                                      int64_t limit, bool* truncated) override;
  absl::StatusOr<int64_t> PruneAllocationHistory(
      std::chrono::system_clock::time_point before) override;

  ConnectionPool& pool() { return *pool_; }
  // Batches the writer thread failed with an exception (each logged, its writes answered with
  // Unavailable), for /metrics.
  uint64_t writer_errors() const { return writer_errors_.load(); }

 private:
  struct Listener;
  static constexpr size_t kMaxBatch = 256;

  PgStore(std::string url, std::unique_ptr<ConnectionPool> pool);
  absl::StatusOr<model::Object> Submit(WriteKind kind, model::Object obj, model::ResourceKey key,
                                       int64_t expected_rv);
  void WriterLoop();
  // Commits `batch` and answers each write; `completed` counts the writes answered so far.
  void WriteBatch(const std::vector<PendingWrite*>& batch, size_t& completed);
  bool Enqueue(PendingWrite* w);
  absl::StatusOr<std::vector<absl::StatusOr<model::Object>>> RunBatch(
      const std::vector<PendingWrite*>& batch);

  // Keeps the changes a committed batch made (`batch` and its results) in `own_changes_`.
  // `before` is the change log's newest revision when the batch took the write lock.
  void RememberOwnChanges(const std::vector<PendingWrite*>& batch,
                          const std::vector<absl::StatusOr<model::Object>>& results,
                          int64_t before);
  // The changes after `after_rv` when this process's own batches hold all of them, without
  // asking the change log: the batch that took the write lock at `after_rv`, the one that took
  // it at that batch's newest revision, and so on (at most `max_rows` changes). nullopt when no
  // remembered batch follows `after_rv` directly.
  std::optional<std::vector<model::WatchEvent>> OwnChangesSince(int64_t after_rv, int64_t max_rows);

  const std::string url_;
  std::unique_ptr<ConnectionPool> pool_;
  // The changes this process committed lately, by revision, as its writes gave them: ChangesSince
  // takes these instead of reading their rows' columns back from change_log (the watch hub
  // follows every change, its own process's writes included). Dropped once a reader has read
  // past them, moved out when FollowChanges hands them over, and the oldest beyond
  // kMaxOwnChanges; a change not here is read from the log.
  static constexpr size_t kMaxOwnChanges = 16384;
  qm::Mutex own_mu_;
  std::map<int64_t, model::WatchEvent> own_changes_ ABSL_GUARDED_BY(own_mu_);
  // The newest revision this process committed (its changes may have been handed over since).
  int64_t own_newest_ ABSL_GUARDED_BY(own_mu_) = 0;
  // Each committed batch's span of revisions in the change log, (first, second]: only its own
  // changes (those in own_changes_) lie in between. Dropped as own_changes_ are.
  std::map<int64_t, int64_t> own_spans_ ABSL_GUARDED_BY(own_mu_);
  // While the writer commits a batch and until it has kept the batch's changes.
  bool committing_ ABSL_GUARDED_BY(own_mu_) = false;
  qm::CondVar own_cv_;  // signalled when committing_ goes false
  qm::Mutex listen_mu_;
  std::unique_ptr<Listener> listener_ ABSL_GUARDED_BY(listen_mu_);
  // The newest revision a notification named (any replica's batch).
  std::atomic<int64_t> notified_rv_{0};
  // The (after_rv, notified_rv_) of the last wait a notification ended (WaitForChanges).
  std::pair<int64_t, int64_t> answered_ ABSL_GUARDED_BY(listen_mu_){-1, -1};
  qm::Mutex queue_mu_;
  qm::CondVar queue_cv_;
  std::deque<PendingWrite*> queue_ ABSL_GUARDED_BY(queue_mu_);
  bool stopping_ ABSL_GUARDED_BY(queue_mu_) = false;
  std::thread writer_;
  std::atomic<int64_t> committed_rv_{0};  // newest revision the writer committed
  // The newest revision the writer committed per resource (RememberOwnChanges).
  qm::Mutex resource_rv_mu_;
  std::map<std::string, int64_t, std::less<>> resource_rv_ ABSL_GUARDED_BY(resource_rv_mu_);
  std::atomic<uint64_t> writer_errors_{0};
  std::atomic<uint64_t> log_reads_{0};
};

// Applies every migration not yet recorded in schema_migrations, in name order, in one
// transaction under an advisory lock (safe with several replicas starting at once).
absl::Status Migrate(const std::string& url);

}  // namespace qm::store::pg
