// PostgreSQL-specific behaviour beyond the shared Store contract.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/status.h"
#include "model/json/quota_usage.h"
#include "nlohmann/json.hpp"
#include "pg_test_env.h"
#include "store/pg/embedded_postgres.h"
#include "store/pg/migrations.h"
#include "store/pg/pg_store.h"

namespace qm::store::pg {
namespace {

model::Object MakeObject(const std::string& name) {
  model::Object o;
  o.resource = "things";
  o.meta.name = name;
  o.meta.uid = "uid-" + name;
  o.meta.generation = 1;
  o.body = R"({"spec":{"n":1}})";
  return o;
}

TEST(PgStoreTest, DataSurvivesADatabaseRestart) {
  auto& env = testing::PgTestEnv::Get();
  env.Reset();
  int64_t rv = 0;
  {
    auto store = PgStore::Open(env.url(), 2);
    ASSERT_TRUE(store.ok()) << store.status();
    auto created = (*store)->Create(MakeObject("durable"));
    ASSERT_TRUE(created.ok()) << created.status();
    rv = created->meta.resource_version;
  }
  env.Restart();
  auto store = PgStore::Open(env.url(), 2);
  ASSERT_TRUE(store.ok()) << store.status();
  auto got = (*store)->Get(model::ResourceKey{"things", "", "durable"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->meta.resource_version, rv);
  // The revision sequence continues after the restart.
  auto next = (*store)->Create(MakeObject("after"));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_GT(next->meta.resource_version, rv);
}

TEST(PgStoreTest, BrokenConnectionsAreReplaced) {
  auto& env = testing::PgTestEnv::Get();
  env.Reset();
  auto store = PgStore::Open(env.url(), 1);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Create(MakeObject("a")).ok());
  // Kill every other backend, including the pooled connection.
  {
    pqxx::connection admin(env.url());
    pqxx::nontransaction tx(admin);
    tx.exec(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE pid <> pg_backend_pid() AND datname = current_database()");
  }
  auto first = (*store)->Get(model::ResourceKey{"things", "", "a"});
  // The first use may notice the broken connection; the next one must work again.
  if (!first.ok()) {
    EXPECT_TRUE(absl::IsUnavailable(first.status())) << first.status();
  }
  auto second = (*store)->Get(model::ResourceKey{"things", "", "a"});
  EXPECT_TRUE(second.ok()) << second.status();
}

TEST(PgStoreTest, MigrationsAreRecordedAndIdempotent) {
  auto& env = testing::PgTestEnv::Get();
  env.Reset();
  ASSERT_TRUE(Migrate(env.url()).ok());
  ASSERT_TRUE(Migrate(env.url()).ok());
  pqxx::connection c(env.url());
  pqxx::nontransaction tx(c);
  auto r = tx.exec("SELECT version FROM schema_migrations ORDER BY version");
  ASSERT_GE(r.size(), 1u);
  EXPECT_EQ(r[0][0].as<std::string>(), "0001_objects.sql");
}

TEST(PgStoreTest, UnreachableDatabaseIsUnavailable) {
  auto store = PgStore::Open("host=/nonexistent port=1 user=x dbname=x connect_timeout=1", 1);
  EXPECT_TRUE(absl::IsUnavailable(store.status())) << store.status();
}

}  // namespace
}  // namespace qm::store::pg

namespace qm::store::pg {
namespace {

TEST(EmbeddedPostgresTest, MissingBinariesGiveAnInstallHint) {
  EmbeddedPostgres pg("/tmp/qm-never-created", "/nonexistent/bin");
  absl::Status st = pg.Start();
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_NE(st.message().find("apt-get install postgresql-15"), absl::string_view::npos) << st;
  EXPECT_FALSE(pg.running());
}

// The audit record of a create of a "things" object, answered 201.
AuditRecord CreateRecord(const std::string& request_id, const std::string& user,
                         std::vector<std::string> groups) {
  AuditRecord record;
  record.time = std::chrono::system_clock::now();
  record.request_id = request_id;
  record.user = user;
  record.groups = std::move(groups);
  record.verb = "create";
  record.resource = "things";
  record.code = 201;
  return record;
}

// A change and its audit record commit together: a write that succeeds leaves exactly its
// record, one that fails (a conflict) leaves none; deletes are recorded too.
TEST(PgStoreTest, AuditRecordsCommitWithTheirChanges) {
  auto& env = testing::PgTestEnv::Get();
  env.Reset();
  auto store = PgStore::Open(env.url(), 2);
  ASSERT_TRUE(store.ok()) << store.status();
  AuditRecord record = CreateRecord("req-1", "alice", {"team-a", "system:authenticated"});
  record.source = "127.0.0.1:5";
  int64_t rv = 0;
  {
    AuditScope scope(&record);
    auto created = (*store)->Create(MakeObject("audited"));
    ASSERT_TRUE(created.ok()) << created.status();
    rv = created->meta.resource_version;
    EXPECT_FALSE((*store)->Create(MakeObject("audited")).ok());            // exists: no record
    EXPECT_FALSE((*store)->Update(MakeObject("audited"), rv + 100).ok());  // conflict: none
  }
  ASSERT_TRUE((*store)->Create(MakeObject("unaudited")).ok());  // no scope: no record
  record.verb = "delete";
  record.request_id = "req-2";
  {
    AuditScope scope(&record);
    ASSERT_TRUE((*store)->Delete(model::ResourceKey{"things", "", "audited"}, rv).ok());
  }
  auto all = (*store)->QueryAudit(AuditQuery{});
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].request_id, "req-1");
  EXPECT_EQ((*all)[0].name, "audited");
  EXPECT_EQ((*all)[0].user, "alice");
  EXPECT_EQ((*all)[0].groups, record.groups);
  EXPECT_EQ((*all)[0].code, 201);
  EXPECT_EQ((*all)[1].verb, "delete");
  EXPECT_LT((*all)[0].id, (*all)[1].id);
  AuditQuery by_user;
  by_user.user = "bob";
  EXPECT_TRUE((*store)->QueryAudit(by_user)->empty());
  AuditQuery page;
  page.limit = 1;
  page.after_id = (*all)[0].id;
  auto second = (*store)->QueryAudit(page);
  ASSERT_EQ(second->size(), 1u);
  EXPECT_EQ((*second)[0].request_id, "req-2");
  // Retention: everything is newer than an hour ago, older than an hour from now.
  EXPECT_EQ(*(*store)->PruneAudit(std::chrono::system_clock::now() - std::chrono::hours(1)), 0);
  EXPECT_EQ(*(*store)->PruneAudit(std::chrono::system_clock::now() + std::chrono::hours(1)), 2);
  EXPECT_TRUE((*store)->QueryAudit(AuditQuery{})->empty());
}

// The database counts quota usage with SQL (qm_quota_usage, migrations/0005) and the in-memory
// store and the scheduler with model::json::QuotaUsage: both must count the same for every body.
TEST(PgStoreTest, QuotaUsageInTheDatabaseCountsAsTheServiceDoes) {
  auto& env = testing::PgTestEnv::Get();
  env.Reset();
  auto store = PgStore::Open(env.url(), 2);
  ASSERT_TRUE(store.ok()) << store.status();
  const std::vector<std::pair<std::string, std::string>> bodies = {
      {"pods", R"({"status":{"phase":"Running"}})"},
      {"pods", R"({"status":{"phase":"Succeeded"}})"},
      {"pods", R"({"status":{"phase":"Failed"}})"},
      {"pods", R"({"spec":{}})"},
      {"pods", R"({"status":{"phase":7}})"},
      {"resourceclaims.resource.k8s.io", R"({"spec":{}})"},
      {"resourceclaims.resource.k8s.io", "{}"},
      {"resourceclaims.resource.k8s.io", R"({"spec":{"devices":{"requests":[
          {"name":"a","exactly":{"deviceClassName":"gpu","count":2}},
          {"name":"b","exactly":{"deviceClassName":"gpu","allocationMode":"All"}},
          {"name":"c","exactly":{"deviceClassName":"gpu","allocationMode":"ExactCount"}},
          {"name":"d","firstAvailable":[{"name":"x","deviceClassName":"l4","count":2},
                                        {"name":"y","deviceClassName":"l4"},
                                        {"name":"z","deviceClassName":"a100"}]},
          {"name":"e","exactly":{"deviceClassName":"nic","count":1.5}},
          {"name":"f","exactly":{"count":3}},
          {"name":"g","firstAvailable":"x"},
          {"name":"h","exactly":"x"}]}}})"},
      {"resourceclaims.resource.k8s.io",
       R"({"spec":{"devices":{"requests":[{"name":"a","exactly":{"deviceClassName":"gpu",)"
       R"("allocationMode":"All","count":4}}]}}})"},
      {"things", R"({"spec":{"devices":{"requests":[{"exactly":{"deviceClassName":"gpu"}}]}}})"},
  };
  for (size_t i = 0; i < bodies.size(); ++i) {
    model::Object obj = MakeObject("o");
    obj.resource = bodies[i].first;
    obj.meta.namespace_ = "ns-" + std::to_string(i);
    obj.meta.uid = "uid-" + std::to_string(i);
    obj.body = bodies[i].second;
    // Usage is kept where a ResourceQuota is; half the objects come before it.
    model::Object quota = MakeObject("q");
    quota.resource = "resourcequotas";
    quota.meta.namespace_ = obj.meta.namespace_;
    quota.meta.uid = "quota-" + std::to_string(i);
    if (i % 2 == 0) ASSERT_TRUE((*store)->Create(quota).ok());
    ASSERT_TRUE((*store)->Create(obj).ok());
    if (i % 2 == 1) ASSERT_TRUE((*store)->Create(quota).ok());
    std::map<std::string, int64_t> expected;
    for (const auto& [key, n] : model::json::QuotaUsage(obj)) {
      if (n != 0) expected[key] = n;
    }
    auto used = (*store)->QuotaUsed(obj.meta.namespace_);
    ASSERT_TRUE(used.ok()) << used.status();
    std::map<std::string, int64_t> counted;
    for (const auto& [key, n] : *used) {
      if (n != 0) counted[key] = n;
    }
    EXPECT_EQ(counted, expected) << bodies[i].second;
  }
}

