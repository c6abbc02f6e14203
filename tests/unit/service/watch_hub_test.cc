// The watch hub holds its lock across neither store reads nor watcher calls: a watch resuming
// from an old revision whose history read is stuck, or a watcher that is stuck, leaves the other
// watches, lists and lookups going; every watcher still sees every change once, in order.

#include "service/watch_hub.h"

#include <chrono>
#include <condition_variable>
#include <future>
#include <initializer_list>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "forwarding_store.h"
#include "gtest/gtest.h"

namespace qm::service {
namespace {

constexpr auto kPrompt = std::chrono::seconds(5);

// Reads of the change log after revision `gated_rv` wait until Open() (the follower reads from
// the newest revision, so only a subscriber resuming from `gated_rv` is held).
class GatedStore final : public fakes::ForwardingStore {
 public:
  absl::StatusOr<std::vector<model::WatchEvent>> ChangesSince(int64_t rv, int64_t limit) override {
    if (rv == gated_rv) {
      std::unique_lock<std::mutex> lock(mu_);
      ++waiting_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return open_; });
    }
    return inner.ChangesSince(rv, limit);
  }

  bool WaitUntilHeld() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kPrompt, [&] { return waiting_ > 0; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

  int64_t gated_rv = -1;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_ = 0;
  bool open_ = false;
};

// Records the names of the objects it is given; a gated one blocks in Deliver until opened.
class RecordingWatcher : public Watcher {
 public:
  explicit RecordingWatcher(bool gated = false) : gated_(gated) {}

  bool Deliver(const model::WatchEvent& e) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (gated_) {
      ++blocked_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return !gated_; });
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

  // The names seen once there are `n` (or what there is after kPrompt).
  std::vector<std::string> WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, kPrompt, [&] { return names_.size() >= n; });
    return names_;
  }
  bool WaitUntilBlocked() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kPrompt, [&] { return blocked_ > 0; });
  }
  absl::Status WaitForExpiry() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, kPrompt, [&] { return !expired_.ok(); });
    return expired_;
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    gated_ = false;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool gated_;
  int blocked_ = 0;
  std::vector<std::string> names_;
  absl::Status expired_;
};

model::Object Thing(const std::string& name) {
  model::Object o;
  o.resource = "things";
  o.meta.name = name;
  o.meta.uid = "uid-" + name;
  o.body = "{}";
  return o;
}

// An object of `resource` with selectable `fields` (what the hub's field index holds).
model::Object WithFields(const std::string& resource, const std::string& ns,
                         const std::string& name, std::map<std::string, std::string> fields) {
  model::Object o = Thing(name);
  o.resource = resource;
  o.meta.namespace_ = ns;
  o.meta.uid = "uid-" + ns + "-" + name;
  o.fields = std::move(fields);
  return o;
}

// The objects a list from `hub` with field `selector` (over `supported` fields) returns, as
// "namespace/name" ("name" when cluster-scoped); sets *more when given.
std::vector<std::string> ListedNames(WatchHub& hub, ListRequest request,
                                     const std::string& selector,
                                     const std::vector<std::string>& supported, int64_t min_rv,
                                     bool* more = nullptr) {
  auto fields = model::FieldSelector::Parse(selector, supported);
  EXPECT_TRUE(fields.ok()) << fields.status();
  if (fields.ok()) request.fields = *fields;
  auto listed = hub.List(request, min_rv);
  EXPECT_TRUE(listed.ok()) << listed.status();
  std::vector<std::string> out;
  if (!listed.ok()) return out;
  for (const auto& o : listed->items) {
    out.push_back(o->meta.namespace_.empty() ? o->meta.name
                                             : o->meta.namespace_ + "/" + o->meta.name);
  }
  if (more != nullptr) *more = listed->more;
  return out;
}

class WatchHubTest : public ::testing::Test {
 protected:
  // Creates `objects` in the store, in order.
  void CreateAll(std::initializer_list<model::Object> objects) {
    for (const auto& o : objects) {
      auto created = store_.Create(o);
      ASSERT_TRUE(created.ok()) << o.meta.name << ": " << created.status();
    }
  }

