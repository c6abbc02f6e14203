// Background work never takes the process down: the watch hub, the scheduler loop and the audit
// log writer meet a store (or a watcher) that throws once, log and count it, and carry on.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "forwarding_store.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "service/audit_log.h"
#include "service/scheduler.h"
#include "service/watch_hub.h"

namespace qm::service {
namespace {

using nlohmann::json;

// The in-memory store, except that each armed operation throws once (not even an
// std::exception for ChangesSince, the worst case).
class FaultyStore final : public fakes::ForwardingStore {
 public:
  absl::StatusOr<std::vector<model::WatchEvent>> ChangesSince(int64_t rv, int64_t limit) override {
    if (Take(throw_changes_since)) throw 42;
    return inner.ChangesSince(rv, limit);
  }
  absl::StatusOr<std::vector<model::Object>> Commit(const store::Transaction& txn) override {
    if (Take(throw_commit)) throw std::bad_alloc();
    return inner.Commit(txn);
  }
  absl::Status AppendAudit(const std::vector<store::AuditRecord>& records) override {
    if (Take(throw_append_audit)) throw std::runtime_error("disk on fire");
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& r : records) audit.push_back(r.request_id);
    cv.notify_all();
    return absl::OkStatus();
  }

  std::vector<std::string> WaitForAudit(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return audit.size() >= n; });
    return audit;
  }

  std::atomic<int> throw_changes_since{0};
  std::atomic<int> throw_commit{0};
  std::atomic<int> throw_append_audit{0};

 private:
  static bool Take(std::atomic<int>& armed) {
    int n = armed.load();
    while (n > 0) {
      if (armed.compare_exchange_weak(n, n - 1)) return true;
    }
    return false;
  }
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> audit;
};

// Records the names it is given; `throw_once` makes its first delivery throw.
class RecordingWatcher : public Watcher {
 public:
  explicit RecordingWatcher(bool throw_once = false) : throw_once_(throw_once) {}
  bool Deliver(const model::WatchEvent& e) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (throw_once_) {
      throw_once_ = false;
      throw std::runtime_error("watcher bug");
    }
    names_.push_back(e.object.meta.name);
    cv_.notify_all();
    return true;
  }
  bool Tick(int64_t) override { return true; }
  void Expire(const absl::Status& st) override {
    std::lock_guard<std::mutex> lock(mu_);
    expired_ = st;
    cv_.notify_all();
  }

  std::vector<std::string> WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return names_.size() >= n; });
    return names_;
  }
  absl::Status WaitForExpiry() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return !expired_.ok(); });
    return expired_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool throw_once_;
  std::vector<std::string> names_;
  absl::Status expired_;
};

model::Object Named(const std::string& resource, const std::string& ns, const std::string& name,
                    const json& body = json::object()) {
  static std::atomic<int> uid{0};
  model::Object o;
  o.resource = resource;
  o.meta.namespace_ = ns;
  o.meta.name = name;
  o.meta.uid = "uid-" + std::to_string(++uid);
  o.meta.generation = 1;
  o.body = body.dump();
  return o;
}

TEST(BackgroundFaultsTest, WatchHubSurvivesAStoreThatThrows) {
  FaultyStore store;
  WatchHub hub(store, WatchHubOptions{});
  hub.Start();
  auto before = std::make_shared<RecordingWatcher>();
  ASSERT_TRUE(hub.Subscribe(before, hub.last_dispatched()).ok());

  store.throw_changes_since = 1;
  ASSERT_TRUE(store.Create(Named("nodes", "", "a")).ok());
  // Where dispatching stopped is unknown: the watch ends with 410 and its client lists again.
  absl::Status expired = before->WaitForExpiry();
  EXPECT_TRUE(absl::IsOutOfRange(expired)) << expired;
  EXPECT_EQ(hub.unexpected_errors(), 1u);

  // The hub carries on: a new watch gets new changes, lists see everything.
  auto after = std::make_shared<RecordingWatcher>();
  ASSERT_TRUE(hub.Subscribe(after, *store.CurrentRevision()).ok());
  ASSERT_TRUE(store.Create(Named("nodes", "", "b")).ok());
  EXPECT_EQ(after->WaitFor(1), std::vector<std::string>{"b"});
  ListRequest request;
  request.store.resource = "nodes";
  auto listed = hub.List(request, *store.CurrentRevision());
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->items.size(), 2u);
  hub.Stop();
}