// Capacity and counter amounts reach the database exactly, fractions and binary suffixes
// included, and what a share or a device took is what its release gives back.
TEST(PgStoreTest, DeviceUsageIsExactAndReleasesGiveEverythingBack) {
  auto& env = testing::PgTestEnv::Get();
  env.Reset();
  auto store = PgStore::Open(env.url(), 2);
  ASSERT_TRUE(store.ok()) << store.status();
  auto q = [](const char* text) { return *ParseQuantity(text); };
  auto commit = [&](std::vector<DeviceClaim> rows, std::vector<std::string> release) {
    Transaction txn;
    txn.claim_devices = std::move(rows);
    txn.release_claims = std::move(release);
    return (*store)->Commit(txn).status();
  };
  DeviceClaim share{"d", "p", "cpu-0", "s1", "uid-1", false, "{}", {}};
  share.charges = {{DeviceCharge::Kind::kCapacity, "cpu-0", "cores", q("1500m"), q("2")},
                   {DeviceCharge::Kind::kCapacity, "cpu-0", "memory", q("1Gi"), q("1Ei")},
                   {DeviceCharge::Kind::kCounter, "socket", "cores", q("2"), q("4")}};
  ASSERT_TRUE(commit({share}, {}).ok());
  DeviceClaim more = share;
  more.share_id = "s2";
  more.claim_uid = "uid-2";
  more.charges[0].amount = q("0.5");
  ASSERT_TRUE(commit({more}, {}).ok());
  more.share_id = "s3";
  more.claim_uid = "uid-3";
  more.charges[0].amount = q("1n");
  EXPECT_TRUE(absl::IsAborted(commit({more}, {})));
  {
    pqxx::connection c(env.url());
    pqxx::nontransaction tx(c);
    auto rows = tx.exec(
        "SELECT kind || ' ' || owner || ' ' || name || ' ' || trim_scale(used)::text || ' ' || "
        "trim_scale(total)::text "
        "FROM device_usage ORDER BY kind, owner, name");
    std::vector<std::string> got;
    for (const auto& row : rows) got.push_back(row[0].as<std::string>());
    EXPECT_EQ(got, (std::vector<std::string>{"capacity cpu-0 cores 2 2",
                                             "capacity cpu-0 memory 2147483648 1152921504606846976",
                                             "counter socket cores 2 4"}));
  }
  ASSERT_TRUE(commit({}, {"uid-1", "uid-2"}).ok());
  pqxx::connection c(env.url());
  pqxx::nontransaction tx(c);
  EXPECT_EQ(tx.exec1("SELECT count(*) FROM device_usage")[0].as<int>(), 0);
  EXPECT_EQ(tx.exec1("SELECT count(*) FROM device_counter_holds")[0].as<int>(), 0);
}

