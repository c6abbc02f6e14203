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

}  // namespace
}  // namespace qm::store::pg
