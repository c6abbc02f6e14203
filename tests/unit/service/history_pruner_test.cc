#include "service/history_pruner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "common/mutex.h"
#include "store/memory_store.h"

namespace qm::service {
namespace {

using std::chrono::hours;

class SteppedClock final : public Clock {
 public:
  std::chrono::system_clock::time_point Now() const override {
    qm::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(std::chrono::system_clock::duration d) {
    qm::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  mutable qm::Mutex mu_;
  std::chrono::system_clock::time_point now_ ABSL_GUARDED_BY(mu_) =
      std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000));
};

// Binds one device to `uid` (one history change) and releases `release` (another).
void Bind(store::Store& store, const std::string& device, const std::string& uid,
          const std::string& release = "") {
  store::Transaction txn;
  txn.claim_devices.push_back(store::DeviceClaim{"d", "p", device, "", uid, false, "{}", {}});
  if (!release.empty()) txn.release_claims.push_back(release);
  ASSERT_TRUE(store.Commit(txn).ok());
}

TEST(HistoryPrunerTest, DropsChangesOlderThanTheRetentionAndKeepsTheLedger) {
  SteppedClock clock;
  store::MemoryStore store(clock);
  Bind(store, "gpu-0", "a");
  clock.Advance(hours(20));
  Bind(store, "gpu-1", "b", "a");  // +b now, -a now
  clock.Advance(hours(10));
  HistoryPruner pruner(store, clock, hours(24));
  auto pruned = pruner.PruneOnce();
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(*pruned, 1);  // +a, 30 h ago
  auto history = store.ReadAllocationHistory({});
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->events.size(), 2u);
  EXPECT_EQ(history->events[0].row.claim_uid, "a");
  EXPECT_EQ(history->events[0].delta, -1);
  EXPECT_EQ(history->events[1].row.claim_uid, "b");
  ASSERT_EQ(history->current.size(), 1u);  // the ledger is untouched
  EXPECT_EQ(history->current[0].claim_uid, "b");
  EXPECT_EQ(*pruner.PruneOnce(), 0);
}

TEST(HistoryPrunerTest, ZeroRetentionKeepsEverything) {
  SteppedClock clock;
  store::MemoryStore store(clock);
  Bind(store, "gpu-0", "a");
  clock.Advance(hours(24 * 365));
  HistoryPruner pruner(store, clock, std::chrono::seconds(0));
  pruner.Start();  // starts nothing
  EXPECT_EQ(*pruner.PruneOnce(), 0);
  EXPECT_EQ(store.ReadAllocationHistory({})->events.size(), 1u);
}

TEST(HistoryPrunerTest, TheThreadPrunesAtStartAndStopsPromptly) {
  SteppedClock clock;
  store::MemoryStore store(clock);
  Bind(store, "gpu-0", "a");
  clock.Advance(hours(48));
  HistoryPruner pruner(store, clock, hours(24), std::chrono::hours(1));
  pruner.Start();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!store.ReadAllocationHistory({})->events.empty() &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(store.ReadAllocationHistory({})->events.empty());
  pruner.Stop();  // returns without waiting out the hour
  pruner.Stop();
}

}  // namespace
}  // namespace qm::service