// A database from before migration 0005 (schema 0001-0004, with shares, partitionable devices
// and overcommitted shares already in the ledger) upgrades in place: the usage of every ledger
// row is rebuilt from the slices stored then, so new allocations fit around what is held, and
// releasing the old rows gives everything back.
TEST(PgStoreTest, UpgradeFromBeforeEnforcedLimitsRebuildsDeviceUsage) {
  auto& env = testing::PgTestEnv::Get();
  {
    pqxx::connection c(env.url());
    pqxx::work tx(c);
    tx.exec("DROP SCHEMA IF EXISTS public CASCADE");
    tx.exec("CREATE SCHEMA public");
    tx.exec(
        "CREATE TABLE schema_migrations (version text PRIMARY KEY, applied_at timestamptz "
        "NOT NULL DEFAULT now())");
    for (const auto& [name, sql] : EmbeddedMigrations()) {
      if (name >= "0005") break;
      tx.exec(sql);
      tx.exec_params0("INSERT INTO schema_migrations (version) VALUES ($1)", name);
    }
    auto slice = [&](const std::string& name, const std::string& body) {
      tx.exec_params0(
          "INSERT INTO objects (resource, namespace, name, uid, resource_version, generation, "
          "creation_timestamp, labels, meta, fields, spec_digest, body) VALUES "
          "('resourceslices.resource.k8s.io', '', $1, $1, nextval('resource_version_seq'), 1, "
          "now(), '{}', '{}', '{}', '', $2::jsonb)",
          name, body);
    };
    // Pool p: generation 2 replaced generation 1, whose smaller capacity must not count.
    slice("p-old", R"({"spec":{"driver":"d","pool":{"name":"p","generation":1},"devices":[
        {"name":"dev-0","capacity":{"memory":{"value":"40Gi"}}}]}})");
    slice("p-new", R"({"spec":{"driver":"d","pool":{"name":"p","generation":2},"devices":[
        {"name":"dev-0","allowMultipleAllocations":true,
         "capacity":{"memory":{"value":"80Gi"},"cores":{"value":"2"}}},
        {"name":"dev-1","allowMultipleAllocations":true,
         "capacity":{"memory":{"value":"80Gi"}}}]}})");
    // Pool q: a counter set in one slice, the devices that consume it in another.
    slice("q-counters", R"({"spec":{"driver":"d","pool":{"name":"q","generation":1},
        "sharedCounters":[{"name":"gpu-0","counters":{"memory":{"value":"80Gi"}}}]}})");
    slice("q-devices", R"({"spec":{"driver":"d","pool":{"name":"q","generation":1},"devices":[
        {"name":"mig-0","consumesCounters":[{"counterSet":"gpu-0",
                                             "counters":{"memory":{"value":"20Gi"}}}]},
        {"name":"half-0","allowMultipleAllocations":true,
         "consumesCounters":[{"counterSet":"gpu-0","counters":{"memory":{"value":"40Gi"}}}]}]}})");
    tx.exec(R"sql(
      INSERT INTO device_allocations
        (driver, pool, device, share_id, claim_uid, admin_access, consumed_capacity) VALUES
        ('d', 'p', 'dev-0', 's1', 'c1', false, '{"memory": "30Gi", "d/cores": "500m"}'),
        ('d', 'p', 'dev-0', 's2', 'c2', false, '{"memory": "20Gi"}'),
        ('d', 'p', 'dev-0', '', 'c3', true, '{}'),
        ('d', 'p', 'dev-1', 's3', 'c4', false, '{"memory": "60Gi"}'),
        ('d', 'p', 'dev-1', 's4', 'c5', false, '{"memory": "60Gi"}'),
        ('d', 'q', 'mig-0', '', 'c6', false, '{}'),
        ('d', 'q', 'half-0', 'a', 'c7', false, '{}'),
        ('d', 'q', 'half-0', 'b', 'c8', false, '{}'),
        ('d', 'x', 'unknown', '', 'c9', false, '{}'))sql");
    tx.commit();
  }
  ASSERT_TRUE(Migrate(env.url()).ok());
  auto usage = [&] {
    pqxx::connection c(env.url());
    pqxx::nontransaction tx(c);
    std::vector<std::string> got;
    for (const auto& row :
         tx.exec("SELECT pool || ' ' || kind || ' ' || owner || ' ' || name || ' ' || "
                 "trim_scale(used)::text || '/' || trim_scale(total)::text "
                 "FROM device_usage ORDER BY pool, kind, owner, name")) {
      got.push_back(row[0].as<std::string>());
    }
    return got;
  };
  // dev-1 was overcommitted before the upgrade (120Gi of 80Gi): kept, with the limit raised to
  // what is held for the CHECK. The half and the MIG slice take 60Gi of the GPU's counters (the
  // half once for both its shares).
  EXPECT_EQ(usage(), (std::vector<std::string>{"p capacity dev-0 cores 0.5/2",
                                               "p capacity dev-0 memory 53687091200/85899345920",
                                               "p capacity dev-1 memory 128849018880/128849018880",
                                               "q counter gpu-0 memory 64424509440/85899345920"}));
  auto store = PgStore::Open(env.url(), 2);
  ASSERT_TRUE(store.ok()) << store.status();
  auto q = [](const char* text) { return *ParseQuantity(text); };
  auto commit = [&](std::vector<DeviceClaim> rows, std::vector<std::string> release) {
    Transaction txn;
    txn.claim_devices = std::move(rows);
    txn.release_claims = std::move(release);
    return (*store)->Commit(txn).status();
  };
  auto share = [&](const std::string& device, const std::string& uid, const char* amount) {
    DeviceClaim row{"d", "p", device, "new-" + uid, uid, false, "{}", {}};
    row.charges = {{DeviceCharge::Kind::kCapacity, device, "memory", q(amount), q("80Gi")}};
    return row;
  };
  auto mig = [&](const std::string& device, const std::string& uid, const char* amount) {
    DeviceClaim row{"d", "q", device, "", uid, false, "{}", {}};
    row.charges = {{DeviceCharge::Kind::kCounter, "gpu-0", "memory", q(amount), q("80Gi")}};
    return row;
  };
  // What the old rows hold is not handed out again.
  EXPECT_TRUE(absl::IsAborted(commit({share("dev-0", "n1", "31Gi")}, {})));
  EXPECT_TRUE(commit({share("dev-0", "n1", "30Gi")}, {}).ok());
  EXPECT_TRUE(absl::IsAborted(commit({share("dev-1", "n2", "1")}, {})));
  EXPECT_TRUE(absl::IsAborted(commit({mig("mig-1", "n3", "40Gi")}, {})));
  EXPECT_TRUE(commit({mig("mig-1", "n3", "20Gi")}, {}).ok());
  // The overcommitted device takes new shares again once it is back within its capacity.
  auto back = commit({share("dev-1", "n2", "20Gi")}, {"c4"});
  EXPECT_TRUE(back.ok()) << back;
  // Releasing everything, old rows and new, leaves no usage behind.
  EXPECT_TRUE(commit({}, {"c1", "c2", "c3", "c5", "c6", "c7", "c8", "c9", "n1", "n2", "n3"}).ok());
  EXPECT_TRUE(usage().empty());
  pqxx::connection c(env.url());
  pqxx::nontransaction tx(c);
  EXPECT_EQ(tx.exec1("SELECT count(*) FROM device_counter_holds")[0].as<int>(), 0);
  EXPECT_EQ(tx.exec1("SELECT count(*) FROM device_allocations")[0].as<int>(), 0);
}