  int64_t Put(const std::string& name) {
    auto created = store_.Create(Thing(name));
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? created->meta.resource_version : 0;
  }

  // A list of "things" from the cache at the store's current revision, on another thread, so
  // that a hub that blocks fails the test instead of hanging it.
  std::future<size_t> ListLater(WatchHub& hub) {
    return std::async(std::launch::async, [&hub, this]() -> size_t {
      ListRequest request;
      request.store.resource = "things";
      auto listed = hub.List(request, *store_.CurrentRevision());
      return listed.ok() ? listed->items.size() : 0;
    });
  }

  GatedStore store_;
};

TEST_F(WatchHubTest, LastChangesMoveOnlyForTheResourceThatChanged) {
  const int64_t loaded = Put("a");
  WatchHub hub(store_, WatchHubOptions{});
  hub.Start();
  const std::vector<std::string> kinds = {"things", "others"};
  auto at = [&](int64_t rv) {
    auto r = hub.LastChanges(kinds, rv);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : std::vector<int64_t>{};
  };
  // Nothing changed since the cache was loaded: both answer the load's revision.
  EXPECT_EQ(at(loaded), (std::vector<int64_t>{loaded, loaded}));
  const int64_t b = Put("b");
  EXPECT_EQ(at(b), (std::vector<int64_t>{b, loaded}));
  model::Object other = Thing("x");
  other.resource = "others";
  auto created = store_.Create(other);
  ASSERT_TRUE(created.ok());
  const int64_t x = created->meta.resource_version;
  EXPECT_EQ(at(x), (std::vector<int64_t>{b, x}));
  auto deleted = store_.Delete(model::ResourceKey{"things", "", "a"}, 0);
  ASSERT_TRUE(deleted.ok());
  const int64_t gone = deleted->meta.resource_version;
  EXPECT_EQ(at(gone), (std::vector<int64_t>{gone, x}));
  // Versions: the keys and resourceVersions of one resource, in key order.
  const int64_t c = Put("c");
  auto versions = hub.Versions("things", c);
  ASSERT_TRUE(versions.ok()) << versions.status();
  EXPECT_EQ(*versions, (std::vector<std::pair<model::ResourceKey, int64_t>>{
                           {model::ResourceKey{"things", "", "b"}, b},
                           {model::ResourceKey{"things", "", "c"}, c}}));
  hub.Stop();
}

// The cache hands out its objects without copying them: the same pointer until the object
// changes, and a change makes a new object instead of editing the one a caller holds.
TEST_F(WatchHubTest, CachedObjectsAreSharedAndNeverChangeUnderTheirHolder) {
  const int64_t first = Put("a");
  WatchHub hub(store_, WatchHubOptions{});
  hub.Start();
  const model::ResourceKey a{"things", "", "a"};
  auto found = hub.FindCurrent(a, first, kPrompt);
  ASSERT_TRUE(found.ok()) << found.status();
  std::shared_ptr<const model::Object> held = *found;
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(hub.Find(a), held);
  model::Object next = *held;
  next.body = R"({"spec":{"size":2}})";
  auto updated = store_.Update(next, first);
  ASSERT_TRUE(updated.ok()) << updated.status();
  auto after = hub.FindCurrent(a, updated->meta.resource_version, kPrompt);
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_NE(*after, nullptr);
  EXPECT_NE(*after, held);
  EXPECT_EQ((*after)->meta.resource_version, updated->meta.resource_version);
  EXPECT_EQ((*after)->body, R"({"spec":{"size":2}})");
  EXPECT_EQ(held->meta.resource_version, first);
  EXPECT_EQ(held->body, "{}");
  hub.Stop();
}

