// PostgreSQL-specific behaviour beyond the shared Store contract.
#include <gtest/gtest.h>

#include <pqxx/pqxx>

#include "pg_test_env.h"
#include "store/pg/embedded_postgres.h"
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

// A change and its audit record commit together: a write that succeeds leaves exactly its
// record, one that fails (a conflict) leaves none; deletes are recorded too.
TEST(PgStoreTest, AuditRecordsCommitWithTheirChanges) {
  auto& env = testing::PgTestEnv::Get();
  env.Reset();
  auto store = PgStore::Open(env.url(), 2);
  ASSERT_TRUE(store.ok()) << store.status();
  AuditRecord record;
  record.time = std::chrono::system_clock::now();
  record.request_id = "req-1";
  record.user = "alice";
  record.groups = {"team-a", "system:authenticated"};
  record.verb = "create";
  record.resource = "things";
  record.code = 201;
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

}  // namespace
}  // namespace qm::store::pg
