// One conformance suite for the Store contract (src/store/store.h), run against every
// implementation: the in-memory store and the PostgreSQL store.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "pg_test_env.h"
#include "store/memory_store.h"
#include "store/pg/pg_store.h"

namespace qm::store {
namespace {

using nlohmann::json;

model::Object MakeObject(const std::string& resource, const std::string& ns,
                         const std::string& name, const std::string& body = R"({"spec":{"a":1}})") {
  model::Object o;
  o.resource = resource;
  o.meta.name = name;
  o.meta.namespace_ = ns;
  o.meta.uid = "uid-" + resource + "-" + ns + "-" + name;
  o.meta.generation = 1;
  o.meta.creation_timestamp =
      std::chrono::system_clock::time_point(std::chrono::seconds(1700000000));
  o.meta.labels = {{"app", "demo"}};
  o.meta.annotations = {{"note", "x"}};
  o.meta.finalizers = {"example.com/f"};
  o.body = body;
  o.spec_digest = body;
  o.fields = {{"metadata.name", name}, {"spec.nodeName", "n1"}};
  return o;
}

struct MemoryFactory {
  static std::unique_ptr<Store> Make() { return std::make_unique<MemoryStore>(); }
};

struct PgFactory {
  static std::unique_ptr<Store> Make() {
    testing::PgTestEnv::Get().Reset();
    auto s = pg::PgStore::Open(testing::PgTestEnv::Get().url(), 4);
    EXPECT_TRUE(s.ok()) << s.status();
    return std::move(s).value();
  }
};

template <typename Factory>
class StoreConformanceTest : public ::testing::Test {
 protected:
  void SetUp() override { store_ = Factory::Make(); }
  std::unique_ptr<Store> store_;
};

using Factories = ::testing::Types<MemoryFactory, PgFactory>;
TYPED_TEST_SUITE(StoreConformanceTest, Factories);

TYPED_TEST(StoreConformanceTest, CreateAssignsIncreasingRevisionsAndRoundTrips) {
  auto a = this->store_->Create(MakeObject("things", "ns", "a"));
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = this->store_->Create(MakeObject("things", "ns", "b"));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_GT(a->meta.resource_version, 0);
  EXPECT_GT(b->meta.resource_version, a->meta.resource_version);

  auto got = this->store_->Get(model::ResourceKey{"things", "ns", "a"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->meta, a->meta);
  EXPECT_EQ(got->meta.labels.at("app"), "demo");
  EXPECT_EQ(got->meta.finalizers, std::vector<std::string>{"example.com/f"});
  EXPECT_EQ(json::parse(got->body), json::parse(R"({"spec":{"a":1}})"));
  EXPECT_EQ(got->fields.at("spec.nodeName"), "n1");
  EXPECT_EQ(got->spec_digest, R"({"spec":{"a":1}})");
}

TYPED_TEST(StoreConformanceTest, CreateOfExistingKeyIsAlreadyExists) {
  ASSERT_TRUE(this->store_->Create(MakeObject("things", "ns", "a")).ok());
  auto again = this->store_->Create(MakeObject("things", "ns", "a"));
  EXPECT_TRUE(absl::IsAlreadyExists(again.status())) << again.status();
  // Same name in another namespace or resource is a different key.
  EXPECT_TRUE(this->store_->Create(MakeObject("things", "other", "a")).ok());
  EXPECT_TRUE(this->store_->Create(MakeObject("others", "ns", "a")).ok());
}

TYPED_TEST(StoreConformanceTest, UpdateChecksExpectedRevision) {
  auto a = this->store_->Create(MakeObject("things", "ns", "a"));
  ASSERT_TRUE(a.ok());
  model::Object next = *a;
  next.body = R"({"spec":{"a":2}})";
  auto stale = this->store_->Update(next, a->meta.resource_version + 100);
  EXPECT_TRUE(absl::IsAborted(stale.status())) << stale.status();
  auto updated = this->store_->Update(next, a->meta.resource_version);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_GT(updated->meta.resource_version, a->meta.resource_version);
  // The old revision is now stale too.
  auto again = this->store_->Update(next, a->meta.resource_version);
  EXPECT_TRUE(absl::IsAborted(again.status()));
  // 0 skips the check.
  EXPECT_TRUE(this->store_->Update(next, 0).ok());
  auto got = this->store_->Get(a->Key());
  EXPECT_EQ(json::parse(got->body)["spec"]["a"], 2);
}

TYPED_TEST(StoreConformanceTest, UpdateAndDeleteOfMissingKeyAreNotFound) {
  auto u = this->store_->Update(MakeObject("things", "ns", "ghost"), 0);
  EXPECT_TRUE(absl::IsNotFound(u.status())) << u.status();
  auto d = this->store_->Delete(model::ResourceKey{"things", "ns", "ghost"}, 0);
  EXPECT_TRUE(absl::IsNotFound(d.status())) << d.status();
  auto g = this->store_->Get(model::ResourceKey{"things", "ns", "ghost"});
  EXPECT_TRUE(absl::IsNotFound(g.status()));
}

TYPED_TEST(StoreConformanceTest, DeleteReturnsLastStateWithNewRevision) {
  auto a = this->store_->Create(MakeObject("things", "ns", "a"));
  ASSERT_TRUE(a.ok());
  auto stale = this->store_->Delete(a->Key(), a->meta.resource_version + 7);
  EXPECT_TRUE(absl::IsAborted(stale.status()));
  auto d = this->store_->Delete(a->Key(), a->meta.resource_version);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_GT(d->meta.resource_version, a->meta.resource_version);
  EXPECT_EQ(d->meta.uid, a->meta.uid);
  EXPECT_TRUE(absl::IsNotFound(this->store_->Get(a->Key()).status()));
}

TYPED_TEST(StoreConformanceTest, ListOrdersByKeyFiltersNamespaceAndPages) {
  for (auto [ns, name] : std::vector<std::pair<std::string, std::string>>{
           {"b", "x"}, {"a", "z"}, {"a", "y"}, {"c", "w"}}) {
    ASSERT_TRUE(this->store_->Create(MakeObject("things", ns, name)).ok());
  }
  ASSERT_TRUE(this->store_->Create(MakeObject("others", "a", "q")).ok());
  ListOptions all;
  all.resource = "things";
  auto list = this->store_->List(all);
  ASSERT_TRUE(list.ok()) << list.status();
  std::vector<std::string> names;
  for (const auto& o : list->items) names.push_back(o->meta.namespace_ + "/" + o->meta.name);
  EXPECT_EQ(names, (std::vector<std::string>{"a/y", "a/z", "b/x", "c/w"}));
  EXPECT_FALSE(list->more);
  auto rev = this->store_->CurrentRevision();
  ASSERT_TRUE(rev.ok());
  EXPECT_EQ(list->resource_version, *rev);

  ListOptions in_a = all;
  in_a.namespace_ = "a";
  EXPECT_EQ(this->store_->List(in_a)->items.size(), 2u);

  ListOptions page = all;
  page.limit = 3;
  auto p1 = this->store_->List(page);
  ASSERT_EQ(p1->items.size(), 3u);
  EXPECT_TRUE(p1->more);
  page.after_namespace = p1->items.back()->meta.namespace_;
  page.after_name = p1->items.back()->meta.name;
  auto p2 = this->store_->List(page);
  ASSERT_EQ(p2->items.size(), 1u);
  EXPECT_EQ(p2->items[0]->meta.name, "w");
  EXPECT_FALSE(p2->more);
}

TYPED_TEST(StoreConformanceTest, EmptyListsAndReadsAtTheTipStillCarryTheRevision) {
  ASSERT_TRUE(this->store_->Create(MakeObject("things", "ns", "a")).ok());
  auto rev = this->store_->CurrentRevision();
  ASSERT_TRUE(rev.ok());
  ListOptions none;
  none.resource = "nothings";
  auto list = this->store_->List(none);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_TRUE(list->items.empty());
  EXPECT_FALSE(list->more);
  EXPECT_EQ(list->resource_version, *rev);
  ListOptions past_the_end;
  past_the_end.resource = "things";
  past_the_end.after_namespace = "zz";
  auto tail = this->store_->List(past_the_end);
  ASSERT_TRUE(tail.ok()) << tail.status();
  EXPECT_TRUE(tail->items.empty());
  EXPECT_EQ(tail->resource_version, *rev);
  auto changes = this->store_->ChangesSince(*rev, 0);
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_TRUE(changes->empty());
}

TYPED_TEST(StoreConformanceTest, ChangeLogRecordsEveryWriteInOrder) {
  auto start = this->store_->CurrentRevision();
  ASSERT_TRUE(start.ok());
  auto a = this->store_->Create(MakeObject("things", "ns", "a"));
  model::Object next = *a;
  next.body = R"({"spec":{"a":3}})";
  ASSERT_TRUE(this->store_->Update(next, 0).ok());
  ASSERT_TRUE(this->store_->Delete(a->Key(), 0).ok());
  auto events = this->store_->ChangesSince(*start, 0);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 3u);
  EXPECT_EQ((*events)[0].type, model::EventType::kAdded);
  EXPECT_EQ((*events)[1].type, model::EventType::kModified);
  EXPECT_EQ(json::parse((*events)[1].object.body)["spec"]["a"], 3);
  EXPECT_EQ((*events)[2].type, model::EventType::kDeleted);
  EXPECT_EQ((*events)[2].object.meta.labels.at("app"), "demo");
  for (size_t i = 1; i < events->size(); ++i) {
    EXPECT_GT((*events)[i].object.meta.resource_version,
              (*events)[i - 1].object.meta.resource_version);
  }
  // Resuming from the middle returns only what came after.
  auto tail = this->store_->ChangesSince((*events)[1].object.meta.resource_version, 0);
  ASSERT_EQ(tail->size(), 1u);
  EXPECT_EQ((*tail)[0].type, model::EventType::kDeleted);
  auto limited = this->store_->ChangesSince(*start, 2);
  EXPECT_EQ(limited->size(), 2u);
}

TYPED_TEST(StoreConformanceTest, CompactedRevisionsAreOutOfRange) {
  std::vector<int64_t> revs;
  for (int i = 0; i < 5; ++i) {
    auto o = this->store_->Create(MakeObject("things", "ns", "o" + std::to_string(i)));
    ASSERT_TRUE(o.ok());
    revs.push_back(o->meta.resource_version);
  }
  ASSERT_TRUE(this->store_->Compact(revs[2]).ok());
  auto expired = this->store_->ChangesSince(revs[0], 0);
  EXPECT_TRUE(absl::IsOutOfRange(expired.status())) << expired.status();
  auto ok = this->store_->ChangesSince(revs[2], 0);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->size(), 2u);
  // Compaction never removes the newest entry, so the current revision stays known.
  ASSERT_TRUE(this->store_->Compact(revs[4] + 100).ok());
  EXPECT_EQ(*this->store_->CurrentRevision(), revs[4]);
}

TYPED_TEST(StoreConformanceTest, WaitForChangesWakesOnWrite) {
  auto rev = this->store_->CurrentRevision();
  ASSERT_TRUE(rev.ok());
  this->store_->WaitForChanges(*rev, std::chrono::milliseconds(1));  // arms a listener if any
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_TRUE(this->store_->Create(MakeObject("things", "ns", "late")).ok());
  });
  auto begin = std::chrono::steady_clock::now();
  while (this->store_->ChangesSince(*rev, 0)->empty()) {
    this->store_->WaitForChanges(*rev, std::chrono::milliseconds(5000));
    ASSERT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(10));
  }
  writer.join();
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(4));
}