TEST_F(WatchHubTest, ListsHandOutTheCachedObjectsThemselves) {
  Put("a");
  const int64_t last = Put("b");
  WatchHub hub(store_, WatchHubOptions{});
  hub.Start();
  ListRequest request;
  request.store.resource = "things";
  auto listed = hub.List(request, last);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->items.size(), 2u);
  // No copies: each item is the cached object that Find hands out.
  EXPECT_EQ(listed->items[0], hub.Find(model::ResourceKey{"things", "", "a"}));
  EXPECT_EQ(listed->items[1], hub.Find(model::ResourceKey{"things", "", "b"}));
  // A later change replaces the cached object; the list keeps what it was given.
  model::Object next = *listed->items[0];
  next.body = R"({"spec":{"size":3}})";
  auto updated = store_.Update(next, listed->items[0]->meta.resource_version);
  ASSERT_TRUE(updated.ok()) << updated.status();
  auto after = hub.List(request, updated->meta.resource_version);
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_EQ(after->items.size(), 2u);
  EXPECT_NE(after->items[0], listed->items[0]);
  EXPECT_EQ(after->items[0]->body, R"({"spec":{"size":3}})");
  EXPECT_EQ(listed->items[0]->body, "{}");
  EXPECT_EQ(after->items[1], listed->items[1]);
  hub.Stop();
}

// Lists by spec.nodeName (what a node's agent asks for) go through the hub's index of pods and
// slices by node; they must answer exactly what a scan of every object would.
TEST_F(WatchHubTest, ListsByNodeAnswerWhatAScanWould) {
  auto pod = [](const std::string& ns, const std::string& name, const std::string& node) {
    std::map<std::string, std::string> fields;
    if (!node.empty()) fields["spec.nodeName"] = node;
    return WithFields("pods", ns, name, std::move(fields));
  };
  CreateAll({pod("b", "p1", "n1"), pod("a", "p2", "n1"), pod("a", "p3", "n2"), pod("a", "p4", "")});
  if (HasFatalFailure()) return;
  WatchHub hub(store_, WatchHubOptions{});
  hub.Start();
  // Loaded with the cache, then kept with it: a pod that joins, one that moves, one that goes.
  ASSERT_TRUE(store_.Create(pod("a", "p0", "n1")).ok());
  auto p3 = store_.Get(model::ResourceKey{"pods", "a", "p3"});
  ASSERT_TRUE(p3.ok());
  p3->fields["spec.nodeName"] = "n1";
  ASSERT_TRUE(store_.Update(*p3, p3->meta.resource_version).ok());
  auto gone = store_.Delete(model::ResourceKey{"pods", "b", "p1"}, 0);
  ASSERT_TRUE(gone.ok());
  const int64_t now = gone->meta.resource_version;

  auto names = [&](const std::string& selector, const std::string& ns, int64_t limit,
                   const std::string& after_ns, const std::string& after_name, bool* more) {
    ListRequest request;
    request.store.resource = "pods";
    request.store.namespace_ = ns;
    request.store.limit = limit;
    request.store.after_namespace = after_ns;
    request.store.after_name = after_name;
    return ListedNames(hub, request, selector, {"spec.nodeName"}, now, more);
  };
  using Names = std::vector<std::string>;
  bool more = true;
  EXPECT_EQ(names("spec.nodeName=n1", "", 0, "", "", &more), (Names{"a/p0", "a/p2", "a/p3"}));
  EXPECT_FALSE(more);
  EXPECT_EQ(names("spec.nodeName=n2", "", 0, "", "", nullptr), Names{});
  EXPECT_EQ(names("spec.nodeName=n1,metadata.name!=p2", "", 0, "", "", nullptr),
            (Names{"a/p0", "a/p3"}));
  EXPECT_EQ(names("spec.nodeName=n1", "b", 0, "", "", nullptr), Names{});
  // Pages: a limit, then the rest after the last one returned.
  EXPECT_EQ(names("spec.nodeName=n1", "", 2, "", "", &more), (Names{"a/p0", "a/p2"}));
  EXPECT_TRUE(more);
  EXPECT_EQ(names("spec.nodeName=n1", "", 2, "a", "p2", &more), (Names{"a/p3"}));
  EXPECT_FALSE(more);
  // Selectors the index does not serve are scanned as before.
  EXPECT_EQ(names("spec.nodeName=", "", 0, "", "", nullptr), (Names{"a/p4"}));
  EXPECT_EQ(names("spec.nodeName!=n1", "", 0, "", "", nullptr), (Names{"a/p4"}));
  hub.Stop();
}

