#include "service/audit_log.h"

#include <vector>

#include "spdlog/spdlog.h"

namespace qm::service {
namespace {

constexpr size_t kMaxQueued = 100000;
constexpr size_t kMaxBatch = 1000;
constexpr auto kPruneEvery = std::chrono::minutes(10);
constexpr auto kRetryDelay = std::chrono::milliseconds(200);

}  // namespace

AuditLog::AuditLog(store::Store& store, std::chrono::seconds retention)
    : store_(store), retention_(retention) {}

AuditLog::~AuditLog() { Stop(); }

void AuditLog::Start() {
  thread_ = std::thread([this] { Run(); });
}

void AuditLog::Stop() {
  {
    qm::MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

void AuditLog::Record(store::AuditRecord record) {
  {
    qm::MutexLock lock(&mu_);
    if (queue_.size() < kMaxQueued) {
      queue_.push_back(std::move(record));
      cv_.Signal();
      return;
    }
  }
  dropped_.fetch_add(1);
  spdlog::error(
      "audit: queue full (database unreachable?); record not kept: request_id={} user={} "
      "verb={} resource={} code={}",
      record.request_id, record.user, record.verb, record.resource, record.code);
}

// The store is not supposed to throw; if it does (or memory runs out), the batch is not lost:
// it counts as a failed write and is retried like one.
absl::Status AuditLog::Append(const std::vector<store::AuditRecord>& batch) {
  try {
    return store_.AppendAudit(batch);
  } catch (...) {
    Unexpected("writing records");
    return absl::InternalError("the store threw");
  }
}

void AuditLog::Unexpected(const char* doing) {
  unexpected_errors_.fetch_add(1);
  try {
    throw;
  } catch (const std::exception& e) {
    spdlog::error("audit: {} failed with an exception: {}", doing, e.what());
  } catch (...) {
    spdlog::error("audit: {} failed with an exception of unknown type", doing);
  }
}

void AuditLog::Run() {
  // Last resort: an exception outside the store calls (memory running out in the queue, say)
  // restarts the loop instead of ending the process; the batch it was holding is counted as
  // dropped.
  for (;;) {
    try {
      Loop();
      return;
    } catch (...) {
      Unexpected("the writer loop");
      if (holding_ > 0) {
        dropped_.fetch_add(holding_);
        spdlog::error("audit: {} records lost to that exception", holding_);
        holding_ = 0;
      }
      std::this_thread::sleep_for(kRetryDelay);
    }
  }
}

void AuditLog::Loop() {
  auto next_prune = std::chrono::steady_clock::now();
  int failures = 0;
  while (true) {
    std::vector<store::AuditRecord> batch;
    bool stopping;
    {
      qm::MutexLock lock(&mu_);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
      while (!stopping_ && queue_.empty() && cv_.WaitUntil(&mu_, deadline)) {
      }
      stopping = stopping_;
      while (!queue_.empty() && batch.size() < kMaxBatch) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
        holding_ = batch.size();
      }
    }
    if (!batch.empty()) {
      absl::Status st = Append(batch);
      if (st.ok()) {
        written_.fetch_add(batch.size());
        holding_ = 0;
        failures = 0;
      } else {
        // Put them back in order and retry; give up on them only when stopping after retries.
        spdlog::warn("audit: cannot write {} records: {}", batch.size(), st.ToString());
        if (stopping && ++failures > 10) {
          dropped_.fetch_add(batch.size());
          holding_ = 0;
          spdlog::error("audit: {} records not written at shutdown", batch.size());
          return;
        }
        {
          qm::MutexLock lock(&mu_);
          for (auto it = batch.rbegin(); it != batch.rend(); ++it) queue_.push_front(*it);
          holding_ = 0;
        }
        std::this_thread::sleep_for(kRetryDelay);
        continue;
      }
    }
    if (retention_.count() > 0 && std::chrono::steady_clock::now() >= next_prune) {
      next_prune = std::chrono::steady_clock::now() + kPruneEvery;
      try {
        auto pruned = store_.PruneAudit(std::chrono::system_clock::now() - retention_);
        if (pruned.ok() && *pruned > 0) spdlog::info("audit: pruned {} old records", *pruned);
      } catch (...) {
        Unexpected("pruning old records");
      }
    }
    if (stopping) {
      qm::MutexLock lock(&mu_);
      if (queue_.empty()) return;
    }
  }
}

}  // namespace qm::service