TEST(PgStoreTest, NodeLeasesOnlyMoveForward) {
  auto& env = testing::PgTestEnv::Get();
  env.Reset();
  auto store = PgStore::Open(env.url(), 2);
  ASSERT_TRUE(store.ok()) << store.status();
  using std::chrono::microseconds;
  const std::chrono::system_clock::time_point t0(microseconds(1'800'000'000'123'456));
  ASSERT_TRUE((*store)->RenewNodeLeases({{"a", t0}, {"b\"q", t0 + microseconds(5)}}).ok());
  ASSERT_TRUE((*store)->RenewNodeLeases({{"a", t0 - microseconds(1)}}).ok());  // older: kept
  ASSERT_TRUE((*store)->RenewNodeLeases({{"b\"q", t0 + microseconds(9)}}).ok());
  auto leases = (*store)->NodeLeases();
  ASSERT_TRUE(leases.ok()) << leases.status();
  EXPECT_EQ(*leases, (std::map<std::string, std::chrono::system_clock::time_point>{
                         {"a", t0}, {"b\"q", t0 + microseconds(9)}}));
}

// The notices a connection receives (auto_explain's plans, below), in one text.
struct Plans : pqxx::errorhandler {
  explicit Plans(pqxx::connection_base& c) : pqxx::errorhandler(c) {}
  bool operator()(const char msg[]) noexcept override {
    text += msg;
    return true;
  }
  std::string text;
};

// From here on in `tx`, the plan of every statement, nested ones (functions, triggers) too,
// comes to the client as a notice.
void ExplainEveryStatement(pqxx::work& tx) {
  tx.exec("LOAD 'auto_explain'");
  tx.exec("SET LOCAL auto_explain.log_min_duration = 0");
  tx.exec("SET LOCAL auto_explain.log_nested_statements = on");
  tx.exec("SET LOCAL auto_explain.log_level = notice");
  tx.exec("SET LOCAL client_min_messages = notice");
}

// A fresh database with the migrations applied, and a transaction on it whose statements' plans
// arrive in `plans` once ExplainEveryStatement has run.
struct ExplainedSession {
  ExplainedSession() : c(FreshDatabase()), plans(c), tx(c) {}
  static std::string FreshDatabase() {
    auto& env = testing::PgTestEnv::Get();
    env.Reset();
    EXPECT_TRUE(PgStore::Open(env.url(), 1).ok());
    return env.url();
  }
  pqxx::connection c;
  Plans plans;
  pqxx::work tx;
};

// Claims uid-<from> .. uid-<to> in namespace "ns", straight into the objects table, which is
// analyzed afterwards (what the planner knows of its size).
void AddClaimRows(pqxx::work& tx, int from, int to) {
  tx.exec(
      "INSERT INTO objects (resource, namespace, name, uid, resource_version, generation, "
      "creation_timestamp, labels, meta, fields, spec_digest, body) "
      "SELECT 'resourceclaims.resource.k8s.io', 'ns', 'c' || g, 'uid-' || g, g, 1, now(), "
      "'{}', '{}', '{}', '', '{}' FROM generate_series(" +
      std::to_string(from) + ", " + std::to_string(to) + ") AS g");
  tx.exec("ANALYZE objects");
}

// How many times `what` occurs in `text`.
size_t Occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Binds device d/p/gpu-0 to the claim with `uid` through the ledger function, then releases it:
// each fires one of the allocation history's triggers.
void BindAndRelease(pqxx::work& tx, const std::string& uid) {
  EXPECT_TRUE(tx.exec1("SELECT qm_insert_device_claim('d', 'p', 'gpu-0', '', '" + uid +
                       "', false, '{}', '{}') IS NULL")[0]
                  .as<bool>());
  tx.exec("SELECT qm_release_claim('" + uid + "')");
}

// The plans auto_explain sent: the history was written, and its claim lookups, `lookups` of them,
// all went through objects_uid.
void ExpectHistoryLookupsThroughUidIndex(const std::string& plans, size_t lookups) {
  EXPECT_NE(plans.find("Insert on allocation_history"), std::string::npos) << plans;
  EXPECT_EQ(plans.find("Seq Scan on objects"), std::string::npos) << plans;
  EXPECT_EQ(Occurrences(plans, "Index Scan using objects_uid"), lookups) << plans;
}

// The allocation history as "<namespace> <delta>" per row, in order.
std::string HistoryDeltas(pqxx::work& tx) {
  return tx
      .exec1(
          "SELECT string_agg(claim_namespace || ' ' || delta, ',' ORDER BY id) "
          "FROM allocation_history")[0]
      .as<std::string>();
}

// The allocation history's triggers look up the claim of each ledger row they record. The
// ledger's claim_uid is COLLATE "C" and objects.uid is not: compared as they are, the lookup
// cannot use the objects_uid index and every ledger insert and release scanned the whole
// objects table (5x slower scheduling at 5,000 pods). auto_explain reports the plans of the
// trigger's statements as notices.
TEST(PgStoreTest, LedgerHistoryFindsClaimsThroughTheUidIndex) {
  ExplainedSession session;
  pqxx::work& tx = session.tx;
  AddClaimRows(tx, 1, 5000);
  ExplainEveryStatement(tx);
  BindAndRelease(tx, "uid-7");
  // Both triggers (the insert's and the release's) look the claim up by its uid.
  ExpectHistoryLookupsThroughUidIndex(session.plans.text, 2);
  EXPECT_EQ(HistoryDeltas(tx), "ns 1,ns -1");
}

// PL/pgSQL keeps the plan it makes the first time a trigger fires on a connection. Made while
// the objects table was small (a new server's first bindings), the lookup hashed a scan of the
// whole table, and the writer's connection went on scanning it as the table grew
// (migrations/0016). Here the plan is made over a table of three objects, then used again after
// 5,000 more: both times through the uid index.
TEST(PgStoreTest, LedgerHistoryPlanMadeOnASmallTableStillUsesTheUidIndex) {
  ExplainedSession session;
  pqxx::work& tx = session.tx;
  AddClaimRows(tx, 1, 3);
  ExplainEveryStatement(tx);
  BindAndRelease(tx, "uid-2");
  AddClaimRows(tx, 4, 5003);
  BindAndRelease(tx, "uid-4000");
  ExpectHistoryLookupsThroughUidIndex(session.plans.text, 4);  // two triggers, two times each
  EXPECT_EQ(HistoryDeltas(tx), "ns 1,ns -1,ns 1,ns -1");
}

// Large bodies are compressed with lz4 where the server has it (migrations/0017): a slice's body
// written through the store is stored lz4-compressed in objects and in change_log.
TEST(PgStoreTest, LargeBodiesAreStoredWithLz4) {
  auto& env = testing::PgTestEnv::Get();
  env.Reset();
  auto store = PgStore::Open(env.url(), 2);
  ASSERT_TRUE(store.ok()) << store.status();
  pqxx::connection c(env.url());
  pqxx::nontransaction q(c);
  // A server built without lz4 keeps pglz (the migration leaves the columns alone).
  const bool has_lz4 = q.exec1(
                            "SELECT 'lz4' = ANY (enumvals) FROM pg_settings "
                            "WHERE name = 'default_toast_compression'")[0]
                           .as<bool>();
  const std::string expected = has_lz4 ? "lz4" : "pglz";
  model::Object big = MakeObject("big");
  std::string devices;
  for (int i = 0; i < 128; ++i) {
    if (i) devices += ',';
    devices +=
        R"({"name":"gpu-)" + std::to_string(i) + R"(","attributes":{"model":{"string":"A100"}}})";
  }
  big.body = R"({"spec":{"devices":[)" + devices + "]}}";
  ASSERT_GT(big.body.size(), 4000u);
  ASSERT_TRUE((*store)->Create(big).ok());
  EXPECT_EQ(q.exec1("SELECT pg_column_compression(body) FROM objects WHERE name = 'big'")[0]
                .as<std::string>(),
            expected);
  EXPECT_EQ(q.exec1("SELECT pg_column_compression(body) FROM change_log WHERE name = 'big'")[0]
                .as<std::string>(),
            expected);
}

// The writer sends the batch's text columns as binary arrays (BinaryTextArray): text that an
// array literal would have to quote or escape (quotes, backslashes, braces, commas, NULL, an empty
// value, non-ASCII) must come back byte for byte, read by another store from the database, and
// so must the audit record written with it.
TEST(PgStoreTest, TextThatALiteralWouldEscapeRoundTripsThroughTheWriter) {
  auto& env = testing::PgTestEnv::Get();
  env.Reset();
  auto writer = PgStore::Open(env.url(), 2);
  auto reader = PgStore::Open(env.url(), 2);
  ASSERT_TRUE(writer.ok() && reader.ok());
  const std::string odd = "a \"q\" \\ {x,y} NULL \xc3\xa9";
  model::Object a = MakeObject("a");
  a.meta.namespace_ = "ns";
  a.meta.labels = {{"app", ""}, {"k", "NULL"}};
  a.meta.annotations = {{"note", odd}, {"empty", ""}};
  a.fields = {{"metadata.name", "a"}, {"spec.s", odd}};
  a.body = R"({"spec":{"s":"a \"q\" \\ {x,y} NULL \u00e9","t":""}})";
  AuditRecord record = CreateRecord("req \"1\"", "user\\name", {"g,1", "{g2}"});
  record.user_agent = odd;
  {
    AuditScope scope(&record);
    ASSERT_TRUE((*writer)->Create(a).ok());
  }
  auto got = (*reader)->Get(a.Key());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->meta.labels, a.meta.labels);
  EXPECT_EQ(got->meta.annotations, a.meta.annotations);
  EXPECT_EQ(got->fields, a.fields);
  EXPECT_EQ(nlohmann::json::parse(got->body), nlohmann::json::parse(a.body));
  EXPECT_EQ(nlohmann::json::parse(got->body)["spec"]["s"], "a \"q\" \\ {x,y} NULL \xc3\xa9");
  auto audit = (*reader)->QueryAudit(AuditQuery{});
  ASSERT_TRUE(audit.ok()) << audit.status();
  ASSERT_EQ(audit->size(), 1u);
  EXPECT_EQ((*audit)[0].request_id, record.request_id);
  EXPECT_EQ((*audit)[0].user, record.user);
  EXPECT_EQ((*audit)[0].groups, record.groups);
  EXPECT_EQ((*audit)[0].user_agent, odd);
}

TEST(PgStoreTest, LastCommittedRevisionOfIsPerResourceAndCountsThisProcessOnly) {
  auto& env = testing::PgTestEnv::Get();
  env.Reset();
  auto writer = PgStore::Open(env.url(), 2);
  auto other = PgStore::Open(env.url(), 2);
  ASSERT_TRUE(writer.ok() && other.ok());
  EXPECT_EQ((*writer)->LastCommittedRevisionOf("things"), 0);
  auto thing = (*writer)->Create(MakeObject("t"));
  ASSERT_TRUE(thing.ok()) << thing.status();
  model::Object quota = MakeObject("q");
  quota.resource = "resourcequotas";
  Transaction txn;  // a transaction's writes count, each for its own resource
  txn.writes.push_back({Write::Kind::kCreate, quota, {}, 0});
  txn.writes.push_back({Write::Kind::kCreate, MakeObject("t2"), {}, 0});
  auto committed = (*writer)->Commit(txn);
  ASSERT_TRUE(committed.ok()) << committed.status();
  ASSERT_TRUE((*writer)->Delete(thing->Key(), 0).ok());
  const int64_t newest = (*writer)->LastCommittedRevision();
  EXPECT_EQ((*writer)->LastCommittedRevisionOf("things"), newest);  // the delete
  EXPECT_EQ((*writer)->LastCommittedRevisionOf("resourcequotas"),
            (*committed)[0].meta.resource_version);
  EXPECT_LT((*writer)->LastCommittedRevisionOf("resourcequotas"), newest);
  EXPECT_EQ((*writer)->LastCommittedRevisionOf("pods"), 0);
  // Another store's writes are not this one's.
  ASSERT_TRUE((*other)->Create(MakeObject("o")).ok());
  EXPECT_EQ((*writer)->LastCommittedRevisionOf("things"), newest);
  EXPECT_GT((*other)->LastCommittedRevisionOf("things"), newest);
}

