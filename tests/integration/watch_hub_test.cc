// The watch hub over the PostgreSQL change feed: resume from a revision, live delivery, 410
// after compaction.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "pg_test_env.h"
#include "service/watch_hub.h"
#include "store/pg/pg_store.h"

namespace qm::service {
namespace {

model::Object MakeObject(const std::string& name) {
  model::Object o;
  o.resource = "things";
  o.meta.name = name;
  o.meta.uid = "uid-" + name;
  o.body = "{}";
  return o;
}

class RecordingWatcher : public Watcher {
 public:
  bool Deliver(const model::WatchEvent& e) override {
    std::lock_guard<std::mutex> lock(mu_);
    names_.push_back(std::string(model::EventTypeName(e.type)) + " " + e.object.meta.name);
    cv_.notify_all();
    return true;
  }
  bool Tick(int64_t) override { return true; }
  void Expire(const absl::Status&) override {}

  std::vector<std::string> WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return names_.size() >= n; });
    return names_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> names_;
};

class WatchHubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::PgTestEnv::Get().Reset();
    auto s = store::pg::PgStore::Open(testing::PgTestEnv::Get().url(), 4);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(s).value();
  }
  std::unique_ptr<store::pg::PgStore> store_;
};

TEST_F(WatchHubTest, ResumesFromARevisionThenFollowsLiveChanges) {
  auto a = store_->Create(MakeObject("a"));
  auto b = store_->Create(MakeObject("b"));
  ASSERT_TRUE(a.ok() && b.ok());
  WatchHub hub(*store_, WatchHubOptions{});
  hub.Start();
  auto w = std::make_shared<RecordingWatcher>();
  ASSERT_TRUE(hub.Subscribe(w, a->meta.resource_version).ok());
  ASSERT_TRUE(store_->Delete(a->Key(), 0).ok());
  ASSERT_TRUE(store_->Create(MakeObject("c")).ok());
  auto seen = w->WaitFor(3);
  EXPECT_EQ(seen, (std::vector<std::string>{"ADDED b", "DELETED a", "ADDED c"}));
  hub.Stop();
}

TEST_F(WatchHubTest, SubscribingAtTheCurrentRevisionSkipsHistory) {
  ASSERT_TRUE(store_->Create(MakeObject("old")).ok());
  WatchHub hub(*store_, WatchHubOptions{});
  hub.Start();
  auto w = std::make_shared<RecordingWatcher>();
  ASSERT_TRUE(hub.Subscribe(w, *store_->CurrentRevision()).ok());
  ASSERT_TRUE(store_->Create(MakeObject("new")).ok());
  EXPECT_EQ(w->WaitFor(1), (std::vector<std::string>{"ADDED new"}));
  hub.Stop();
}

TEST_F(WatchHubTest, CompactedRevisionIsExpired) {
  auto first = store_->Create(MakeObject("x1"));
  for (int i = 2; i < 6; ++i) ASSERT_TRUE(store_->Create(MakeObject("x" + std::to_string(i))).ok());
  ASSERT_TRUE(store_->Compact(first->meta.resource_version + 2).ok());
  WatchHub hub(*store_, WatchHubOptions{});
  hub.Start();
  auto w = std::make_shared<RecordingWatcher>();
  absl::Status st = hub.Subscribe(w, first->meta.resource_version);
  EXPECT_TRUE(absl::IsOutOfRange(st)) << st;
  EXPECT_NE(st.message().find("too old resource version"), absl::string_view::npos);
  hub.Stop();
}

}  // namespace
}  // namespace qm::service