TYPED_TEST(StoreConformanceTest, ConcurrentConditionalUpdatesHaveOneWinner) {
  auto a = this->store_->Create(MakeObject("things", "ns", "hot"));
  ASSERT_TRUE(a.ok());
  std::atomic<int> wins{0}, conflicts{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      model::Object next = *a;
      next.body = R"({"spec":{"writer":)" + std::to_string(i) + "}}";
      auto r = this->store_->Update(next, a->meta.resource_version);
      if (r.ok()) {
        wins++;
      } else if (absl::IsAborted(r.status())) {
        conflicts++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wins.load(), 1);
  EXPECT_EQ(conflicts.load(), 3);
}

TYPED_TEST(StoreConformanceTest, RevisionsCommitInOrderUnderConcurrentWriters) {
  auto start = this->store_->CurrentRevision();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        ASSERT_TRUE(this->store_
                        ->Create(MakeObject("things", "ns",
                                            "t" + std::to_string(t) + "-" + std::to_string(i)))
                        .ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  auto events = this->store_->ChangesSince(*start, 0);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 100u);
  // Dense and ordered: no revision is skipped or appears late.
  for (size_t i = 1; i < events->size(); ++i) {
    EXPECT_EQ((*events)[i].object.meta.resource_version,
              (*events)[i - 1].object.meta.resource_version + 1);
  }
}

DeviceClaim Row(const std::string& device, const std::string& claim, const std::string& share = "",
                bool admin = false) {
  return DeviceClaim{"gpu.example.com", "pool-a", device, share, claim, admin, "{}", {}};
}

TYPED_TEST(StoreConformanceTest, CommitAppliesEveryWriteWithItsOwnRevision) {
  auto a = this->store_->Create(MakeObject("things", "ns", "a"));
  auto gone = this->store_->Create(MakeObject("things", "ns", "gone"));
  ASSERT_TRUE(a.ok() && gone.ok());
  model::Object next = *a;
  next.body = R"({"spec":{"x":2}})";
  Transaction txn;
  txn.writes.push_back({Write::Kind::kUpdate, next, {}, a->meta.resource_version});
  txn.writes.push_back({Write::Kind::kCreate, MakeObject("things", "ns", "b"), {}, 0});
  txn.writes.push_back({Write::Kind::kDelete, {}, gone->Key(), gone->meta.resource_version});
  txn.claim_devices.push_back(Row("dev-0", "uid-1"));
  auto committed = this->store_->Commit(txn);
  ASSERT_TRUE(committed.ok()) << committed.status();
  ASSERT_EQ(committed->size(), 3u);
  EXPECT_GT((*committed)[1].meta.resource_version, (*committed)[0].meta.resource_version);
  EXPECT_GT((*committed)[2].meta.resource_version, (*committed)[1].meta.resource_version);
  EXPECT_EQ(nlohmann::json::parse(this->store_->Get(a->Key())->body),
            nlohmann::json::parse(next.body));
  EXPECT_TRUE(this->store_->Get(MakeObject("things", "ns", "b").Key()).ok());
  EXPECT_TRUE(absl::IsNotFound(this->store_->Get(gone->Key()).status()));
  auto events = this->store_->ChangesSince(gone->meta.resource_version, 0);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 3u);
  EXPECT_EQ((*events)[0].type, model::EventType::kModified);
  EXPECT_EQ((*events)[1].type, model::EventType::kAdded);
  EXPECT_EQ((*events)[2].type, model::EventType::kDeleted);
  auto ledger = this->store_->ListDeviceClaims();
  ASSERT_TRUE(ledger.ok());
  ASSERT_EQ(ledger->size(), 1u);
  EXPECT_EQ((*ledger)[0].device, "dev-0");
  EXPECT_EQ((*ledger)[0].claim_uid, "uid-1");
}

