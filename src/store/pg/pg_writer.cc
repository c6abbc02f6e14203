// PgStore's writes: the queue, the writer thread and its group commits, each batch one call of
// qm_write_batch (pg_store.h).

#include "store/pg/pg_store.h"

#include <algorithm>
#include <future>
#include <sstream>
#include <tuple>

#include <pqxx/pqxx>

#include <nlohmann/json.hpp>

#include "absl/cleanup/cleanup.h"
#include "model/json/write.h"
#include "spdlog/spdlog.h"
#include "store/pg/pg_store_internal.h"
#include "store/pg/queries.h"
#include "store/pg/text.h"
#include "store/pg/with_connection.h"

namespace qm::store::pg {

using namespace pg_internal;  // NOLINT(google-build-using-namespace)

namespace {

using nlohmann::json;

int64_t ToEpoch(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

// Columns that are JSON in the database, built from the typed metadata.
struct JsonColumns {
  std::string labels;
  std::string meta;
  std::string fields;
};

JsonColumns EncodeColumns(const model::Object& obj) {
  // The meta column: an object of the fields set, keys in order (as a json object writes them),
  // its values written by the codec without building the object.
  std::string meta = "{";
  auto key = [&](const char* name) {
    if (meta.size() > 1) meta += ',';
    model::json::AppendJsonString(name, &meta);
    meta += ':';
  };
  if (!obj.meta.annotations.empty()) {
    key("annotations");
    meta += model::json::WriteStringMap(obj.meta.annotations);
  }
  if (obj.meta.deletion_grace_period_seconds.has_value()) {
    key("deletionGracePeriodSeconds");
    meta += std::to_string(*obj.meta.deletion_grace_period_seconds);
  }
  if (!obj.meta.finalizers.empty()) {
    key("finalizers");
    meta += model::json::WriteStringList(obj.meta.finalizers);
  }
  if (!obj.meta.generate_name.empty()) {
    key("generateName");
    model::json::AppendJsonString(obj.meta.generate_name, &meta);
  }
  if (!obj.meta.owner_references.empty()) {
    key("ownerReferences");
    model::json::AppendJsonString(obj.meta.owner_references, &meta);
  }
  meta += '}';
  return JsonColumns{model::json::WriteStringMap(obj.meta.labels), std::move(meta),
                     model::json::WriteStringMap(obj.fields)};
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
  return model::json::Write(
      json{{"capacity", std::move(capacity)}, {"counters", std::move(counters)}});
}

// Finishes a dequeued write; an asynchronous one, which nobody waits on, is freed here.
void Complete(PendingWrite* w, absl::StatusOr<model::Object> result) {
  std::unique_ptr<PendingWrite> owned(w->async != nullptr ? w : nullptr);
  w->Finish(std::move(result));
}

// A text[] parameter sent in binary.
pqxx::binarystring Bin(const std::vector<std::string>& items) {
  const std::string array = BinaryTextArray(items);
  return pqxx::binarystring(array.data(), array.size());
}

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
  std::vector<absl::StatusOr<model::Object>> Run(pqxx::transaction_base& tx) {
    // Integer and boolean arrays as literals, text arrays in binary (BinaryTextArray): the
    // order and types of qm_write_batch's parameters (migrations/0013).
    auto rows = tx.exec_prepared(
        "write_batch", static_cast<int>(items_.size()), TextArray(w_[0]), Bin(w_[1]), Bin(w_[2]),
        Bin(w_[3]), Bin(w_[4]), Bin(w_[5]), TextArray(w_[6]), TextArray(w_[7]), TextArray(w_[8]),
        Bin(w_[9]), Bin(w_[10]), Bin(w_[11]), Bin(w_[12]), Bin(w_[13]), TextArray(w_[14]),
        TextArray(d_[0]), Bin(d_[1]), Bin(d_[2]), Bin(d_[3]), Bin(d_[4]), Bin(d_[5]),
        TextArray(d_[6]), Bin(d_[7]), Bin(d_[8]), TextArray(r_[0]), Bin(r_[1]), TextArray(q_[0]),
        Bin(q_[1]), Bin(q_[2]), TextArray(q_[3]), TextArray(s_[0]), Bin(s_[1]), TextArray(s_[2]),
        TextArray(s_[3]), TextArray(a_[0]), TextArray(a_[1]), Bin(a_[2]), Bin(a_[3]), Bin(a_[4]),
        Bin(a_[5]), Bin(a_[6]), Bin(a_[7]), Bin(a_[8]), Bin(a_[9]), Bin(a_[10]), TextArray(a_[11]),
        Bin(a_[12]), Bin(a_[13]));
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
      // A transaction's objects go to its caller in txn_results; its result says that it
      // committed, and at which revision.
      model::Object committed;
      if (!w.txn_results.empty()) {
        committed.meta.resource_version = w.txn_results.back().meta.resource_version;
      }
      results.push_back(std::move(committed));
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
    AppendAuditColumns(r, &a_[1]);
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

}  // namespace

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

namespace {

// A transaction block opened in a pqxx::nontransaction (queries::kBeginWrites): rolled back when
// left before Commit. As pqxx::work's commit does, Commit reports a connection lost while COMMIT
// was on its way as in_doubt_error, which WithConnection never runs again: the batch may have
// committed.
class TransactionBlock {
 public:
  explicit TransactionBlock(pqxx::transaction_base& tx) : tx_(tx) {}
  TransactionBlock(const TransactionBlock&) = delete;
  TransactionBlock& operator=(const TransactionBlock&) = delete;
  ~TransactionBlock() {
    if (!open_) return;
    try {
      tx_.exec0("ROLLBACK");
    } catch (...) {  // a broken connection: the server ends the transaction with it
    }
  }

  void Commit() {
    open_ = false;
    try {
      tx_.exec0("COMMIT");
    } catch (const pqxx::broken_connection& e) {
      throw pqxx::in_doubt_error(std::string("connection lost during COMMIT: ") + e.what());
    }
  }

 private:
  pqxx::transaction_base& tx_;
  bool open_ = true;
};

}  // namespace

absl::StatusOr<std::vector<absl::StatusOr<model::Object>>> PgStore::RunBatch(
    const std::vector<PendingWrite*>& batch) {
  using Results = std::vector<absl::StatusOr<model::Object>>;
  return WithConnection(*pool_, [&](pqxx::connection& c) -> absl::StatusOr<Results> {
    // The transaction block is opened by the query that takes the write lock: one round trip
    // where pqxx::work makes two (its BEGIN, then qm_begin_writes). Read committed:
    // qm_begin_writes reads the log after taking the lock.
    pqxx::nontransaction tx(c);
    TransactionBlock block(tx);
    const int64_t before = tx.exec1(queries::kBeginWrites)[0].as<int64_t>();
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
    block.Commit();
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

}  // namespace qm::store::pg