// A change this process committed is handed to ChangesSince from memory instead of being read back
// from change_log: it must be the change another process reads from the log, field by field
// (JSON texts compared as JSON: PostgreSQL's jsonb spells them its own way).
TEST(PgStoreTest, OwnChangesReadAsAnotherProcessReadsThemFromTheLog) {
  auto& env = testing::PgTestEnv::Get();
  env.Reset();
  auto writer = PgStore::Open(env.url(), 2);
  auto reader = PgStore::Open(env.url(), 2);
  ASSERT_TRUE(writer.ok() && reader.ok());
  model::Object a = MakeObject("a");
  a.meta.namespace_ = "ns";
  a.meta.labels = {{"app", "x"}};
  a.meta.annotations = {{"note", "a b"}};
  a.meta.finalizers = {"example.com/keep", "example.com/\"quoted\""};
  a.meta.generate_name = "a-";
  a.meta.owner_references = R"([{"apiVersion":"v1","kind":"Pod","name":"p","uid":"u1"}])";
  a.meta.creation_timestamp = std::chrono::system_clock::now();
  a.fields = {{"metadata.name", "a"}, {"spec.n", "1"}};
  a.spec_digest = "sha256:0";
  a.body = R"({"spec":{"n":1,"list":[1,2.5,"s"]},"status":{}})";
  auto created = (*writer)->Create(a);
  ASSERT_TRUE(created.ok()) << created.status();
  model::Object next = *created;
  next.body = R"({"spec":{"n":2},"status":{"phase":"Running"}})";
  next.meta.deletion_timestamp = std::chrono::system_clock::now();
  next.meta.deletion_grace_period_seconds = 30;
  ASSERT_TRUE((*writer)->Update(next, created->meta.resource_version).ok());
  Transaction txn;
  model::Object b = MakeObject("b");
  txn.writes.push_back({Write::Kind::kCreate, b, {}, 0});
  txn.writes.push_back({Write::Kind::kDelete, {}, a.Key(), 0});
  auto committed = (*writer)->Commit(txn);
  ASSERT_TRUE(committed.ok()) << committed.status();
  // Written by the other store: read from the log by both.
  ASSERT_TRUE((*reader)->Create(MakeObject("c")).ok());
  ASSERT_TRUE((*writer)->Delete(b.Key(), 0).ok());

  auto mine = (*writer)->ChangesSince(0, 0);
  auto theirs = (*reader)->ChangesSince(0, 0);
  ASSERT_TRUE(mine.ok() && theirs.ok());
  ASSERT_EQ(mine->size(), 6u);
  ASSERT_EQ(theirs->size(), mine->size());
  auto same_json = [](const std::string& x, const std::string& y) {
    if (x.empty() || y.empty()) return x == y;
    return nlohmann::json::parse(x) == nlohmann::json::parse(y);
  };
  for (size_t i = 0; i < mine->size(); ++i) {
    const model::WatchEvent& m = (*mine)[i];
    const model::WatchEvent& t = (*theirs)[i];
    SCOPED_TRACE("change " + std::to_string(i) + ": " + m.object.meta.name);
    EXPECT_EQ(m.type, t.type);
    EXPECT_EQ(m.object.resource, t.object.resource);
    EXPECT_EQ(m.object.spec_digest, t.object.spec_digest);
    EXPECT_EQ(m.object.fields, t.object.fields);
    EXPECT_TRUE(same_json(m.object.body, t.object.body)) << m.object.body << " / " << t.object.body;
    model::ObjectMeta mm = m.object.meta;
    model::ObjectMeta tm = t.object.meta;
    EXPECT_TRUE(same_json(mm.owner_references, tm.owner_references));
    mm.owner_references = tm.owner_references = "";
    EXPECT_EQ(mm, tm);
  }
  EXPECT_EQ((*mine)[0].type, model::EventType::kAdded);
  EXPECT_EQ((*mine)[1].type, model::EventType::kModified);
  EXPECT_EQ((*mine)[3].type, model::EventType::kDeleted);
  EXPECT_EQ((*mine)[3].object.meta.name, "a");
  // Read once, a change is read again (from the log) by a reader that starts earlier.
  auto again = (*writer)->ChangesSince((*mine)[1].object.meta.resource_version, 0);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 4u);
  auto from_start = (*writer)->ChangesSince(0, 2);
  ASSERT_TRUE(from_start.ok());
  ASSERT_EQ(from_start->size(), 2u);
  EXPECT_TRUE(same_json((*from_start)[1].object.body, (*theirs)[1].object.body));
}

// Two stores over one fresh database (two replicas), and its revision when they opened.
struct TwoStores {
  std::unique_ptr<PgStore> writer;
  std::unique_ptr<PgStore> other;
  int64_t start = 0;
};

absl::StatusOr<TwoStores> OpenTwoStores() {
  auto& env = testing::PgTestEnv::Get();
  env.Reset();
  TwoStores s;
  QM_ASSIGN_OR_RETURN(s.writer, PgStore::Open(env.url(), 2));
  QM_ASSIGN_OR_RETURN(s.other, PgStore::Open(env.url(), 2));
  QM_ASSIGN_OR_RETURN(s.start, s.writer->CurrentRevision());
  return s;
}

// The watch hub's reads (FollowChanges): a batch this process committed right after the
// revision asked for is answered from memory, with exactly the changes the log holds; a change of
// another replica in between breaks the chain and is read from the log. ChangesSince always reads
// the log and answers every change.
TEST(PgStoreTest, FollowChangesTakesOwnBatchesFromMemoryAndOthersFromTheLog) {
  auto stores = OpenTwoStores();
  ASSERT_TRUE(stores.ok()) << stores.status();
  auto& [writer, other, start] = *stores;
  auto names = [](const std::vector<model::WatchEvent>& events) {
    std::vector<std::string> out;
    for (const auto& ev : events) out.push_back(ev.object.meta.name);
    return out;
  };
  using Names = std::vector<std::string>;

  auto a = writer->Create(MakeObject("a"));
  auto b = writer->Create(MakeObject("b"));
  ASSERT_TRUE(a.ok() && b.ok());
  uint64_t reads = writer->log_reads();
  auto own = writer->FollowChanges(start, 0);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(names(*own), (Names{"a", "b"}));
  EXPECT_EQ(writer->log_reads(), reads);
  // A limit ends the answer between two batches.
  auto limited = writer->FollowChanges(start, 1);
  ASSERT_TRUE(limited.ok());
  EXPECT_EQ(names(*limited), (Names{"a"}));

  // Another replica writes between two of this one's batches.
  auto c = other->Create(MakeObject("c"));
  auto d = writer->Create(MakeObject("d"));
  ASSERT_TRUE(c.ok() && d.ok());
  reads = writer->log_reads();
  auto mixed = writer->FollowChanges(b->meta.resource_version, 0);
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ(names(*mixed), (Names{"c", "d"}));
  EXPECT_EQ(writer->log_reads(), reads + 1);

  // A transaction's writes and a delete: one batch, its changes as the log holds them.
  Transaction txn;
  txn.writes.push_back({Write::Kind::kCreate, MakeObject("e"), {}, 0});
  txn.writes.push_back({Write::Kind::kDelete, {}, a->Key(), 0});
  ASSERT_TRUE(writer->Commit(txn).ok());
  reads = writer->log_reads();
  auto tail = writer->FollowChanges(d->meta.resource_version, 0);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(writer->log_reads(), reads);
  auto logged = other->ChangesSince(d->meta.resource_version, 0);
  ASSERT_TRUE(logged.ok());
  ASSERT_EQ(names(*tail), (Names{"e", "a"}));
  ASSERT_EQ(names(*logged), names(*tail));
  for (size_t i = 0; i < tail->size(); ++i) {
    EXPECT_EQ((*tail)[i].type, (*logged)[i].type);
    EXPECT_EQ((*tail)[i].object.meta.resource_version, (*logged)[i].object.meta.resource_version);
    EXPECT_EQ((*tail)[i].object.meta.uid, (*logged)[i].object.meta.uid);
  }
  EXPECT_EQ((*tail)[1].type, model::EventType::kDeleted);

  // ChangesSince answers everything after a revision, from the log.
  reads = writer->log_reads();
  auto all = writer->ChangesSince(start, 0);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(names(*all), (Names{"a", "b", "c", "d", "e", "a"}));
  EXPECT_EQ(writer->log_reads(), reads + 1);
}