TYPED_TEST(StoreConformanceTest, CommitReportsEachKindOfFailureAndKeepsBodiesExact) {
  auto a = this->store_->Create(MakeObject("things", "ns", "a"));
  ASSERT_TRUE(a.ok());
  Transaction missing;
  missing.writes.push_back({Write::Kind::kUpdate, MakeObject("things", "ns", "nope"), {}, 0});
  EXPECT_TRUE(absl::IsNotFound(this->store_->Commit(missing).status()));
  Transaction exists;
  exists.writes.push_back({Write::Kind::kCreate, MakeObject("things", "ns", "a"), {}, 0});
  EXPECT_TRUE(absl::IsAlreadyExists(this->store_->Commit(exists).status()));
  // Quotes, backslashes, braces, commas and non-ASCII text survive a transaction unchanged.
  model::Object odd = MakeObject("things", "ns", "odd \"quoted\"");
  odd.body = R"({"spec":{"text":"a \"b\" \\ c {d}, e\u00e9 \u2603","list":["x,y","{}"]}})";
  odd.meta.labels = {{"k", "v,w"}};
  odd.meta.annotations = {{"note", "say \"hi\" \\ {}"}};
  Transaction txn;
  txn.writes.push_back({Write::Kind::kCreate, odd, {}, 0});
  auto committed = this->store_->Commit(txn);
  ASSERT_TRUE(committed.ok()) << committed.status();
  auto stored = this->store_->Get(odd.Key());
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(nlohmann::json::parse(stored->body), nlohmann::json::parse(odd.body));
  EXPECT_EQ(stored->meta.labels, odd.meta.labels);
  EXPECT_EQ(stored->meta.annotations, odd.meta.annotations);
  EXPECT_EQ(stored->meta.resource_version, (*committed)[0].meta.resource_version);
}

