#pragma once

// The asynchronous half of the audit trail: records of denied requests (which change nothing,
// so nothing to commit them with) are queued here and written by a background thread in
// batches; the same thread prunes records older than the retention. Records of changes do not
// pass through here: they commit with the change (store::AuditScope).

#include <atomic>
#include <chrono>
#include <deque>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "store/store.h"

namespace qm::service {

class AuditLog {
 public:
  // `retention` 0 keeps records forever.
  AuditLog(store::Store& store, std::chrono::seconds retention);
  ~AuditLog();

  void Start();
  // Writes what is queued (retrying a failing database for up to a few seconds), then stops.
  void Stop();

  // Queues a record. Never blocks; a record that cannot be queued (the database has been
  // unreachable for long enough to fill the queue) is logged as an error and counted, never
  // dropped silently.
  void Record(store::AuditRecord record);

  uint64_t dropped() const { return dropped_.load(); }
  uint64_t written() const { return written_.load(); }
  // Exceptions the writer thread caught (each is logged; the records are retried), for
  // /metrics.
  uint64_t unexpected_errors() const { return unexpected_errors_.load(); }

 private:
  void Run();
  void Loop();
  absl::Status Append(const std::vector<store::AuditRecord>& batch);
  // Logs and counts the exception being handled; call from a catch block only.
  void Unexpected(const char* doing);

  store::Store& store_;
  const std::chrono::seconds retention_;
  qm::Mutex mu_;
  qm::CondVar cv_;
  std::deque<store::AuditRecord> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
  size_t holding_ = 0;  // records taken off the queue and not yet written or put back (thread)
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> written_{0};
  std::atomic<uint64_t> unexpected_errors_{0};
};

}  // namespace qm::service