// WaitForChanges returns at once for a change this process committed or a notification named,
// and sleeps otherwise, also when the notification of a change already read comes late.
TEST(PgStoreTest, WaitForChangesWakesForNewChangesOnly) {
  auto stores = OpenTwoStores();
  ASSERT_TRUE(stores.ok()) << stores.status();
  auto& [writer, other, start] = *stores;
  writer->WaitForChanges(start, std::chrono::milliseconds(10));  // starts listening
  auto waited = [&](int64_t after_rv, std::chrono::milliseconds timeout) {
    const auto t0 = std::chrono::steady_clock::now();
    writer->WaitForChanges(after_rv, timeout);
    return std::chrono::steady_clock::now() - t0;
  };
  using std::chrono::milliseconds;
  using std::chrono::seconds;

  auto c = other->Create(MakeObject("c"));
  ASSERT_TRUE(c.ok());
  EXPECT_LT(waited(start, milliseconds(20000)), seconds(10));  // the notification
  auto mine = writer->Create(MakeObject("mine"));
  ASSERT_TRUE(mine.ok());
  EXPECT_LT(waited(c->meta.resource_version, milliseconds(20000)), seconds(10));
  // Nothing after `mine`: its notification (already read or still coming) does not end the wait.
  EXPECT_GE(waited(mine->meta.resource_version, milliseconds(300)), milliseconds(290));
  EXPECT_GE(waited(mine->meta.resource_version, milliseconds(300)), milliseconds(290));
}

