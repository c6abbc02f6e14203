// The PostgreSQL store after its connections broke (tests/faults/conn_loss.sh and pg_restart.sh
// show the same under load through the whole server): a request that meets a broken pooled
// connection runs again on a fresh one instead of failing, since nothing it did can have
// committed.
#include <gtest/gtest.h>

#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "pg_test_env.h"
#include "store/pg/pg_store.h"

namespace qm::store::pg {
namespace {

constexpr int kPoolSize = 4;

model::Object MakeObject(const std::string& name) {
  model::Object o;
  o.resource = "things";
  o.meta.name = name;
  o.meta.uid = "uid-" + name;
  o.meta.generation = 1;
  o.body = R"({"spec":{"n":1}})";
  return o;
}

// Opens every connection of the pool, so that all of them are idle in it afterwards.
void FillPool(PgStore& store) {
  std::vector<ConnectionPool::Lease> leases;
  for (int i = 0; i < kPoolSize; ++i) {
    auto lease = store.pool().Acquire();
    ASSERT_TRUE(lease.ok()) << lease.status();
    leases.push_back(std::move(*lease));
  }
}

// Ends every connection to the database but the caller's, as an administrator would.
int TerminateBackends(const std::string& url) {
  pqxx::connection admin(url);
  pqxx::nontransaction tx(admin);
  return tx
      .exec1(
          "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
          "WHERE pid <> pg_backend_pid() AND datname = current_database()")[0]
      .as<int>();
}

// Every kind of call, each of which must succeed at its first try.
void EveryCallSucceeds(PgStore& store, const std::string& name) {
  auto created = store.Create(MakeObject(name));
  ASSERT_TRUE(created.ok()) << created.status();
  auto got = store.Get(model::ResourceKey{"things", "", name});
  EXPECT_TRUE(got.ok()) << got.status();
  ListOptions options;
  options.resource = "things";
  auto list = store.List(options);
  EXPECT_TRUE(list.ok()) << list.status();
  auto rv = store.CurrentRevision();
  EXPECT_TRUE(rv.ok()) << rv.status();
  auto changes = store.ChangesSince(0, 10);
  EXPECT_TRUE(changes.ok()) << changes.status();
  EXPECT_TRUE(store.Ping().ok());
  Transaction txn;
  model::Object updated = *created;
  updated.body = R"({"spec":{"n":2}})";
  Write write;
  write.kind = Write::Kind::kUpdate;
  write.object = updated;
  write.expected_rv = created->meta.resource_version;
  txn.writes.push_back(write);
  auto committed = store.Commit(txn);
  EXPECT_TRUE(committed.ok()) << committed.status();
}

TEST(PgReconnectTest, TerminatedConnectionsFailNoRequest) {
  auto& env = testing::PgTestEnv::Get();
  env.Reset();
  auto store = PgStore::Open(env.url(), kPoolSize);
  ASSERT_TRUE(store.ok()) << store.status();
  for (int round = 0; round < 3; ++round) {
    FillPool(**store);
    EXPECT_GE(TerminateBackends(env.url()), kPoolSize);
    EveryCallSucceeds(**store, "after-terminate-" + std::to_string(round));
  }
}

TEST(PgReconnectTest, NoRequestFailsAfterTheDatabaseRestarted) {
  auto& env = testing::PgTestEnv::Get();
  env.Reset();
  auto store = PgStore::Open(env.url(), kPoolSize);
  ASSERT_TRUE(store.ok()) << store.status();
  FillPool(**store);
  env.Restart();
  EveryCallSucceeds(**store, "after-restart");
}

}  // namespace
}  // namespace qm::store::pg