TYPED_TEST(StoreConformanceTest, CommitIsAllOrNothing) {
  auto a = this->store_->Create(MakeObject("things", "ns", "a"));
  ASSERT_TRUE(a.ok());
  // A stale revision in the last write undoes the create and the device row before it.
  Transaction stale;
  stale.writes.push_back({Write::Kind::kCreate, MakeObject("things", "ns", "new"), {}, 0});
  stale.writes.push_back({Write::Kind::kUpdate, *a, {}, a->meta.resource_version + 100});
  stale.claim_devices.push_back(Row("dev-0", "uid-1"));
  auto result = this->store_->Commit(stale);
  EXPECT_TRUE(absl::IsAborted(result.status())) << result.status();
  EXPECT_TRUE(
      absl::IsNotFound(this->store_->Get(MakeObject("things", "ns", "new").Key()).status()));
  EXPECT_TRUE(this->store_->ListDeviceClaims()->empty());
  auto events = this->store_->ChangesSince(a->meta.resource_version, 0);
  ASSERT_TRUE(events.ok());
  EXPECT_TRUE(events->empty());
  // A taken device undoes the object writes of its transaction.
  ASSERT_TRUE(this->store_->Commit(Transaction{{}, {Row("dev-1", "uid-1")}, {}}).ok());
  Transaction taken;
  taken.writes.push_back({Write::Kind::kCreate, MakeObject("things", "ns", "other"), {}, 0});
  taken.claim_devices.push_back(Row("dev-1", "uid-2"));
  result = this->store_->Commit(taken);
  EXPECT_TRUE(absl::IsAborted(result.status())) << result.status();
  EXPECT_NE(std::string(result.status().message()).find("already allocated"), std::string::npos);
  EXPECT_TRUE(
      absl::IsNotFound(this->store_->Get(MakeObject("things", "ns", "other").Key()).status()));
}

TYPED_TEST(StoreConformanceTest, DeviceLedgerAllowsSharesAdminAccessAndRelease) {
  ASSERT_TRUE(this->store_->Commit(Transaction{{}, {Row("dev-0", "uid-1")}, {}}).ok());
  // Admin access and consumable-capacity shares do not hold a device exclusively.
  EXPECT_TRUE(this->store_->Commit(Transaction{{}, {Row("dev-0", "uid-2", "", true)}, {}}).ok());
  EXPECT_TRUE(
      this->store_
          ->Commit(Transaction{{},
                               {Row("dev-5", "uid-3", "00000000-0000-4000-8000-000000000001"),
                                Row("dev-5", "uid-4", "00000000-0000-4000-8000-000000000002")},
                               {}})
          .ok());
  EXPECT_TRUE(
      absl::IsAborted(this->store_->Commit(Transaction{{}, {Row("dev-0", "uid-5")}, {}}).status()));
  // Releasing the holder and giving the device to another claim can happen in one transaction.
  auto moved = this->store_->Commit(Transaction{{}, {Row("dev-0", "uid-5")}, {"uid-1"}});
  EXPECT_TRUE(moved.ok()) << moved.status();
  auto ledger = this->store_->ListDeviceClaims();
  ASSERT_TRUE(ledger.ok());
  std::vector<std::string> rows;
  for (const auto& r : *ledger) rows.push_back(r.device + ":" + r.claim_uid);
  EXPECT_EQ(rows,
            (std::vector<std::string>{"dev-0:uid-2", "dev-0:uid-5", "dev-5:uid-3", "dev-5:uid-4"}));
}