// Every queued write is one group of one qm_write_batch call (migrations/0011): deletes, creates
// and transactions with deletes share the call, each group commits or fails on its own, audit
// records go in for the groups that committed, and revisions follow the queue.
TEST(PgStoreTest, OneBatchCommitsEachWriteOnItsOwn) {
  auto& env = testing::PgTestEnv::Get();
  env.Reset();
  auto store = PgStore::Open(env.url(), 2);
  ASSERT_TRUE(store.ok()) << store.status();
  std::map<std::string, model::Object> made;
  for (const char* name : {"a", "b", "c"}) {
    auto created = (*store)->Create(MakeObject(name));
    ASSERT_TRUE(created.ok()) << created.status();
    made[name] = *created;
  }
  // Hold the write lock so that the writer stops in the first batch and the rest queue up
  // behind it, to go in the next call together.
  pqxx::connection holder(env.url());
  pqxx::work hold(holder);
  hold.exec("SELECT pg_advisory_xact_lock(7236011)");
  Transaction first;
  first.writes.push_back({Write::Kind::kCreate, MakeObject("first"), {}, 0});
  auto f0 = (*store)->CommitAsync(std::move(first));
  pqxx::connection watcher(env.url());
  for (int i = 0; i < 500; ++i) {
    pqxx::nontransaction look(watcher);
    if (look.exec1("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")[0]
            .as<int>() == 1) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto audited = [](Transaction txn, const std::string& request) {
    AuditRecord record;
    record.time = std::chrono::system_clock::now();
    record.request_id = request;
    record.user = "alice";
    record.verb = "delete";
    record.resource = "things";
    record.code = 200;
    txn.audit.push_back(record);
    return txn;
  };
  Transaction delete_a;
  delete_a.writes.push_back(
      {Write::Kind::kDelete, {}, made["a"].Key(), made["a"].meta.resource_version});
  auto f1 = (*store)->CommitAsync(audited(std::move(delete_a), "delete-a"));
  Transaction stale_b;
  stale_b.writes.push_back(
      {Write::Kind::kDelete, {}, made["b"].Key(), made["b"].meta.resource_version + 50});
  auto f2 = (*store)->CommitAsync(audited(std::move(stale_b), "delete-b"));
  Transaction mixed;
  mixed.writes.push_back({Write::Kind::kCreate, MakeObject("d"), {}, 0});
  mixed.writes.push_back({Write::Kind::kDelete, {}, made["c"].Key(), 0});
  model::Object b2 = made["b"];
  b2.body = R"({"spec":{"n":2}})";
  mixed.writes.push_back({Write::Kind::kUpdate, b2, {}, made["b"].meta.resource_version});
  auto f3 = (*store)->CommitAsync(audited(std::move(mixed), "mixed"));
  Transaction ghost;
  ghost.writes.push_back({Write::Kind::kDelete, {}, model::ResourceKey{"things", "", "ghost"}, 0});
  auto f4 = (*store)->CommitAsync(audited(std::move(ghost), "ghost"));
  hold.commit();

  auto r0 = f0.get();
  ASSERT_TRUE(r0.ok()) << r0.status();
  auto r1 = f1.get();
  ASSERT_TRUE(r1.ok()) << r1.status();
  ASSERT_EQ(r1->size(), 1u);
  EXPECT_EQ((*r1)[0].meta.name, "a");
  EXPECT_EQ((*r1)[0].meta.uid, "uid-a");
  EXPECT_EQ((*r1)[0].body, R"({"spec": {"n": 1}})");  // as jsonb prints it
  EXPECT_GT((*r1)[0].meta.resource_version, r0->front().meta.resource_version);
  auto r2 = f2.get();
  EXPECT_EQ(r2.status(), ConflictError(made["b"].Key()));
  auto r3 = f3.get();
  ASSERT_TRUE(r3.ok()) << r3.status();
  ASSERT_EQ(r3->size(), 3u);
  EXPECT_EQ((*r3)[0].meta.name, "d");
  EXPECT_EQ((*r3)[1].meta.name, "c");
  EXPECT_EQ((*r3)[1].meta.uid, "uid-c");
  EXPECT_EQ((*r3)[2].body, R"({"spec":{"n":2}})");
  EXPECT_LT((*r1)[0].meta.resource_version, (*r3)[0].meta.resource_version);
  EXPECT_LT((*r3)[0].meta.resource_version, (*r3)[1].meta.resource_version);
  EXPECT_LT((*r3)[1].meta.resource_version, (*r3)[2].meta.resource_version);
  EXPECT_EQ(f4.get().status(), NotFoundError(model::ResourceKey{"things", "", "ghost"}));

  // The state and the log as a second process reads them.
  auto reader = PgStore::Open(env.url(), 2);
  ASSERT_TRUE(reader.ok());
  auto listed = (*reader)->List(ListOptions{"things"});
  ASSERT_TRUE(listed.ok()) << listed.status();
  std::vector<std::string> names;
  for (const auto& o : listed->items) names.push_back(o->meta.name);
  EXPECT_EQ(names, (std::vector<std::string>{"b", "d", "first"}));
  auto log = (*reader)->ChangesSince(made["c"].meta.resource_version, 0);
  ASSERT_TRUE(log.ok()) << log.status();
  std::vector<std::string> changes;
  for (const auto& ev : *log) {
    changes.push_back(std::string(ev.type == model::EventType::kAdded     ? "ADDED "
                                  : ev.type == model::EventType::kDeleted ? "DELETED "
                                                                          : "MODIFIED ") +
                      ev.object.meta.name);
  }
  EXPECT_EQ(changes, (std::vector<std::string>{"ADDED first", "DELETED a", "ADDED d", "DELETED c",
                                               "MODIFIED b"}));
  auto audit = (*reader)->QueryAudit(AuditQuery{});
  ASSERT_TRUE(audit.ok()) << audit.status();
  std::vector<std::string> requests;
  for (const auto& r : *audit) requests.push_back(r.request_id);
  EXPECT_EQ(requests, (std::vector<std::string>{"delete-a", "mixed"}));
}

// A call of qm_write_batch (migrations/0013) with every parameter named: the ones not given are
// empty arrays.
std::string WriteBatchCall(int groups, const std::map<std::string, std::string>& given) {
  static const std::vector<std::pair<const char*, const char*>> kParams = {
      {"w_group", "integer"},     {"w_op", "text"},
      {"w_resource", "text"},     {"w_namespace", "text"},
      {"w_name", "text"},         {"w_uid", "text"},
      {"w_generation", "bigint"}, {"w_creation", "bigint"},
      {"w_deletion", "bigint"},   {"w_labels", "text"},
      {"w_meta", "text"},         {"w_fields", "text"},
      {"w_digest", "text"},       {"w_body", "text"},
      {"w_expected", "bigint"},   {"d_group", "integer"},
      {"d_driver", "text"},       {"d_pool", "text"},
      {"d_device", "text"},       {"d_share_id", "text"},
      {"d_claim_uid", "text"},    {"d_admin_access", "boolean"},
      {"d_consumed", "text"},     {"d_charges", "text"},
      {"r_group", "integer"},     {"r_uid", "text"},
      {"q_group", "integer"},     {"q_namespace", "text"},
      {"q_key", "text"},          {"q_hard", "bigint"},
      {"s_group", "integer"},     {"s_namespace", "text"},
      {"s_count", "bigint"},      {"s_newest", "bigint"},
      {"a_group", "integer"},     {"a_at", "bigint"},
      {"a_request", "text"},      {"a_user", "text"},
      {"a_groups", "text"},       {"a_verb", "text"},
      {"a_api_group", "text"},    {"a_resource", "text"},
      {"a_subresource", "text"},  {"a_namespace", "text"},
      {"a_name", "text"},         {"a_code", "integer"},
      {"a_source", "text"},       {"a_user_agent", "text"}};
  std::string sql =
      "SELECT grp, ord, rv, code, o_uid, o_creation, o_body FROM qm_write_batch(groups => " +
      std::to_string(groups);
  for (const auto& [name, type] : kParams) {
    auto it = given.find(name);
    sql += std::string(", ") + name + " => " + (it != given.end() ? it->second : "'{}'") +
           "::" + type + "[]";
  }
  return sql + ") ORDER BY grp, ord";
}

// What a batch returned, one "group.ord code" per row ("ok" for a write that committed).
std::vector<std::string> Outcomes(const pqxx::result& rows) {
  std::vector<std::string> out;
  for (const auto& row : rows) {
    out.push_back(row[0].as<std::string>() + "." + row[1].as<std::string>() + " " +
                  (row[3].is_null() ? std::string("ok") : row[3].as<std::string>()));
  }
  return out;
}

// A batch for WriteBatchCall: writes, ledger rows, releases and audit rows, each with its group.
struct SqlBatch {
  struct W {
    int group;
    std::string op, resource, name, uid, body;
    int64_t expected = 0;
  };
  struct D {
    int group;
    std::string device, claim_uid, charges = R"({"capacity":[],"counters":[]})";
  };
  std::vector<W> writes;
  std::vector<D> ledger;
  std::vector<std::pair<int, std::string>> releases;  // group, claim uid
  std::vector<std::pair<int, std::string>> audit;     // group, request id

  static std::string Array(const std::vector<std::string>& items) {
    std::string out = "'{";
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += ",";
      out += "\"";
      for (char c : items[i]) {
        if (c == '"' || c == '\\') out += '\\';
        if (c == '\'') out += '\'';
        out += c;
      }
      out += "\"";
    }
    return out + "}'";
  }
  template <typename F>
  static std::string Column(const auto& rows, F field) {
    std::vector<std::string> items;
    for (const auto& r : rows) items.push_back(field(r));
    return Array(items);
  }
  std::map<std::string, std::string> Params() const {
    auto str = [](auto v) { return std::to_string(v); };
    std::map<std::string, std::string> p;
    p["w_group"] = Column(writes, [&](const W& w) { return str(w.group); });
    p["w_op"] = Column(writes, [](const W& w) { return w.op; });
    p["w_resource"] = Column(writes, [](const W& w) { return w.resource; });
    p["w_namespace"] = Column(writes, [](const W&) { return std::string("ns"); });
    p["w_name"] = Column(writes, [](const W& w) { return w.name; });
    p["w_uid"] = Column(writes, [](const W& w) { return w.uid; });
    p["w_generation"] = Column(writes, [](const W&) { return std::string("1"); });
    p["w_creation"] = Column(writes, [](const W&) { return std::string("1700000000"); });
    p["w_deletion"] = Column(writes, [](const W&) { return std::string("0"); });
    for (const char* col : {"w_labels", "w_meta", "w_fields"}) {
      p[col] = Column(writes, [](const W&) { return std::string("{}"); });
    }
    p["w_digest"] = Column(writes, [](const W&) { return std::string(); });
    p["w_body"] = Column(writes, [](const W& w) { return w.body.empty() ? "{}" : w.body; });
    p["w_expected"] = Column(writes, [&](const W& w) { return str(w.expected); });
    p["d_group"] = Column(ledger, [&](const D& d) { return str(d.group); });
    p["d_driver"] = Column(ledger, [](const D&) { return std::string("d"); });
    p["d_pool"] = Column(ledger, [](const D&) { return std::string("p"); });
    p["d_device"] = Column(ledger, [](const D& d) { return d.device; });
    p["d_share_id"] = Column(ledger, [](const D&) { return std::string(); });
    p["d_claim_uid"] = Column(ledger, [](const D& d) { return d.claim_uid; });
    p["d_admin_access"] = Column(ledger, [](const D&) { return std::string("f"); });
    p["d_consumed"] = Column(ledger, [](const D&) { return std::string("{}"); });
    p["d_charges"] = Column(ledger, [](const D& d) { return d.charges; });
    p["r_group"] = Column(releases, [&](const auto& r) { return str(r.first); });
    p["r_uid"] = Column(releases, [](const auto& r) { return r.second; });
    p["a_group"] = Column(audit, [&](const auto& a) { return str(a.first); });
    p["a_at"] = Column(audit, [](const auto&) { return std::string("1700000000000000"); });
    p["a_request"] = Column(audit, [](const auto& a) { return a.second; });
    p["a_groups"] = Column(audit, [](const auto&) { return std::string("[]"); });
    p["a_code"] = Column(audit, [](const auto&) { return std::string("200"); });
    for (const char* col : {"a_user", "a_verb", "a_api_group", "a_resource", "a_subresource",
                            "a_namespace", "a_name", "a_source", "a_user_agent"}) {
      p[col] = Column(audit, [](const auto&) { return std::string("x"); });
    }
    return p;
  }
  int Groups() const {
    int n = 0;
    for (const auto& w : writes) n = std::max(n, w.group);
    for (const auto& d : ledger) n = std::max(n, d.group);
    for (const auto& r : releases) n = std::max(n, r.first);
    return n;
  }
  std::string Call() const { return WriteBatchCall(Groups(), Params()); }
};

// Writes that commit in any batch: creates of fresh objects in groups of their own, from `group`.
void AddFiller(SqlBatch& batch, int group, int count, const std::string& prefix) {
  for (int i = 0; i < count; ++i) {
    batch.writes.push_back({group + i, "c", "things", prefix + std::to_string(i),
                            "uid-" + prefix + std::to_string(i), ""});
  }
}

