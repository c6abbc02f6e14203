#include "service/history_pruner.h"

#include <exception>

#include "spdlog/spdlog.h"

namespace qm::service {

HistoryPruner::HistoryPruner(store::Store& store, const Clock& clock,
                             std::chrono::seconds retention, std::chrono::seconds every)
    : store_(store), clock_(clock), retention_(retention), every_(every) {}

HistoryPruner::~HistoryPruner() { Stop(); }

absl::StatusOr<int64_t> HistoryPruner::PruneOnce() {
  if (retention_.count() <= 0) return 0;
  return store_.PruneAllocationHistory(clock_.Now() - retention_);
}

void HistoryPruner::Start() {
  if (retention_.count() <= 0 || thread_.joinable()) return;
  thread_ = std::thread([this] {
    for (;;) {
      try {
        auto pruned = PruneOnce();
        if (!pruned.ok() && !absl::IsUnimplemented(pruned.status())) {
          spdlog::warn("allocation history: cannot prune: {}", pruned.status().ToString());
        } else if (pruned.ok() && *pruned > 0) {
          spdlog::info("allocation history: pruned {} changes older than {} s", *pruned,
                       retention_.count());
        }
      } catch (const std::exception& e) {
        spdlog::error("allocation history: unexpected exception while pruning: {}", e.what());
      }
      qm::MutexLock lock(&mu_);
      const auto deadline = std::chrono::steady_clock::now() + every_;
      while (!stopping_ && wake_.WaitUntil(&mu_, deadline)) {
      }
      if (stopping_) return;
    }
  });
}

void HistoryPruner::Stop() {
  {
    qm::MutexLock lock(&mu_);
    stopping_ = true;
  }
  wake_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

}  // namespace qm::service