TYPED_TEST(StoreConformanceTest, AllocationHistoryRecordsEveryLedgerChangeWithItsNamespace) {
  const auto before = std::chrono::system_clock::now() - std::chrono::seconds(1);
  const std::string claims = "resourceclaims.resource.k8s.io";
  auto c1 = this->store_->Create(MakeObject(claims, "team", "c1"));
  auto c2 = this->store_->Create(MakeObject(claims, "ml", "c2"));
  ASSERT_TRUE(c1.ok() && c2.ok());
  const std::string uid1 = c1->meta.uid;
  const std::string uid2 = c2->meta.uid;
  ASSERT_TRUE(this->store_->Commit(Transaction{{}, {Row("dev-0", uid1)}, {}}).ok());
  ASSERT_TRUE(
      this->store_->Commit(Transaction{{}, {Row("dev-1", uid2), Row("dev-2", uid2, "", true)}, {}})
          .ok());
  // The claim is deleted in the transaction that releases it: its namespace is still known.
  Transaction release;
  release.writes.push_back({Write::Kind::kDelete, {}, c1->Key(), 0});
  release.release_claims.push_back(uid1);
  ASSERT_TRUE(this->store_->Commit(release).ok());
  // A transaction that fails records nothing.
  EXPECT_FALSE(this->store_->Commit(Transaction{{}, {Row("dev-1", "uid-other")}, {}}).ok());

  auto history = this->store_->ReadAllocationHistory(before);
  ASSERT_TRUE(history.ok()) << history.status();
  std::vector<std::string> current;
  for (const auto& r : history->current) {
    current.push_back(r.device + ":" + r.claim_namespace + (r.admin_access ? ":admin" : ""));
  }
  std::sort(current.begin(), current.end());
  EXPECT_EQ(current, (std::vector<std::string>{"dev-1:ml", "dev-2:ml:admin"}));
  std::vector<std::string> events;
  for (size_t i = 0; i < history->events.size(); ++i) {
    const AllocationEvent& e = history->events[i];
    events.push_back(absl::StrCat(e.delta > 0 ? "+" : "-", e.row.device, ":", e.row.claim_namespace,
                                  e.row.admin_access ? ":admin" : ""));
    EXPECT_GT(e.time, before);
    if (i > 0) EXPECT_GE(e.time, history->events[i - 1].time);
  }
  // The two rows of one transaction may come in either order.
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0], "+dev-0:team");
  EXPECT_EQ((std::set<std::string>{events[1], events[2]}),
            (std::set<std::string>{"+dev-1:ml", "+dev-2:ml:admin"}));
  EXPECT_EQ(events[3], "-dev-0:team");

  // Later than every change: the ledger only; pruning keeps the ledger.
  const auto after = history->events.back().time;
  auto later = this->store_->ReadAllocationHistory(after);
  ASSERT_TRUE(later.ok());
  EXPECT_TRUE(later->events.empty());
  EXPECT_EQ(later->current.size(), 2u);
  auto pruned = this->store_->PruneAllocationHistory(after);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(*pruned, 3);
  auto rest = this->store_->ReadAllocationHistory(before);
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->events.size(), 1u);
  EXPECT_EQ(rest->events[0].row.device, "dev-0");
  EXPECT_EQ(rest->events[0].delta, -1);
  EXPECT_EQ(rest->current.size(), 2u);
}

TYPED_TEST(StoreConformanceTest, DeviceHistoryIsOneDevicesChangesNewestFirst) {
  const auto before = std::chrono::system_clock::now() - std::chrono::seconds(1);
  ASSERT_TRUE(this->store_->Commit(Transaction{{}, {Row("dev-0", "uid-1")}, {}}).ok());
  ASSERT_TRUE(this->store_->Commit(Transaction{{}, {Row("dev-1", "uid-2")}, {}}).ok());
  Transaction swap;
  swap.release_claims.push_back("uid-1");
  swap.claim_devices.push_back(Row("dev-0", "uid-3"));
  ASSERT_TRUE(this->store_->Commit(swap).ok());
  bool truncated = true;
  auto h =
      this->store_->ReadDeviceHistory("gpu.example.com", "pool-a", "dev-0", before, 10, &truncated);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_FALSE(truncated);
  ASSERT_EQ(h->current.size(), 1u);
  EXPECT_EQ(h->current[0].claim_uid, "uid-3");
  std::vector<std::string> events;
  for (const auto& e : h->events) {
    events.push_back(absl::StrCat(e.delta > 0 ? "+" : "-", e.row.device, ":", e.row.claim_uid));
  }
  // The release and the new allocation commit together: either order within the transaction.
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ((std::set<std::string>{events[0], events[1]}),
            (std::set<std::string>{"-dev-0:uid-1", "+dev-0:uid-3"}));
  EXPECT_EQ(events[2], "+dev-0:uid-1");
  auto two =
      this->store_->ReadDeviceHistory("gpu.example.com", "pool-a", "dev-0", before, 2, &truncated);
  ASSERT_TRUE(two.ok());
  EXPECT_TRUE(truncated);
  EXPECT_EQ(two->events.size(), 2u);
  auto none =
      this->store_->ReadDeviceHistory("gpu.example.com", "pool-a", "dev-9", before, 10, &truncated);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->events.empty() && none->current.empty());
}

TYPED_TEST(StoreConformanceTest, NodeLeasesMoveForwardAndGoWithTheNode) {
  const auto t0 = std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000));
  auto node = this->store_->Create(MakeObject("nodes", "", "n1"));
  ASSERT_TRUE(node.ok()) << node.status();
  ASSERT_TRUE(this->store_->RenewNodeLeases({{"n1", t0}, {"n2", t0}}).ok());
  ASSERT_TRUE(this->store_->RenewNodeLeases({{"n1", t0 - std::chrono::seconds(5)}}).ok());
  auto leases = this->store_->NodeLeases();
  ASSERT_TRUE(leases.ok()) << leases.status();
  EXPECT_EQ(*leases,
            (std::map<std::string, std::chrono::system_clock::time_point>{{"n1", t0}, {"n2", t0}}));
  ASSERT_TRUE(this->store_->Delete(node->Key(), 0).ok());
  leases = this->store_->NodeLeases();
  ASSERT_TRUE(leases.ok());
  EXPECT_EQ(leases->size(), 1u);
  EXPECT_TRUE(leases->contains("n2"));
}

TYPED_TEST(StoreConformanceTest, ConcurrentClaimsOfOneDeviceHaveOneWinner) {
  std::atomic<int> wins{0};
  std::atomic<int> taken{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      Transaction txn;
      txn.writes.push_back(
          {Write::Kind::kCreate, MakeObject("claims", "ns", "c" + std::to_string(t)), {}, 0});
      txn.claim_devices.push_back(Row("dev-0", "uid-" + std::to_string(t)));
      auto r = this->store_->Commit(txn);
      if (r.ok()) ++wins;
      if (absl::IsAborted(r.status())) ++taken;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wins.load(), 1);
  EXPECT_EQ(taken.load(), 7);
  EXPECT_EQ(this->store_->ListDeviceClaims()->size(), 1u);
  auto list = this->store_->List(ListOptions{"claims", "ns", "", "", 0});
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->items.size(), 1u);
}