// A batch of six writes or more in which every group commits is written set-based
// (migrations/0013): with the write-by-write function out of the way, such a batch still commits,
// with revisions in queue order, its change-log rows (a delete's with the object's last state,
// which the call returns), its ledger rows (with and without charges) and its audit rows, and
// its updates and deletes find their rows through the primary key. A batch with a failing group,
// one whose ledger row takes a device that a later group releases, one that deletes a claim it
// gives ledger rows, and a small one need the write-by-write function; with it back, each group
// of them gets its own outcome.
TEST(PgStoreTest, BatchesWithoutFailuresAreWrittenSetBased) {
  auto& env = testing::PgTestEnv::Get();
  env.Reset();
  ASSERT_TRUE(PgStore::Open(env.url(), 1).ok());
  pqxx::connection c(env.url());
  Plans plans(c);
  pqxx::work tx(c);
  tx.exec(
      "INSERT INTO objects (resource, namespace, name, uid, resource_version, generation, "
      "creation_timestamp, labels, meta, fields, spec_digest, body) "
      "SELECT 'things', 'ns', 't' || g, 'uid-t' || g, g, 1, to_timestamp(1600000000), "
      "'{}', '{}', '{}', '', ('{\"n\": ' || g || '}')::jsonb FROM generate_series(1, 5000) AS g");
  tx.exec(
      "INSERT INTO objects (resource, namespace, name, uid, resource_version, generation, "
      "creation_timestamp, labels, meta, fields, spec_digest, body) "
      "VALUES ('resourceclaims.resource.k8s.io', 'ns', 'c1', 'uid-c1', 5000, 1, now(), "
      "'{}', '{}', '{}', '', '{}')");
  tx.exec("SELECT setval('resource_version_seq', 5000)");
  tx.exec("ANALYZE objects");
  tx.exec("ALTER FUNCTION qm_write_batch_each RENAME TO qm_write_batch_each_hidden");
  ExplainEveryStatement(tx);
  SqlBatch clean;
  clean.writes = {{1, "c", "things", "x", "uid-x", R"({"spec":{"n":2}})"},
                  {2, "c", "things", "y", "uid-y", R"({"spec":{"n":3}})"},
                  {2, "u", "things", "t7", "uid-t7", R"({"a":1})", 7},
                  {3, "u", "things", "t8", "uid-t8", ""},
                  {4, "d", "things", "t9", "", "", 9},
                  {5, "d", "things", "t10", "", ""}};
  clean.ledger = {{3, "gpu-0", "uid-t8"},
                  {3, "gpu-1", "uid-t8", R"({"capacity":[["memory","10","80"]],"counters":[]})"}};
  clean.audit = {{1, "r1"}, {3, "r3"}};
  plans.text.clear();
  const pqxx::result done = tx.exec(clean.Call());
  const std::string text = plans.text;
  EXPECT_EQ(Outcomes(done),
            (std::vector<std::string>{"1.1 ok", "2.1 ok", "2.2 ok", "3.1 ok", "4.1 ok", "5.1 ok"}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(done[i][2].as<int64_t>(), 5001 + i);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(done[i][4].is_null());
  EXPECT_EQ(done[4][4].as<std::string>(), "uid-t9");  // the deleted object's last state
  EXPECT_EQ(done[4][5].as<int64_t>(), 1600000000);
  EXPECT_EQ(done[4][6].as<std::string>(), R"({"n": 9})");
  EXPECT_EQ(done[5][4].as<std::string>(), "uid-t10");
  EXPECT_EQ(tx.exec1("SELECT string_agg(rv || ' ' || event_type || ' ' || name || ' ' || uid || "
                     "' ' || body::text, ',' ORDER BY rv) FROM change_log")[0]
                .as<std::string>(),
            R"(5001 ADDED x uid-x {"spec":{"n":2}},5002 ADDED y uid-y {"spec":{"n":3}},)"
            R"(5003 MODIFIED t7 uid-t7 {"a":1},5004 MODIFIED t8 uid-t8 {},)"
            R"(5005 DELETED t9 uid-t9 {"n": 9},5006 DELETED t10 uid-t10 {"n": 10})");
  EXPECT_EQ(tx.exec1("SELECT string_agg(name || ' ' || resource_version, ',' ORDER BY name) "
                     "FROM objects WHERE name IN ('x', 'y', 't7', 't8', 't9', 't10')")[0]
                .as<std::string>(),
            "t7 5003,t8 5004,x 5001,y 5002");
  EXPECT_EQ(tx.exec1("SELECT string_agg(device || ' ' || capacity_charges::text, ',' "
                     "ORDER BY device) FROM device_allocations")[0]
                .as<std::string>(),
            R"(gpu-0 [],gpu-1 [["memory", "10"]])");
  EXPECT_EQ(tx.exec1("SELECT string_agg(used::text, ',') FROM device_usage")[0].as<std::string>(),
            "10");
  EXPECT_EQ(tx.exec1("SELECT string_agg(request_id, ',' ORDER BY id) FROM audit_events")[0]
                .as<std::string>(),
            "r1,r3");
  EXPECT_NE(text.find("Update on objects"), std::string::npos) << text;
  EXPECT_NE(text.find("Delete on objects"), std::string::npos) << text;
  EXPECT_NE(text.find("Index Scan using objects_pkey on objects"), std::string::npos) << text;
  EXPECT_EQ(text.find("Seq Scan on objects"), std::string::npos) << text;

  // Batches the set-based path must not take.
  SqlBatch clash = clean;  // x exists; ghost does not
  clash.writes[0].uid = "uid-x2";
  clash.writes[1].name = "z";
  clash.writes[1].uid = "uid-z";
  clash.writes[2].expected = 0;
  clash.writes[4] = {4, "d", "things", "ghost", "", ""};
  clash.writes[5] = {5, "d", "things", "t11", "", ""};
  clash.ledger[0].device = "gpu-2";
  clash.ledger[1].device = "gpu-3";
  clash.audit = {{1, "r4"}, {3, "r5"}};
  SqlBatch freed_later;  // group 1 takes gpu-0, which uid-t8 holds until group 2 releases it
  freed_later.writes = {{1, "u", "things", "t7", "uid-t7", ""}};
  freed_later.ledger = {{1, "gpu-0", "uid-t7"}};
  freed_later.releases = {{2, "uid-t8"}};
  AddFiller(freed_later, 3, 5, "f");
  SqlBatch deletes_its_claim;  // group 1 gives claim c1 a device; group 2 deletes c1
  deletes_its_claim.writes = {{1, "u", "things", "t7", "uid-t7", ""},
                              {2, "d", "resourceclaims.resource.k8s.io", "c1", "", ""}};
  deletes_its_claim.ledger = {{1, "gpu-5", "uid-c1"}};
  AddFiller(deletes_its_claim, 3, 4, "g");
  SqlBatch small;  // five writes: cheaper one by one
  AddFiller(small, 1, 5, "s");
  for (const SqlBatch& batch : {clash, freed_later, deletes_its_claim, small}) {
    pqxx::subtransaction hidden(tx);
    EXPECT_THROW(hidden.exec(batch.Call()), pqxx::undefined_function);
  }
  tx.exec("ALTER FUNCTION qm_write_batch_each_hidden RENAME TO qm_write_batch_each");
  EXPECT_EQ(Outcomes(tx.exec(clash.Call())),
            (std::vector<std::string>{"1.1 exists", "2.1 ok", "2.2 ok", "3.1 ok", "4.1 missing",
                                      "5.1 ok"}));
  EXPECT_EQ(tx.exec1("SELECT string_agg(name, ',' ORDER BY rv) FROM change_log WHERE rv > 5006")[0]
                .as<std::string>(),
            "z,t7,t8,t11");
  EXPECT_EQ(tx.exec1("SELECT string_agg(request_id, ',' ORDER BY id) FROM audit_events")[0]
                .as<std::string>(),
            "r1,r3,r5");
  EXPECT_EQ(tx.exec1("SELECT uid FROM objects WHERE name = 'x'")[0].as<std::string>(), "uid-x");
  EXPECT_EQ(
      Outcomes(tx.exec(freed_later.Call())),
      (std::vector<std::string>{"1.1 taken", "3.1 ok", "4.1 ok", "5.1 ok", "6.1 ok", "7.1 ok"}));
  EXPECT_EQ(Outcomes(tx.exec(deletes_its_claim.Call())),
            (std::vector<std::string>{"1.1 ok", "2.1 ok", "3.1 ok", "4.1 ok", "5.1 ok", "6.1 ok"}));
  // Group 2 of freed_later released uid-t8's devices; deleting c1 released gpu-5.
  EXPECT_EQ(tx.exec1("SELECT count(*) FROM device_allocations")[0].as<int>(), 0);
  EXPECT_EQ(tx.exec1("SELECT count(*) FROM objects WHERE name = 'c1'")[0].as<int>(), 0);
}

}  // namespace
}  // namespace qm::store::pg