// Slices are indexed by node and by pool; a selector on both is served by one index and
// filtered by the other requirement.
TEST_F(WatchHubTest, ListsOfSlicesByPoolOrNodeAnswerWhatAScanWould) {
  constexpr char kSlices[] = "resourceslices.resource.k8s.io";
  auto slice = [&](const std::string& name, const std::string& node, const std::string& pool) {
    std::map<std::string, std::string> fields = {{"spec.pool.name", pool}};
    if (!node.empty()) fields["spec.nodeName"] = node;
    return WithFields(kSlices, "", name, std::move(fields));
  };
  CreateAll({slice("s1", "n1", "pool-a"), slice("s2", "n1", "pool-b"), slice("s3", "", "pool-a")});
  if (HasFatalFailure()) return;
  WatchHub hub(store_, WatchHubOptions{});
  hub.Start();
  ASSERT_TRUE(store_.Create(slice("s4", "n2", "pool-b")).ok());
  auto s1 = store_.Get(model::ResourceKey{kSlices, "", "s1"});
  ASSERT_TRUE(s1.ok());
  s1->fields["spec.pool.name"] = "pool-c";
  auto moved = store_.Update(*s1, s1->meta.resource_version);
  ASSERT_TRUE(moved.ok());
  const int64_t now = moved->meta.resource_version;
  auto names = [&](const std::string& selector) {
    ListRequest request;
    request.store.resource = kSlices;
    return ListedNames(hub, request, selector, {"spec.nodeName", "spec.pool.name"}, now);
  };
  using Names = std::vector<std::string>;
  EXPECT_EQ(names("spec.pool.name=pool-a"), (Names{"s3"}));
  EXPECT_EQ(names("spec.pool.name=pool-b"), (Names{"s2", "s4"}));
  EXPECT_EQ(names("spec.pool.name=pool-c"), (Names{"s1"}));
  EXPECT_EQ(names("spec.nodeName=n1"), (Names{"s1", "s2"}));
  EXPECT_EQ(names("spec.nodeName=n1,spec.pool.name=pool-b"), (Names{"s2"}));
  EXPECT_EQ(names("spec.pool.name=pool-b,spec.nodeName=n2"), (Names{"s4"}));
  EXPECT_EQ(names("spec.pool.name=pool-a,spec.nodeName=n1"), Names{});
  hub.Stop();
}

TEST_F(WatchHubTest, FindCurrentAnswersOnlyOnceTheCacheHasAppliedTheRevision) {
  Put("a");
  WatchHub hub(store_, WatchHubOptions{});
  const model::ResourceKey a{"things", "", "a"};
  // No cache loaded yet: no answer, however long it may wait.
  EXPECT_TRUE(absl::IsUnavailable(hub.FindCurrent(a, 0, std::chrono::milliseconds(1)).status()));
  hub.Start();
  const int64_t b = Put("b");
  // Waits for the follower to apply the create of "b", then answers from the cache.
  auto found = hub.FindCurrent(model::ResourceKey{"things", "", "b"}, b, kPrompt);
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_NE(*found, nullptr);
  EXPECT_EQ((*found)->meta.resource_version, b);
  auto deleted = store_.Delete(a, 0);
  ASSERT_TRUE(deleted.ok());
  auto gone = hub.FindCurrent(a, deleted->meta.resource_version, kPrompt);
  ASSERT_TRUE(gone.ok()) << gone.status();
  EXPECT_EQ(*gone, nullptr);
  // A revision the store has not reached: the cache cannot have applied it.
  const int64_t future = deleted->meta.resource_version + 100;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(
      absl::IsUnavailable(hub.FindCurrent(a, future, std::chrono::milliseconds(20)).status()));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(20));
  hub.Stop();
}