// A consumable-capacity share of `device` in `pool` taking `amount` of its 80Gi of memory.
DeviceClaim Share(const std::string& pool, const std::string& device, const std::string& claim,
                  const std::string& amount) {
  DeviceClaim row{"gpu.example.com", pool, device, "share-" + claim, claim, false, "{}", {}};
  row.charges.push_back({DeviceCharge::Kind::kCapacity, device, "memory", *ParseQuantity(amount),
                         *ParseQuantity("80Gi")});
  return row;
}

// A device of a partitionable GPU taking `amount` of its pool's counter set gpu-0 (80Gi), whole
// (`share` empty) or as a share.
DeviceClaim Partition(const std::string& pool, const std::string& device, const std::string& claim,
                      const std::string& amount, const std::string& share = "") {
  DeviceClaim row{"gpu.example.com", pool, device, share, claim, false, "{}", {}};
  row.charges.push_back({DeviceCharge::Kind::kCounter, "gpu-0", "memory", *ParseQuantity(amount),
                         *ParseQuantity("80Gi")});
  return row;
}

absl::Status CommitRows(Store& store, std::vector<DeviceClaim> rows,
                        std::vector<std::string> release = {}) {
  Transaction txn;
  txn.claim_devices = std::move(rows);
  txn.release_claims = std::move(release);
  return store.Commit(txn).status();
}

TYPED_TEST(StoreConformanceTest, SharesTakeCapacityUntilItRunsOutAndReleasesGiveItBack) {
  Store& store = *this->store_;
  EXPECT_TRUE(CommitRows(store, {Share("pool-a", "dev-0", "uid-1", "40Gi")}).ok());
  EXPECT_TRUE(CommitRows(store, {Share("pool-a", "dev-0", "uid-2", "30Gi")}).ok());
  EXPECT_TRUE(absl::IsAborted(CommitRows(store, {Share("pool-a", "dev-0", "uid-3", "20Gi")})));
  // Two shares in one transaction count together.
  EXPECT_TRUE(absl::IsAborted(CommitRows(store, {Share("pool-a", "dev-0", "uid-3", "5Gi"),
                                                 Share("pool-a", "dev-0", "uid-4", "10Gi")})));
  EXPECT_TRUE(CommitRows(store, {Share("pool-a", "dev-0", "uid-3", "10Gi")}).ok());
  // Another device, or the same device in another pool, has capacity of its own.
  EXPECT_TRUE(CommitRows(store, {Share("pool-a", "dev-1", "uid-5", "80Gi"),
                                 Share("pool-b", "dev-0", "uid-6", "80Gi")})
                  .ok());
  // Admin access takes nothing.
  DeviceClaim admin = Share("pool-a", "dev-0", "uid-7", "80Gi");
  admin.share_id.clear();
  admin.admin_access = true;
  EXPECT_TRUE(CommitRows(store, {admin}).ok());
  // A release in the same transaction makes room.
  EXPECT_TRUE(absl::IsAborted(CommitRows(store, {Share("pool-a", "dev-0", "uid-8", "40Gi")})));
  EXPECT_TRUE(CommitRows(store, {Share("pool-a", "dev-0", "uid-8", "40Gi")}, {"uid-1"}).ok());
  EXPECT_TRUE(absl::IsAborted(CommitRows(store, {Share("pool-a", "dev-0", "uid-9", "1")})));
  EXPECT_TRUE(CommitRows(store, {}, {"uid-2", "uid-3", "uid-8"}).ok());
  EXPECT_TRUE(CommitRows(store, {Share("pool-a", "dev-0", "uid-9", "80Gi")}).ok());
  auto ledger = store.ListDeviceClaims();
  ASSERT_TRUE(ledger.ok());
  std::vector<std::string> rows;
  for (const auto& r : *ledger) rows.push_back(r.pool + "/" + r.device + ":" + r.claim_uid);
  EXPECT_EQ(rows, (std::vector<std::string>{"pool-a/dev-0:uid-7", "pool-a/dev-0:uid-9",
                                            "pool-a/dev-1:uid-5", "pool-b/dev-0:uid-6"}));
}

TYPED_TEST(StoreConformanceTest, PartitionableDevicesShareTheirPoolsCounters) {
  Store& store = *this->store_;
  EXPECT_TRUE(CommitRows(store, {Partition("pool-a", "gpu-0", "uid-1", "80Gi")}).ok());
  EXPECT_TRUE(absl::IsAborted(CommitRows(store, {Partition("pool-a", "mig-0", "uid-2", "20Gi")})));
  EXPECT_TRUE(CommitRows(store, {Partition("pool-b", "mig-0", "uid-2", "20Gi")}).ok());
  // The whole GPU released, its slices fit, up to the counter.
  EXPECT_TRUE(CommitRows(store,
                         {Partition("pool-a", "mig-0", "uid-3", "20Gi"),
                          Partition("pool-a", "half-0", "uid-3", "40Gi")},
                         {"uid-1"})
                  .ok());
  EXPECT_TRUE(CommitRows(store, {Partition("pool-a", "mig-1", "uid-4", "20Gi")}).ok());
  EXPECT_TRUE(absl::IsAborted(CommitRows(store, {Partition("pool-a", "mig-2", "uid-5", "20Gi")})));
  EXPECT_TRUE(CommitRows(store, {}, {"uid-3", "uid-4"}).ok());
  // A device with several shares takes its counters once, and gives them back with its last
  // share.
  EXPECT_TRUE(CommitRows(store, {Partition("pool-a", "gpu-s", "uid-6", "60Gi", "s1")}).ok());
  EXPECT_TRUE(CommitRows(store, {Partition("pool-a", "gpu-s", "uid-7", "60Gi", "s2")}).ok());
  EXPECT_TRUE(absl::IsAborted(CommitRows(store, {Partition("pool-a", "mig-0", "uid-8", "40Gi")})));
  EXPECT_TRUE(CommitRows(store, {}, {"uid-6"}).ok());
  EXPECT_TRUE(absl::IsAborted(CommitRows(store, {Partition("pool-a", "mig-0", "uid-8", "40Gi")})));
  EXPECT_TRUE(CommitRows(store, {Partition("pool-a", "mig-0", "uid-8", "40Gi")}, {"uid-7"}).ok());
}

