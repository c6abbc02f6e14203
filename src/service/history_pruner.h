#pragma once

// Keeps the allocation history (store/store.h, behind UtilizationHistoryReview) within its
// retention (--allocation-history-retention): a thread drops changes older than the retention
// at start and then every hour. The ledger and the newer history stay exact; a utilization
// range reaching further back than the retention shows the allocations as they were at the
// oldest change kept.

#include <chrono>
#include <cstdint>
#include <thread>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "store/store.h"

namespace qm::service {

class HistoryPruner {
 public:
  // `retention` 0 keeps everything (Start starts nothing). `store` and `clock` must outlive it.
  HistoryPruner(store::Store& store, const Clock& clock, std::chrono::seconds retention,
                std::chrono::seconds every = std::chrono::hours(1));
  ~HistoryPruner();

  // Drops what is older than the retention now; says how many changes went.
  absl::StatusOr<int64_t> PruneOnce();
  void Start();
  // Stops the thread (idempotent); a prune in progress finishes first.
  void Stop();

 private:
  store::Store& store_;
  const Clock& clock_;
  const std::chrono::seconds retention_;
  const std::chrono::seconds every_;
  qm::Mutex mu_;
  qm::CondVar wake_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace qm::service
