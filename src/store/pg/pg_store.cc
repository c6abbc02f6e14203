#include "store/pg/pg_store.h"

#include <algorithm>
#include <limits>
#include <set>
#include <tuple>

#include <pqxx/pqxx>

#include <nlohmann/json.hpp>

#include "model/json/read.h"
#include "store/pg/migrations.h"
#include "store/pg/pg_store_internal.h"
#include "store/pg/queries.h"
#include "store/pg/with_connection.h"

namespace qm::store::pg {

using namespace pg_internal;  // NOLINT(google-build-using-namespace)

namespace {

using nlohmann::json;

// Statements prepared on every pooled connection: parsed and planned once per connection.
const std::vector<std::pair<std::string, std::string>>& PreparedStatements() {
  static const auto* statements = new std::vector<std::pair<std::string, std::string>>{
      {"get_object", std::string(queries::kSelectColumns) + queries::kGetObjectWhere},
      {"list_objects", queries::kListObjects},
      {"current_revision", queries::kCurrentRevision},
      {"changes_since", queries::kChangesSince},
      {"list_device_claims", queries::kListDeviceClaims},
      {"quota_used", queries::kQuotaUsed},
      {"write_batch", queries::kWriteBatch},
      {"insert_audit", queries::kInsertAudit},
      {"query_audit", queries::kQueryAudit},
      {"prune_audit", queries::kPruneAudit},
  };
  return *statements;
}

void PrepareStatements(pqxx::connection& c) {
  for (const auto& [name, sql] : PreparedStatements()) c.prepare(name, sql);
}

}  // namespace

namespace {

// A column's JSON text; one that does not parse throws json::parse_error, as json::parse does.
json ParseColumn(const std::string& text) {
  json value = model::json::Read(text);
  return value.is_discarded() ? json::parse(text) : value;
}

}  // namespace

void pg_internal::DecodeColumns(const std::string& labels, const std::string& meta_text,
                                const std::string& fields, model::Object* obj) {
  obj->meta.labels = ParseColumn(labels).get<std::map<std::string, std::string>>();
  obj->fields = ParseColumn(fields).get<std::map<std::string, std::string>>();
  json meta = ParseColumn(meta_text);
  if (meta.contains("annotations")) {
    obj->meta.annotations = meta["annotations"].get<std::map<std::string, std::string>>();
  }
  if (meta.contains("finalizers")) {
    obj->meta.finalizers = meta["finalizers"].get<std::vector<std::string>>();
  }
  if (meta.contains("generateName")) obj->meta.generate_name = meta["generateName"];
  if (meta.contains("ownerReferences")) obj->meta.owner_references = meta["ownerReferences"];
  if (meta.contains("deletionGracePeriodSeconds")) {
    obj->meta.deletion_grace_period_seconds = meta["deletionGracePeriodSeconds"].get<int64_t>();
  }
}

model::Object pg_internal::DecodeRow(const pqxx::row& r, int at) {
  model::Object obj;
  obj.resource = r[at].as<std::string>();
  obj.meta.namespace_ = r[at + 1].as<std::string>();
  obj.meta.name = r[at + 2].as<std::string>();
  obj.meta.uid = r[at + 3].as<std::string>();
  obj.meta.resource_version = r[at + 4].as<int64_t>();
  obj.meta.generation = r[at + 5].as<int64_t>();
  obj.meta.creation_timestamp = FromEpoch(r[at + 6].as<int64_t>());
  int64_t del = r[at + 7].as<int64_t>();
  if (del != 0) obj.meta.deletion_timestamp = FromEpoch(del);
  DecodeColumns(r[at + 8].as<std::string>(), r[at + 9].as<std::string>(),
                r[at + 10].as<std::string>(), &obj);
  obj.spec_digest = r[at + 11].as<std::string>();
  obj.body = r[at + 12].as<std::string>();
  return obj;
}

PgStore::PgStore(std::string url, std::unique_ptr<ConnectionPool> pool)
    : url_(std::move(url)), pool_(std::move(pool)) {
  writer_ = std::thread([this] { WriterLoop(); });
}

PgStore::~PgStore() {
  {
    qm::MutexLock lock(&queue_mu_);
    stopping_ = true;
  }
  queue_cv_.SignalAll();
  writer_.join();
}

absl::StatusOr<std::unique_ptr<PgStore>> PgStore::Open(const std::string& url, int pool_size) {
  auto store = std::unique_ptr<PgStore>(
      new PgStore(url, std::make_unique<ConnectionPool>(url, pool_size, PrepareStatements)));
  if (auto st = store->Ping(); !st.ok()) return st;
  return store;
}

absl::StatusOr<std::vector<DeviceClaim>> PgStore::ListDeviceClaims() {
  return WithConnection(
      *pool_, [&](pqxx::connection& c) -> absl::StatusOr<std::vector<DeviceClaim>> {
        pqxx::read_transaction tx(c);
        std::vector<DeviceClaim> out;
        for (const auto& row : tx.exec_prepared("list_device_claims")) {
          out.push_back(DeviceClaim{row[0].as<std::string>(), row[1].as<std::string>(),
                                    row[2].as<std::string>(), row[3].as<std::string>(),
                                    row[4].as<std::string>(), row[5].as<bool>(),
                                    row[6].as<std::string>()});
        }
        return out;
      });
}

absl::StatusOr<std::map<std::string, int64_t>> PgStore::QuotaUsed(const std::string& ns) {
  using Usage = std::map<std::string, int64_t>;
  return WithConnection(*pool_, [&](pqxx::connection& c) -> absl::StatusOr<Usage> {
    pqxx::nontransaction tx(c);  // one statement: no BEGIN/COMMIT round trips
    Usage out;
    for (const auto& row : tx.exec_prepared("quota_used", ns)) {
      out[row[0].as<std::string>()] = row[1].as<int64_t>();
    }
    return out;
  });
}

absl::StatusOr<model::Object> PgStore::Get(const model::ResourceKey& key) {
  return WithConnection(*pool_, [&](pqxx::connection& c) -> absl::StatusOr<model::Object> {
    pqxx::nontransaction tx(c);  // one statement: no BEGIN/COMMIT round trips
    auto r = tx.exec_prepared("get_object", key.resource, key.namespace_, key.name);
    if (r.empty()) return NotFoundError(key);
    return DecodeRow(r[0]);
  });
}

absl::StatusOr<ListResult> PgStore::List(const ListOptions& options) {
  return WithConnection(*pool_, [&](pqxx::connection& c) -> absl::StatusOr<ListResult> {
    // One statement (one round trip, one snapshot) for the items and the revision they reflect.
    pqxx::nontransaction tx(c);
    int64_t fetch = options.limit > 0 ? options.limit + 1 : std::numeric_limits<int64_t>::max();
    auto rows = tx.exec_prepared("list_objects", options.resource, options.namespace_,
                                 options.after_namespace, options.after_name, fetch);
    ListResult result;
    result.resource_version = rows.at(0)[0].as<int64_t>();
    result.items.reserve(rows.size());
    for (const auto& row : rows) {
      if (row[1].is_null()) continue;  // no match: the row carries only the revision
      result.items.push_back(model::Share(DecodeRow(row, 1)));
    }
    auto key = [](const model::ObjectPtr& o) { return std::tie(o->meta.namespace_, o->meta.name); };
    if (!std::is_sorted(result.items.begin(), result.items.end(),
                        [&](const auto& a, const auto& b) { return key(a) < key(b); })) {
      std::sort(result.items.begin(), result.items.end(),
                [&](const auto& a, const auto& b) { return key(a) < key(b); });
    }
    if (options.limit > 0 && static_cast<int64_t>(result.items.size()) > options.limit) {
      result.more = true;
      result.items.resize(options.limit);
    }
    return result;
  });
}

absl::StatusOr<ListResult> PgStore::ListAll() {
  return WithConnection(*pool_, [&](pqxx::connection& c) -> absl::StatusOr<ListResult> {
    pqxx::transaction<pqxx::repeatable_read, pqxx::readwrite_policy::read_only> tx(c);
    ListResult result;
    result.resource_version = tx.exec_prepared1("current_revision")[0].as<int64_t>();
    auto rows = tx.exec(std::string(queries::kSelectColumns) + queries::kListAllOrder);
    result.items.reserve(rows.size());
    for (const auto& row : rows) result.items.push_back(model::Share(DecodeRow(row)));
    return result;
  });
}

absl::StatusOr<int64_t> PgStore::CurrentRevision() {
  return WithConnection(*pool_, [&](pqxx::connection& c) -> absl::StatusOr<int64_t> {
    pqxx::nontransaction tx(c);  // one statement: no BEGIN/COMMIT round trips
    return tx.exec_prepared1("current_revision")[0].as<int64_t>();
  });
}

absl::Status PgStore::Compact(int64_t through_rv) {
  auto r = WithConnection(*pool_, [&](pqxx::connection& c) -> absl::StatusOr<bool> {
    pqxx::work tx(c);
    tx.exec(queries::kLockWrites);
    tx.exec_params0(queries::kCompactDelete, through_rv);
    tx.exec_params0(queries::kCompactRecord, through_rv);
    tx.commit();
    return true;
  });
  return r.status();
}

absl::Status PgStore::Ping() {
  auto r = WithConnection(*pool_, [&](pqxx::connection& c) -> absl::StatusOr<bool> {
    pqxx::nontransaction tx(c);
    tx.exec1(queries::kPing);
    return true;
  });
  return r.status();
}

absl::Status Migrate(const std::string& url) {
  try {
    pqxx::connection c(url);
    pqxx::work tx(c);
    tx.exec(queries::kLockMigrations);
    tx.exec0(queries::kCreateMigrationsTable);
    std::set<std::string> applied;
    for (const auto& row : tx.exec(queries::kAppliedMigrations)) {
      applied.insert(row[0].as<std::string>());
    }
    for (const auto& [name, sql] : EmbeddedMigrations()) {
      if (applied.count(name)) continue;
      tx.exec(sql);
      tx.exec_params0(queries::kRecordMigration, name);
    }
    tx.commit();
    return absl::OkStatus();
  } catch (const pqxx::broken_connection& e) {
    return absl::UnavailableError(std::string("cannot connect to PostgreSQL: ") + e.what());
  } catch (const std::exception& e) {
    return absl::InternalError(std::string("migration failed: ") + e.what());
  }
}

}  // namespace qm::store::pg