TYPED_TEST(StoreConformanceTest, ConcurrentSharesNeverPassTheCapacity) {
  std::atomic<int> wins{0};
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 10; ++t) {
    threads.emplace_back([&, t] {
      Transaction txn;
      txn.writes.push_back(
          {Write::Kind::kCreate, MakeObject("claims", "ns", "c" + std::to_string(t)), {}, 0});
      txn.claim_devices.push_back(Share("pool-a", "dev-0", "uid-" + std::to_string(t), "20Gi"));
      auto r = this->store_->Commit(txn);
      if (r.ok()) ++wins;
      if (absl::IsAborted(r.status())) ++refused;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wins.load(), 4);
  EXPECT_EQ(refused.load(), 6);
  EXPECT_EQ(this->store_->ListDeviceClaims()->size(), 4u);
  EXPECT_EQ(this->store_->List(ListOptions{"claims", "ns", "", "", 0})->items.size(), 4u);
}

TYPED_TEST(StoreConformanceTest, DeletingAClaimReleasesItsLedgerRows) {
  Store& store = *this->store_;
  const std::string claims = "resourceclaims.resource.k8s.io";
  auto a = store.Create(MakeObject(claims, "ns", "a"));
  auto b = store.Create(MakeObject(claims, "ns", "b"));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(CommitRows(store, {Share("pool-a", "dev-0", a->meta.uid, "80Gi"),
                                 Partition("pool-a", "gpu-0", a->meta.uid, "80Gi")})
                  .ok());
  ASSERT_TRUE(CommitRows(store, {Share("pool-a", "dev-1", b->meta.uid, "80Gi")}).ok());
  ASSERT_TRUE(store.Delete(a->Key(), 0).ok());
  Transaction txn;
  txn.writes.push_back({Write::Kind::kDelete, {}, b->Key(), 0});
  ASSERT_TRUE(store.Commit(txn).ok());
  EXPECT_TRUE(store.ListDeviceClaims()->empty());
  // What they held is free again.
  EXPECT_TRUE(CommitRows(store, {Share("pool-a", "dev-0", "uid-1", "80Gi"),
                                 Share("pool-a", "dev-1", "uid-1", "80Gi"),
                                 Partition("pool-a", "mig-0", "uid-1", "80Gi")})
                  .ok());
}

model::Object GpuClaim(const std::string& ns, const std::string& name, int count = 1) {
  return MakeObject("resourceclaims.resource.k8s.io", ns, name,
                    R"({"spec":{"devices":{"requests":[{"name":"g","exactly":)"
                    R"({"deviceClassName":"gpu","count":)" +
                        std::to_string(count) + "}}]}}}");
}

constexpr char kGpus[] = "gpu.deviceclass.resource.k8s.io/devices";

// Usage is kept for namespaces with a ResourceQuota.
void PutQuota(Store& store, const std::string& ns) {
  ASSERT_TRUE(store.Create(MakeObject("resourcequotas", ns, "q", "{}")).ok());
}

TYPED_TEST(StoreConformanceTest, QuotaChecksBoundCreatesAndDeletesGiveUsageBack) {
  Store& store = *this->store_;
  // Claims there before the namespace's first quota count too.
  ASSERT_TRUE(store.Create(GpuClaim("team", "early", 1)).ok());
  PutQuota(store, "team");
  PutQuota(store, "other");
  EXPECT_EQ((*store.QuotaUsed("team"))[kGpus], 1);
  auto early = store.Get(GpuClaim("team", "early").Key());
  ASSERT_TRUE(early.ok());
  ASSERT_TRUE(store.Delete(early->Key(), early->meta.resource_version).ok());
  EXPECT_EQ((*store.QuotaUsed("team"))[kGpus], 0);
  auto create = [&](const model::Object& obj, int64_t hard) {
    Transaction txn;
    txn.writes.push_back({Write::Kind::kCreate, obj, {}, 0});
    txn.quota_checks.push_back({obj.meta.namespace_, kGpus, hard});
    return store.Commit(txn).status();
  };
  EXPECT_TRUE(create(GpuClaim("team", "a", 2), 3).ok());
  EXPECT_TRUE(absl::IsResourceExhausted(create(GpuClaim("team", "b", 2), 3)));
  EXPECT_TRUE(create(GpuClaim("team", "b", 1), 3).ok());
  EXPECT_TRUE(create(GpuClaim("other", "a", 3), 3).ok());  // namespaces count apart
  EXPECT_TRUE(absl::IsResourceExhausted(create(GpuClaim("team", "c", 1), 3)));
  EXPECT_EQ(store.Get(GpuClaim("team", "c").Key()).status().code(), absl::StatusCode::kNotFound);
  auto used = store.QuotaUsed("team");
  ASSERT_TRUE(used.ok()) << used.status();
  EXPECT_EQ((*used)[kGpus], 3);
  EXPECT_EQ((*used)["count/resourceclaims.resource.k8s.io"], 2);
  // Deleting gives the usage back.
  auto a = store.Get(GpuClaim("team", "a").Key());
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(store.Delete(a->Key(), a->meta.resource_version).ok());
  EXPECT_EQ((*store.QuotaUsed("team"))[kGpus], 1);
  EXPECT_TRUE(create(GpuClaim("team", "c", 2), 3).ok());
  // A pod counts until it finishes.
  auto pod = store.Create(MakeObject("pods", "team", "p", R"({"status":{"phase":"Running"}})"));
  ASSERT_TRUE(pod.ok());
  EXPECT_EQ((*store.QuotaUsed("team"))["pods"], 1);
  model::Object done = *pod;
  done.body = R"({"status":{"phase":"Succeeded"}})";
  ASSERT_TRUE(store.Update(done, pod->meta.resource_version).ok());
  EXPECT_EQ((*store.QuotaUsed("team"))["pods"], 0);
}

TYPED_TEST(StoreConformanceTest, AQuotaSetCheckPassesOnlyWhileTheNamespaceHoldsThoseQuotas) {
  Store& store = *this->store_;
  auto create = [&](const std::string& name, QuotaSetCheck set) {
    Transaction txn;
    txn.writes.push_back({Write::Kind::kCreate, GpuClaim("team", name), {}, 0});
    txn.quota_sets.push_back(std::move(set));
    return store.Commit(txn).status();
  };
  // No quota yet: "none" passes; claiming to have seen one does not.
  EXPECT_TRUE(create("a", {"team", 0, 0}).ok());
  const absl::Status stale = create("b", {"team", 1, 5});
  EXPECT_TRUE(absl::IsAborted(stale)) << stale;
  EXPECT_TRUE(IsQuotaSetChanged(stale));
  EXPECT_FALSE(IsQuotaSetChanged(ConflictError(GpuClaim("team", "b").Key())));
  EXPECT_EQ(store.Get(GpuClaim("team", "b").Key()).status().code(), absl::StatusCode::kNotFound);
  // A quota arrives: a create that saw none fails (nothing written), one that saw it passes.
  auto first = store.Create(MakeObject("resourcequotas", "team", "q1", "{}"));
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(IsQuotaSetChanged(create("b", {"team", 0, 0})));
  EXPECT_EQ(store.Get(GpuClaim("team", "b").Key()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(create("b", {"team", 1, first->meta.resource_version}).ok());
  // Other namespaces' quotas do not count.
  ASSERT_TRUE(store.Create(MakeObject("resourcequotas", "other", "q", "{}")).ok());
  EXPECT_TRUE(create("c", {"team", 1, first->meta.resource_version}).ok());
  // A second quota (newer) and then the first one deleted: each changes what must be stated.
  auto second = store.Create(MakeObject("resourcequotas", "team", "q2", "{}"));
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(IsQuotaSetChanged(create("d", {"team", 1, first->meta.resource_version})));
  EXPECT_TRUE(create("d", {"team", 2, second->meta.resource_version}).ok());
  ASSERT_TRUE(store.Delete(first->Key(), 0).ok());
  EXPECT_TRUE(IsQuotaSetChanged(create("e", {"team", 2, second->meta.resource_version})));
  EXPECT_TRUE(create("e", {"team", 1, second->meta.resource_version}).ok());
  // In a transaction that also deletes (stores may take another path for those).
  Transaction txn;
  txn.writes.push_back({Write::Kind::kDelete, {}, GpuClaim("team", "a").Key(), 0});
  txn.writes.push_back({Write::Kind::kCreate, GpuClaim("team", "f"), {}, 0});
  txn.quota_sets.push_back({"team", 2, second->meta.resource_version});
  EXPECT_TRUE(IsQuotaSetChanged(store.Commit(txn).status()));
  EXPECT_TRUE(store.Get(GpuClaim("team", "a").Key()).ok());  // the delete was undone too
  txn.quota_sets = {{"team", 1, second->meta.resource_version}};
  EXPECT_TRUE(store.Commit(txn).ok());
  EXPECT_TRUE(store.Get(GpuClaim("team", "f").Key()).ok());
}

TYPED_TEST(StoreConformanceTest, ConcurrentCreatesUnderAQuotaCheckHaveExactlyTheLimitWinning) {
  PutQuota(*this->store_, "team");
  std::atomic<int> wins{0};
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      Transaction txn;
      txn.writes.push_back(
          {Write::Kind::kCreate, GpuClaim("team", "c" + std::to_string(t)), {}, 0});
      txn.quota_checks.push_back({"team", kGpus, 5});
      auto r = this->store_->Commit(txn);
      if (r.ok()) ++wins;
      if (absl::IsResourceExhausted(r.status())) ++refused;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wins.load(), 5);
  EXPECT_EQ(refused.load(), 11);
  EXPECT_EQ(this->store_->List(ListOptions{"resourceclaims.resource.k8s.io", "team", "", "", 0})
                ->items.size(),
            5u);
  EXPECT_EQ((*this->store_->QuotaUsed("team"))[kGpus], 5);
}

}  // namespace
}  // namespace qm::store