TEST_F(WatchHubTest, AResumingWatchStuckReadingHistoryStallsNoOne) {
  const int64_t first = Put("a");
  Put("b");
  WatchHub hub(store_, WatchHubOptions{});
  hub.Start();
  auto live = std::make_shared<RecordingWatcher>();
  ASSERT_TRUE(hub.Subscribe(live, hub.last_dispatched()).ok());

  // A watch resuming from `first` needs history from the store; that read is stuck.
  store_.gated_rv = first;
  auto resumer = std::make_shared<RecordingWatcher>();
  auto subscribed = std::async(std::launch::async, [&] { return hub.Subscribe(resumer, first); });
  ASSERT_TRUE(store_.WaitUntilHeld());

  // Meanwhile the other watch gets new changes, lists and lookups answer, new watches start.
  Put("c");
  EXPECT_EQ(live->WaitFor(1), std::vector<std::string>{"c"});
  auto listed = ListLater(hub);
  ASSERT_EQ(listed.wait_for(kPrompt), std::future_status::ready);
  EXPECT_EQ(listed.get(), 3u);
  EXPECT_NE(hub.Find(model::ResourceKey{"things", "", "c"}), nullptr);
  auto another = std::make_shared<RecordingWatcher>();
  ASSERT_TRUE(hub.Subscribe(another, hub.last_dispatched()).ok());
  Put("d");
  EXPECT_EQ(live->WaitFor(2), (std::vector<std::string>{"c", "d"}));
  EXPECT_EQ(another->WaitFor(1), std::vector<std::string>{"d"});

  // Once the read completes, the resumed watch gets its history and then the changes made
  // meanwhile: each once, in order.
  store_.Open();
  ASSERT_EQ(subscribed.wait_for(kPrompt), std::future_status::ready);
  EXPECT_TRUE(subscribed.get().ok());
  Put("e");
  EXPECT_EQ(resumer->WaitFor(4), (std::vector<std::string>{"b", "c", "d", "e"}));
  EXPECT_EQ(live->WaitFor(3), (std::vector<std::string>{"c", "d", "e"}));
  hub.Stop();
}

TEST_F(WatchHubTest, AStuckWatcherStallsNoOneAndIsEndedWhenTooFarBehind) {
  WatchHubOptions options;
  options.delivery_threads = 2;
  options.max_queued_per_watcher = 3;
  WatchHub hub(store_, options);
  hub.Start();
  auto stuck = std::make_shared<RecordingWatcher>(/*gated=*/true);
  auto fine = std::make_shared<RecordingWatcher>();
  ASSERT_TRUE(hub.Subscribe(stuck, hub.last_dispatched()).ok());
  ASSERT_TRUE(hub.Subscribe(fine, hub.last_dispatched()).ok());

  Put("a");
  ASSERT_TRUE(stuck->WaitUntilBlocked());
  // One at a time (a batch larger than the limit would end even a prompt watcher).
  std::vector<std::string> sent = {"a"};
  for (const char* name : {"b", "c", "d", "e"}) {
    Put(name);
    sent.push_back(name);
    ASSERT_EQ(fine->WaitFor(sent.size()), sent);
  }
  auto listed = ListLater(hub);
  ASSERT_EQ(listed.wait_for(kPrompt), std::future_status::ready);
  EXPECT_EQ(listed.get(), 5u);

  // Four changes waited for it, one more than allowed: it ends with 410 once it wakes up.
  stuck->Open();
  absl::Status expired = stuck->WaitForExpiry();
  EXPECT_TRUE(absl::IsOutOfRange(expired)) << expired;
  EXPECT_EQ(stuck->WaitFor(1), std::vector<std::string>{"a"});
  for (int i = 0; i < 500 && hub.watcher_count() != 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(hub.watcher_count(), 1u);
  hub.Stop();
}

// Resuming while changes keep coming: history from the store and live changes meet without a
// gap or a repeat.
TEST_F(WatchHubTest, ResumingDuringWritesSeesEveryChangeOnceInOrder) {
  const int64_t first = Put("x0");
  WatchHub hub(store_, WatchHubOptions{});
  hub.Start();
  constexpr int kWrites = 300;
  std::thread writer([&] {
    for (int i = 1; i <= kWrites; ++i) Put("x" + std::to_string(i));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(2));  // let some history accumulate
  auto resumer = std::make_shared<RecordingWatcher>();
  ASSERT_TRUE(hub.Subscribe(resumer, first).ok());
  writer.join();
  std::vector<std::string> expected;
  for (int i = 1; i <= kWrites; ++i) expected.push_back("x" + std::to_string(i));
  EXPECT_EQ(resumer->WaitFor(kWrites), expected);
  hub.Stop();
}

}  // namespace
}  // namespace qm::service