TEST(BackgroundFaultsTest, WatchHubSurvivesAWatcherThatThrows) {
  FaultyStore store;
  WatchHub hub(store, WatchHubOptions{});
  hub.Start();
  auto faulty = std::make_shared<RecordingWatcher>(/*throw_once=*/true);
  ASSERT_TRUE(hub.Subscribe(faulty, hub.last_dispatched()).ok());
  ASSERT_TRUE(store.Create(Named("nodes", "", "a")).ok());
  EXPECT_TRUE(absl::IsOutOfRange(faulty->WaitForExpiry()));
  EXPECT_EQ(hub.unexpected_errors(), 1u);

  auto fine = std::make_shared<RecordingWatcher>();
  ASSERT_TRUE(hub.Subscribe(fine, *store.CurrentRevision()).ok());
  ASSERT_TRUE(store.Create(Named("nodes", "", "b")).ok());
  EXPECT_EQ(fine->WaitFor(1), std::vector<std::string>{"b"});
  hub.Stop();
}

class FixedClock final : public Clock {
 public:
  std::chrono::system_clock::time_point Now() const override {
    return std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000));
  }
};

class CountingIds final : public IdGenerator {
 public:
  std::string NewUid() override { return "gen-" + std::to_string(++n_); }

 private:
  std::atomic<int> n_{0};
};

// The binding commit throws (std::bad_alloc): the loop logs and counts it, lists everything
// again and binds the pod on a later pass.
TEST(BackgroundFaultsTest, SchedulerLoopCarriesOnAfterAnException) {
  FaultyStore store;
  FixedClock clock;
  CountingIds ids;
  WatchHub hub(store, WatchHubOptions{});
  hub.Start();
  Scheduler scheduler(store, hub, clock, ids);
  ASSERT_TRUE(store.Create(Named("namespaces", "", "default")).ok());
  ASSERT_TRUE(
      store
          .Create(Named(
              "deviceclasses.resource.k8s.io", "", "gpu",
              {{"spec", {{"selectors", {{{"cel", {{"expression", "device.driver == 'gpu'"}}}}}}}}}))
          .ok());
  ASSERT_TRUE(store.Create(Named("nodes", "", "node-a")).ok());
  ASSERT_TRUE(store
                  .Create(Named("resourceslices.resource.k8s.io", "", "node-a",
                                {{"spec",
                                  {{"driver", "gpu"},
                                   {"nodeName", "node-a"},
                                   {"pool", {{"name", "node-a"}, {"generation", 1}}},
                                   {"devices", {{{"name", "gpu-0"}}}}}}}))
                  .ok());
  ASSERT_TRUE(
      store
          .Create(Named(
              "resourceclaims.resource.k8s.io", "default", "c",
              {{"spec",
                {{"devices",
                  {{"requests", {{{"name", "g"}, {"exactly", {{"deviceClassName", "gpu"}}}}}}}}}}}))
          .ok());
  store.throw_commit = 1;
  scheduler.Start();
  ASSERT_TRUE(
      store
          .Create(Named("pods", "default", "p",
                        {{"spec",
                          {{"containers", {{{"name", "c"}, {"image", "x"}}}},
                           {"resourceClaims", {{{"name", "g"}, {"resourceClaimName", "c"}}}}}},
                         {"status", {{"phase", "Pending"}}}}))
          .ok());
  std::string node;
  for (int i = 0; i < 500 && node.empty(); ++i) {
    auto pod = store.Get(model::ResourceKey{"pods", "default", "p"});
    ASSERT_TRUE(pod.ok());
    json body = json::parse(pod->body);
    if (body["spec"].contains("nodeName")) node = body["spec"]["nodeName"];
    if (node.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  scheduler.Stop();
  hub.Stop();
  EXPECT_EQ(store.throw_commit.load(), 0);  // the fault did fire
  EXPECT_EQ(scheduler.unexpected_errors(), 1u);
  EXPECT_EQ(node, "node-a");
}

// A write that throws is retried like a failed one: the record is still written, once.
TEST(BackgroundFaultsTest, AuditLogCarriesOnAfterAnException) {
  FaultyStore store;
  store.throw_append_audit = 1;
  AuditLog log(store, std::chrono::seconds(0));
  log.Start();
  store::AuditRecord record;
  record.request_id = "r1";
  log.Record(record);
  EXPECT_EQ(store.WaitForAudit(1), std::vector<std::string>{"r1"});
  record.request_id = "r2";
  log.Record(record);
  EXPECT_EQ(store.WaitForAudit(2), (std::vector<std::string>{"r1", "r2"}));
  log.Stop();
  EXPECT_EQ(log.unexpected_errors(), 1u);
  EXPECT_EQ(log.dropped(), 0u);
  EXPECT_EQ(log.written(), 2u);
}

}  // namespace
}  // namespace qm::service
