#include "store/pg/pg_store.h"

#include <algorithm>
#include <charconv>
#include <tuple>

#include <future>
#include <limits>
#include <set>
#include <sstream>
#include <thread>

#include <pqxx/pqxx>

#include <nlohmann/json.hpp>

#include "absl/cleanup/cleanup.h"
#include "spdlog/spdlog.h"
#include "store/pg/migrations.h"
#include "store/pg/queries.h"
#include "store/pg/text.h"
#include "store/pg/with_connection.h"

namespace qm::store::pg {
namespace {

using nlohmann::json;
using Clock = std::chrono::system_clock;

int64_t ToEpoch(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

Clock::time_point FromEpoch(int64_t s) { return Clock::time_point(std::chrono::seconds(s)); }

// Columns that are JSON in the database, built from the typed metadata.
struct JsonColumns {
  std::string labels;
  std::string meta;
  std::string fields;
};

JsonColumns EncodeColumns(const model::Object& obj) {
  json meta = json::object();
  if (!obj.meta.annotations.empty()) meta["annotations"] = obj.meta.annotations;
  if (!obj.meta.finalizers.empty()) meta["finalizers"] = obj.meta.finalizers;
  if (!obj.meta.generate_name.empty()) meta["generateName"] = obj.meta.generate_name;
  if (!obj.meta.owner_references.empty()) meta["ownerReferences"] = obj.meta.owner_references;
  if (obj.meta.deletion_grace_period_seconds.has_value()) {
    meta["deletionGracePeriodSeconds"] = *obj.meta.deletion_grace_period_seconds;
  }
  return JsonColumns{json(obj.meta.labels).dump(), meta.dump(), json(obj.fields).dump()};
}

void DecodeColumns(const std::string& labels, const std::string& meta_text,
                   const std::string& fields, model::Object* obj) {
  obj->meta.labels = json::parse(labels).get<std::map<std::string, std::string>>();
  obj->fields = json::parse(fields).get<std::map<std::string, std::string>>();
  json meta = json::parse(meta_text);
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

// The object in the 13 columns of kSelectColumns, starting at column `at`.
model::Object DecodeRow(const pqxx::row& r, int at = 0) {
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

// A quantity as an exact decimal number of units ("21474836480", "0.5", "-1.25"), as numeric
// columns take it.
std::string Decimal(const Quantity& q) {
  // Parsed quantities stay far from the int128 limits (Quantity::MaxMagnitudeNanos).
  const absl::int128 magnitude = q.nanos() < 0 ? -q.nanos() : q.nanos();
  std::ostringstream units;
  units << (q.nanos() < 0 ? "-" : "") << magnitude / Quantity::kNanosPerUnit;
  std::string out = units.str();
  const uint64_t fraction = absl::Int128Low64(magnitude % Quantity::kNanosPerUnit);
  if (fraction != 0) {
    std::string digits = std::to_string(fraction);
    digits.insert(0, 9 - digits.size(), '0');
    digits.erase(digits.find_last_not_of('0') + 1);
    out += "." + digits;
  }
  return out;
}

// What a ledger row takes, as qm_insert_device_claim reads it (migrations/0005):
// {"capacity": [[capacity, amount, limit], ...], "counters": [[set, counter, amount, limit]]}.
std::string ChargesJson(const DeviceClaim& row) {
  json capacity = json::array();
  json counters = json::array();
  for (const DeviceCharge& c : row.charges) {
    if (c.kind == DeviceCharge::Kind::kCapacity) {
      capacity.push_back({c.name, Decimal(c.amount), Decimal(c.limit)});
    } else {
      counters.push_back({c.owner, c.name, Decimal(c.amount), Decimal(c.limit)});
    }
  }
  return json{{"capacity", std::move(capacity)}, {"counters", std::move(counters)}}.dump();
}

}  // namespace

// One queued write and the caller waiting for its outcome.
struct PendingWrite {
  WriteKind kind;
  model::Object obj;        // kCreate, kUpdate
  model::ResourceKey key;   // kDelete
  int64_t expected_rv = 0;  // kUpdate, kDelete
  std::promise<absl::StatusOr<model::Object>> done;
  const Transaction* txn = nullptr;        // kTransaction
  std::vector<model::Object> txn_results;  // kTransaction, on success
  // CommitAsync: the queue owns this write (and the transaction it points to) and fulfils
  // `async` instead of `done`.
  Transaction owned_txn;
  std::unique_ptr<std::promise<absl::StatusOr<std::vector<model::Object>>>> async;
  // The audit record committed with this write when it succeeds (AuditScope at submission).
  std::optional<AuditRecord> audit;

  // Hands the outcome to the caller.
  void Finish(absl::StatusOr<model::Object> result) {
    if (async == nullptr) {
      done.set_value(std::move(result));
      return;
    }
    if (result.ok()) {
      async->set_value(std::move(txn_results));
    } else {
      async->set_value(result.status());
    }
  }
};

namespace {

// Finishes a dequeued write; an asynchronous one, which nobody waits on, is freed here.
void Complete(PendingWrite* w, absl::StatusOr<model::Object> result) {
  std::unique_ptr<PendingWrite> owned(w->async != nullptr ? w : nullptr);
  w->Finish(std::move(result));
}

}  // namespace

namespace {

// A whole batch applied by one call to qm_write_batch (migrations/0011): every queued write is a
// group (a single create, update or delete, or a transaction) that commits or fails on its own,
// with its audit records.
class BatchCall {
 public:
  void Add(PendingWrite* w) {
    items_.push_back(w);
    const int group = static_cast<int>(items_.size());
    if (w->audit.has_value()) AddAudit(group, *w->audit);
    if (w->kind != WriteKind::kTransaction) {
      AddWrite(group, w->kind, w->kind == WriteKind::kDelete ? nullptr : &w->obj, w->key,
               w->expected_rv);
      return;
    }
    for (const Write& write : w->txn->writes) {
      const WriteKind kind = write.kind == Write::Kind::kCreate   ? WriteKind::kCreate
                             : write.kind == Write::Kind::kUpdate ? WriteKind::kUpdate
                                                                  : WriteKind::kDelete;
      AddWrite(group, kind, kind == WriteKind::kDelete ? nullptr : &write.object, write.key,
               write.expected_rv);
    }
    for (const DeviceClaim& row : w->txn->claim_devices) {
      d_[0].push_back(std::to_string(group));
      d_[1].push_back(row.driver);
      d_[2].push_back(row.pool);
      d_[3].push_back(row.device);
      d_[4].push_back(row.share_id);
      d_[5].push_back(row.claim_uid);
      d_[6].push_back(row.admin_access ? "t" : "f");
      d_[7].push_back(row.consumed_capacity.empty() ? "{}" : row.consumed_capacity);
      d_[8].push_back(ChargesJson(row));
    }
    for (const std::string& uid : w->txn->release_claims) {
      r_[0].push_back(std::to_string(group));
      r_[1].push_back(uid);
    }
    for (const QuotaCheck& check : w->txn->quota_checks) {
      q_[0].push_back(std::to_string(group));
      q_[1].push_back(check.namespace_);
      q_[2].push_back(check.key);
      q_[3].push_back(std::to_string(check.hard));
    }
    for (const QuotaSetCheck& check : w->txn->quota_sets) {
      s_[0].push_back(std::to_string(group));
      s_[1].push_back(check.namespace_);
      s_[2].push_back(std::to_string(check.count));
      s_[3].push_back(std::to_string(check.newest));
    }
    for (const AuditRecord& record : w->txn->audit) AddAudit(group, record);
  }

  // Runs the call; one result per added write, in order.
  std::vector<absl::StatusOr<model::Object>> Run(pqxx::work& tx) {
    auto rows = tx.exec_prepared(
        "write_batch", static_cast<int>(items_.size()), TextArray(w_[0]), TextArray(w_[1]),
        TextArray(w_[2]), TextArray(w_[3]), TextArray(w_[4]), TextArray(w_[5]), TextArray(w_[6]),
        TextArray(w_[7]), TextArray(w_[8]), TextArray(w_[9]), TextArray(w_[10]), TextArray(w_[11]),
        TextArray(w_[12]), TextArray(w_[13]), TextArray(w_[14]), TextArray(d_[0]), TextArray(d_[1]),
        TextArray(d_[2]), TextArray(d_[3]), TextArray(d_[4]), TextArray(d_[5]), TextArray(d_[6]),
        TextArray(d_[7]), TextArray(d_[8]), TextArray(r_[0]), TextArray(r_[1]), TextArray(q_[0]),
        TextArray(q_[1]), TextArray(q_[2]), TextArray(q_[3]), TextArray(s_[0]), TextArray(s_[1]),
        TextArray(s_[2]), TextArray(s_[3]), TextArray(a_[0]), TextArray(a_[1]), TextArray(a_[2]),
        TextArray(a_[3]), TextArray(a_[4]), TextArray(a_[5]), TextArray(a_[6]), TextArray(a_[7]),
        TextArray(a_[8]), TextArray(a_[9]), TextArray(a_[10]), TextArray(a_[11]), TextArray(a_[12]),
        TextArray(a_[13]));
    std::vector<std::vector<const pqxx::row*>> written(items_.size());
    std::vector<std::optional<absl::Status>> failures(items_.size());
    std::vector<pqxx::row> kept(rows.begin(), rows.end());
    for (const pqxx::row& row : kept) {
      const size_t group = row[0].as<size_t>() - 1;
      const size_t ord = row[1].as<size_t>() - 1;
      if (row[3].is_null()) {
        written.at(group).push_back(&row);
      } else {
        failures.at(group) = Failure(*items_.at(group), ord, row[3].as<std::string>());
      }
    }
    std::vector<absl::StatusOr<model::Object>> results;
    for (size_t g = 0; g < items_.size(); ++g) {
      PendingWrite& w = *items_[g];
      if (failures[g].has_value()) {
        w.txn_results.clear();
        results.push_back(*failures[g]);
        continue;
      }
      if (w.kind != WriteKind::kTransaction) {
        if (written[g].size() != 1) {
          results.push_back(absl::InternalError("qm_write_batch lost a write"));
          continue;
        }
        results.push_back(
            Stored(w.kind == WriteKind::kDelete ? nullptr : &w.obj, w.key, *written[g][0]));
        continue;
      }
      if (written[g].size() != w.txn->writes.size()) {
        results.push_back(absl::InternalError("qm_write_batch lost a write"));
        continue;
      }
      w.txn_results.clear();
      for (size_t n = 0; n < written[g].size(); ++n) {
        const Write& write = w.txn->writes[n];
        w.txn_results.push_back(Stored(write.kind == Write::Kind::kDelete ? nullptr : &write.object,
                                       write.key, *written[g][n]));
      }
      results.push_back(w.txn_results.empty() ? model::Object() : w.txn_results.back());
    }
    return results;
  }

 private:
  // One object write; `obj` is null for a delete of `key`.
  void AddWrite(int group, WriteKind kind, const model::Object* obj, const model::ResourceKey& key,
                int64_t expected_rv) {
    w_[0].push_back(std::to_string(group));
    w_[1].push_back(kind == WriteKind::kCreate ? "c" : kind == WriteKind::kUpdate ? "u" : "d");
    if (obj == nullptr) {
      w_[2].push_back(key.resource);
      w_[3].push_back(key.namespace_);
      w_[4].push_back(key.name);
      for (int c = 5; c <= 13; ++c) w_[c].emplace_back(c >= 6 && c <= 8 ? "0" : "");
      w_[14].push_back(std::to_string(expected_rv));
      return;
    }
    JsonColumns cols = EncodeColumns(*obj);
    w_[2].push_back(obj->resource);
    w_[3].push_back(obj->meta.namespace_);
    w_[4].push_back(obj->meta.name);
    w_[5].push_back(obj->meta.uid);
    w_[6].push_back(std::to_string(obj->meta.generation));
    w_[7].push_back(std::to_string(ToEpoch(obj->meta.creation_timestamp)));
    w_[8].push_back(
        std::to_string(obj->meta.deletion_timestamp ? ToEpoch(*obj->meta.deletion_timestamp) : 0));
    w_[9].push_back(std::move(cols.labels));
    w_[10].push_back(std::move(cols.meta));
    w_[11].push_back(std::move(cols.fields));
    w_[12].push_back(obj->spec_digest);
    w_[13].push_back(obj->body);
    w_[14].push_back(std::to_string(kind == WriteKind::kCreate ? 0 : expected_rv));
  }

  void AddAudit(int group, const AuditRecord& r) {
    a_[0].push_back(std::to_string(group));
    a_[1].push_back(std::to_string(Micros(r.time)));
    a_[2].push_back(r.request_id);
    a_[3].push_back(r.user);
    a_[4].push_back(json(r.groups).dump());
    a_[5].push_back(r.verb);
    a_[6].push_back(r.api_group);
    a_[7].push_back(r.resource);
    a_[8].push_back(r.subresource);
    a_[9].push_back(r.namespace_);
    a_[10].push_back(r.name);
    a_[11].push_back(std::to_string(r.code));
    a_[12].push_back(r.source);
    a_[13].push_back(r.user_agent);
  }

  // What a write stored: the written object at its new revision, or for a delete (`obj` null)
  // the object's last state as the row returns it.
  static model::Object Stored(const model::Object* obj, const model::ResourceKey& key,
                              const pqxx::row& row) {
    model::Object stored;
    if (obj != nullptr) {
      stored = *obj;
    } else {
      stored.resource = key.resource;
      stored.meta.namespace_ = key.namespace_;
      stored.meta.name = key.name;
      stored.meta.uid = row[4].as<std::string>();
      stored.meta.generation = row[5].as<int64_t>();
      stored.meta.creation_timestamp = FromEpoch(row[6].as<int64_t>());
      if (const int64_t del = row[7].as<int64_t>(); del != 0) {
        stored.meta.deletion_timestamp = FromEpoch(del);
      }
      DecodeColumns(row[8].as<std::string>(), row[9].as<std::string>(), row[10].as<std::string>(),
                    &stored);
      stored.spec_digest = row[11].as<std::string>();
      stored.body = row[12].as<std::string>();
    }
    stored.meta.resource_version = row[2].as<int64_t>();
    return stored;
  }

  // The error a failed group reports.
  static absl::Status Failure(const PendingWrite& w, size_t ord, const std::string& code) {
    if (code == "taken") return DeviceTakenError(w.txn->claim_devices.at(ord));
    if (code == "overcommit") return DeviceOvercommittedError(w.txn->claim_devices.at(ord));
    if (code == "quota") return QuotaCheckError(w.txn->quota_checks.at(ord));
    if (code == "quotas") return QuotaSetChangedError(w.txn->quota_sets.at(ord));
    model::ResourceKey key;
    if (w.kind != WriteKind::kTransaction) {
      key = w.kind == WriteKind::kDelete ? w.key : w.obj.Key();
    } else {
      const Write& write = w.txn->writes.at(ord);
      key = write.kind == Write::Kind::kDelete ? write.key : write.object.Key();
    }
    if (code == "exists") {
      return absl::AlreadyExistsError(key.resource + " \"" + key.name + "\" already exists");
    }
    return code == "missing" ? NotFoundError(key) : ConflictError(key);
  }

  std::vector<PendingWrite*> items_;
  std::vector<std::string> w_[15];
  std::vector<std::string> d_[9];
  std::vector<std::string> r_[2];
  std::vector<std::string> q_[4];
  std::vector<std::string> s_[4];
  std::vector<std::string> a_[14];
};

// Statements prepared on every pooled connection: parsed and planned once per connection.
const std::vector<std::pair<std::string, std::string>>& PreparedStatements() {
  static const auto* statements = new std::vector<std::pair<std::string, std::string>>{
      {"get_object", std::string(queries::kSelectColumns) + queries::kGetObjectWhere},
      {"list_objects", queries::kListObjects},
      {"current_revision", queries::kCurrentRevision},
      {"changes_since", queries::kChangesSince},
      {"list_device_claims", queries::kListDeviceClaims},
      {"quota_used", queries::kQuotaUsed},
      {"begin_writes", queries::kBeginWrites},
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

struct PgStore::Listener {
  Listener(const std::string& url, std::atomic<int64_t>* notified)
      : conn(url), receiver(conn, notified) {}

  // Each batch NOTIFYs with its newest revision (migrations/0011, 0013), which has a row.
  struct Receiver final : pqxx::notification_receiver {
    Receiver(pqxx::connection& c, std::atomic<int64_t>* notified)
        : pqxx::notification_receiver(c, "qm_changes"), notified_(notified) {}
    void operator()(const std::string& payload, int) override {
      int64_t rv = 0;
      const auto [end, ec] = std::from_chars(payload.data(), payload.data() + payload.size(), rv);
      if (ec != std::errc() || end != payload.data() + payload.size()) return;  // not ours
      int64_t seen = notified_->load();
      while (rv > seen && !notified_->compare_exchange_weak(seen, rv)) {
      }
    }
    std::atomic<int64_t>* notified_;
  };
  pqxx::connection conn;
  Receiver receiver;
};

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

bool PgStore::Enqueue(PendingWrite* w) {
  {
    qm::MutexLock lock(&queue_mu_);
    if (stopping_) return false;
    queue_.push_back(w);
  }
  queue_cv_.Signal();
  return true;
}

absl::StatusOr<model::Object> PgStore::Submit(WriteKind kind, model::Object obj,
                                              model::ResourceKey key, int64_t expected_rv) {
  PendingWrite w;
  w.kind = kind;
  w.obj = std::move(obj);
  w.key = std::move(key);
  w.expected_rv = expected_rv;
  if (const AuditRecord* audit = AuditScope::Current()) {
    w.audit = *audit;
    const model::ResourceKey& k = kind == WriteKind::kDelete ? w.key : w.obj.Key();
    if (w.audit->name.empty()) {
      w.audit->name = k.name;
      w.audit->namespace_ = k.namespace_;
    }
  }
  auto result = w.done.get_future();
  if (!Enqueue(&w)) return absl::UnavailableError("store is shutting down");
  return result.get();
}

absl::StatusOr<model::Object> PgStore::Create(const model::Object& obj) {
  return Submit(WriteKind::kCreate, obj, {}, 0);
}

absl::StatusOr<model::Object> PgStore::Update(const model::Object& obj, int64_t expected_rv) {
  return Submit(WriteKind::kUpdate, obj, {}, expected_rv);
}

absl::StatusOr<model::Object> PgStore::Delete(const model::ResourceKey& key, int64_t expected_rv) {
  return Submit(WriteKind::kDelete, {}, key, expected_rv);
}

// Group commit: every write waiting when the writer wakes goes into one transaction and one
// fsync. Revisions follow queue order. If the batch fails as a whole, each write is retried in
// a transaction of its own so one bad write cannot fail its neighbours.
void PgStore::WriterLoop() {
  while (true) {
    std::vector<PendingWrite*> batch;
    {
      qm::MutexLock lock(&queue_mu_);
      while (!stopping_ && queue_.empty()) queue_cv_.Wait(&queue_mu_);
      if (queue_.empty()) return;
      while (!queue_.empty() && batch.size() < kMaxBatch) {
        batch.push_back(queue_.front());
        queue_.pop_front();
      }
    }
    size_t completed = 0;
    try {
      WriteBatch(batch, completed);
    } catch (...) {
      // The last resort of the writer thread: an exception must neither end the process nor
      // leave writers waiting forever. Whether the transaction committed is not known, so the
      // writes not answered yet fail as for a broken connection, and are not run again.
      writer_errors_.fetch_add(1);
      std::string what = "an exception of unknown type";
      try {
        throw;
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      spdlog::error("store writer: a batch of {} writes failed: {}", batch.size(), what);
      for (size_t i = completed; i < batch.size(); ++i) {
        try {
          Complete(batch[i], absl::UnavailableError(
                                 "commit outcome unknown: the store writer failed; see the "
                                 "server log"));
        } catch (...) {
        }
      }
    }
  }
}

void PgStore::WriteBatch(const std::vector<PendingWrite*>& batch, size_t& completed) {
  auto results = RunBatch(batch);
  // An SQL error fails the whole transaction: retry the writes one by one so only the bad one
  // fails. Not when the connection broke (Unavailable): the commit may even have happened,
  // and running the writes again could apply them twice.
  if (!results.ok() && batch.size() > 1 && !absl::IsUnavailable(results.status())) {
    for (PendingWrite* w : batch) {
      auto single = RunBatch({w});
      Complete(w, single.ok() ? std::move(single->front()) : single.status());
      ++completed;
    }
    return;
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    Complete(batch[i], results.ok() ? std::move((*results)[i]) : results.status());
    ++completed;
  }
}

absl::StatusOr<std::vector<absl::StatusOr<model::Object>>> PgStore::RunBatch(
    const std::vector<PendingWrite*>& batch) {
  using Results = std::vector<absl::StatusOr<model::Object>>;
  return WithConnection(*pool_, [&](pqxx::connection& c) -> absl::StatusOr<Results> {
    pqxx::work tx(c);  // read committed: qm_begin_writes reads the log after taking the lock
    const int64_t before = tx.exec_prepared1("begin_writes")[0].as<int64_t>();
    BatchCall call;
    for (PendingWrite* w : batch) call.Add(w);
    Results results = call.Run(tx);
    int64_t newest = 0;
    for (const auto& r : results) {
      if (r.ok()) newest = std::max(newest, r->meta.resource_version);
    }
    {
      qm::MutexLock lock(&own_mu_);
      committing_ = true;  // its notification may come before RememberOwnChanges is done
    }
    absl::Cleanup committed = [this] {
      qm::MutexLock lock(&own_mu_);
      committing_ = false;
      own_cv_.SignalAll();
    };
    tx.commit();
    if (newest > committed_rv_.load()) committed_rv_.store(newest);  // only this thread writes
    RememberOwnChanges(batch, results, before);
    return results;
  });
}

absl::StatusOr<std::vector<model::Object>> PgStore::Commit(const Transaction& txn) {
  PendingWrite w;
  w.kind = WriteKind::kTransaction;
  w.txn = &txn;
  auto result = w.done.get_future();
  if (!Enqueue(&w)) return absl::UnavailableError("store is shutting down");
  auto last = result.get();
  if (!last.ok()) return last.status();
  return std::move(w.txn_results);
}

std::future<absl::StatusOr<std::vector<model::Object>>> PgStore::CommitAsync(Transaction txn) {
  auto w = std::make_unique<PendingWrite>();
  w->kind = WriteKind::kTransaction;
  w->owned_txn = std::move(txn);
  w->txn = &w->owned_txn;
  w->async = std::make_unique<std::promise<absl::StatusOr<std::vector<model::Object>>>>();
  auto result = w->async->get_future();
  if (Enqueue(w.get())) {
    w.release();  // the writer finishes and deletes it
  } else {
    w->async->set_value(absl::UnavailableError("store is shutting down"));
  }
  return result;
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
      if (!row[1].is_null()) result.items.push_back(DecodeRow(row, 1));  // NULL: no match
    }
    auto key = [](const model::Object& o) { return std::tie(o.meta.namespace_, o.meta.name); };
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
    for (const auto& row : rows) result.items.push_back(DecodeRow(row));
    return result;
  });
}

absl::StatusOr<int64_t> PgStore::CurrentRevision() {
  return WithConnection(*pool_, [&](pqxx::connection& c) -> absl::StatusOr<int64_t> {
    pqxx::nontransaction tx(c);  // one statement: no BEGIN/COMMIT round trips
    return tx.exec_prepared1("current_revision")[0].as<int64_t>();
  });
}

void PgStore::RememberOwnChanges(const std::vector<PendingWrite*>& batch,
                                 const std::vector<absl::StatusOr<model::Object>>& results,
                                 int64_t before) {
  auto type_of = [](bool create, bool remove) {
    return create   ? model::EventType::kAdded
           : remove ? model::EventType::kDeleted
                    : model::EventType::kModified;
  };
  // The object as its change_log row holds it: timestamps in whole seconds.
  auto as_logged = [](model::Object obj) {
    auto& meta = obj.meta;
    meta.creation_timestamp =
        std::chrono::time_point_cast<std::chrono::seconds>(meta.creation_timestamp);
    if (meta.deletion_timestamp.has_value()) {
      meta.deletion_timestamp =
          std::chrono::time_point_cast<std::chrono::seconds>(*meta.deletion_timestamp);
    }
    return obj;
  };
  std::vector<model::WatchEvent> changes;
  bool complete = results.size() == batch.size();  // every change the batch logged is in changes
  for (size_t i = 0; i < batch.size() && i < results.size(); ++i) {
    if (!results[i].ok()) continue;
    const PendingWrite& w = *batch[i];
    if (w.kind != WriteKind::kTransaction) {
      changes.push_back({type_of(w.kind == WriteKind::kCreate, w.kind == WriteKind::kDelete),
                         as_logged(*results[i]), nullptr});
      continue;
    }
    if (w.txn_results.size() != w.txn->writes.size()) {
      complete = false;
      continue;
    }
    for (size_t n = 0; n < w.txn_results.size(); ++n) {
      const Write::Kind kind = w.txn->writes[n].kind;
      changes.push_back({type_of(kind == Write::Kind::kCreate, kind == Write::Kind::kDelete),
                         as_logged(w.txn_results[n]), nullptr});
    }
  }
  int64_t newest = 0;
  qm::MutexLock lock(&own_mu_);
  for (auto& ev : changes) {
    const int64_t rv = ev.object.meta.resource_version;
    complete &= rv > before;
    newest = std::max(newest, rv);
    if (rv > 0) own_changes_.insert_or_assign(rv, std::move(ev));
    own_newest_ = std::max(own_newest_, rv);
  }
  // The change log holds nothing in (before, newest] but this batch's changes: the batch drew
  // its revisions under the write lock it took at `before`, and one drawn for a write that
  // failed has no row.
  if (complete && newest > before) own_spans_.insert_or_assign(before, newest);
  while (own_changes_.size() > kMaxOwnChanges) own_changes_.erase(own_changes_.begin());
  // A span whose changes are not all kept any more cannot be answered from memory.
  const int64_t oldest = own_changes_.empty() ? newest + 1 : own_changes_.begin()->first;
  while (!own_spans_.empty() && own_spans_.begin()->first + 1 < oldest) {
    own_spans_.erase(own_spans_.begin());
  }
}

std::optional<std::vector<model::WatchEvent>> PgStore::OwnChangesSince(int64_t after_rv,
                                                                       int64_t max_rows) {
  qm::MutexLock lock(&own_mu_);
  // A notification can overtake the writer's own bookkeeping: while it commits, a newer
  // revision than it has kept may be its own. A short wait spares reading the log for it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
  while (committing_ && notified_rv_.load() > own_newest_ &&
         own_cv_.WaitUntil(&own_mu_, deadline)) {
  }
  own_changes_.erase(own_changes_.begin(), own_changes_.upper_bound(after_rv));
  own_spans_.erase(own_spans_.begin(), own_spans_.lower_bound(after_rv));
  std::vector<model::WatchEvent> out;
  int64_t from = after_rv;
  for (auto span = own_spans_.find(from); span != own_spans_.end() && span->first == from;
       span = own_spans_.find(from)) {
    const auto first = own_changes_.upper_bound(span->first);
    const auto last = own_changes_.upper_bound(span->second);
    if (static_cast<int64_t>(out.size() + std::distance(first, last)) > max_rows) break;
    // The follower reads on from here, so the changes are handed over (moved, not copied); a
    // reader that asks for them again reads them from the log.
    for (auto it = first; it != last; ++it) out.push_back(std::move(it->second));
    own_changes_.erase(first, last);
    from = span->second;
  }
  own_spans_.erase(own_spans_.begin(), own_spans_.lower_bound(from));
  if (out.empty()) return std::nullopt;
  return out;
}

absl::StatusOr<std::vector<model::WatchEvent>> PgStore::FollowChanges(int64_t after_rv,
                                                                      int64_t limit) {
  // The changes right after `after_rv` are this process's last batches: no need to ask. Those
  // of other replicas after them are left to the next call; their notifications (or this
  // process's own later changes) end the caller's next WaitForChanges at once.
  const int64_t max_rows = limit > 0 ? limit : std::numeric_limits<int64_t>::max();
  if (auto own = OwnChangesSince(after_rv, max_rows); own.has_value()) return *std::move(own);
  return ChangesSince(after_rv, limit);
}

absl::StatusOr<std::vector<model::WatchEvent>> PgStore::ChangesSince(int64_t after_rv,
                                                                     int64_t limit) {
  using Result = absl::StatusOr<std::vector<model::WatchEvent>>;
  const int64_t max_rows = limit > 0 ? limit : std::numeric_limits<int64_t>::max();
  // This process's own changes after `after_rv` (copies: the writer may add more meanwhile);
  // those a reader has read past are dropped.
  std::map<int64_t, model::WatchEvent> own;
  {
    qm::MutexLock lock(&own_mu_);
    own_changes_.erase(own_changes_.begin(), own_changes_.upper_bound(after_rv));
    for (auto it = own_changes_.begin();
         it != own_changes_.end() && static_cast<int64_t>(own.size()) < max_rows; ++it) {
      own.emplace_hint(own.end(), it->first, it->second);
    }
  }
  std::string known = "{";
  for (const auto& [rv, ev] : own) {
    if (known.size() > 1) known += ',';
    known += std::to_string(rv);
  }
  known += '}';
  log_reads_.fetch_add(1);
  return WithConnection(*pool_, [&](pqxx::connection& c) -> Result {
    // One statement (one round trip, one snapshot) for the compaction point and the changes.
    pqxx::nontransaction tx(c);
    auto rows = tx.exec_prepared("changes_since", after_rv, max_rows, known);
    const int64_t compacted = rows.at(0)[0].as<int64_t>();
    if (after_rv < compacted) {
      return absl::OutOfRangeError("too old resource version: " + std::to_string(after_rv) + " (" +
                                   std::to_string(compacted + 1) + ")");
    }
    std::vector<model::WatchEvent> out;
    out.reserve(rows.size());
    for (const auto& row : rows) {
      if (row[1].is_null()) continue;  // no change after after_rv
      if (row[13].is_null()) {
        // One of this process's changes: its columns were left out.
        auto it = own.find(row[5].as<int64_t>());
        if (it == own.end())
          return absl::InternalError("change_log left out a change it must send");
        out.push_back(it->second);
        continue;
      }
      std::string type = row[14].as<std::string>();
      model::WatchEvent ev;
      ev.type = type == "ADDED"     ? model::EventType::kAdded
                : type == "DELETED" ? model::EventType::kDeleted
                                    : model::EventType::kModified;
      ev.object = DecodeRow(row, 1);
      out.push_back(std::move(ev));
    }
    auto by_rv = [](const model::WatchEvent& a, const model::WatchEvent& b) {
      return a.object.meta.resource_version < b.object.meta.resource_version;
    };
    if (!std::is_sorted(out.begin(), out.end(), by_rv)) std::sort(out.begin(), out.end(), by_rv);
    return out;
  });
}

void PgStore::WaitForChanges(int64_t after_rv, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  qm::MutexLock lock(&listen_mu_);
  // A change is known to exist when this process committed it or a notification named it (a
  // batch's newest revision, which has a row). The same notification ends no second wait from
  // the same revision: the caller read and found nothing (the database was replaced, say), and
  // returning at once again would spin.
  auto known = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(listen_mu_) {
    const int64_t notified = notified_rv_.load();
    if (notified > after_rv && std::make_pair(after_rv, notified) != answered_) {
      answered_ = {after_rv, notified};
      return true;
    }
    qm::MutexLock own(&own_mu_);
    return own_newest_ > after_rv;
  };
  try {
    if (listener_ == nullptr) {
      listener_ = std::make_unique<Listener>(url_, &notified_rv_);
      // Anything committed before LISTEN took effect is found by the caller's next read.
      return;
    }
    // Notifications of changes the caller has read already (its own batches, which it may
    // have taken from memory before their notification came) do not end the wait.
    listener_->conn.get_notifs();
    while (!known()) {
      const auto left = std::chrono::duration_cast<std::chrono::microseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return;
      listener_->conn.await_notification(left.count() / 1000000, left.count() % 1000000);
    }
  } catch (const std::exception&) {
    // Connection trouble: drop the listener and let the caller poll; it reconnects next time.
    listener_.reset();
    std::this_thread::sleep_for(std::min(timeout, std::chrono::milliseconds(200)));
  }
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
