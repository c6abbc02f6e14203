// The PostgreSQL store's records beside the objects: the audit trail, the allocation history
// and node leases (pg_store.h).

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include <nlohmann/json.hpp>

#include "model/json/write.h"
#include "store/pg/pg_store.h"
#include "store/pg/pg_store_internal.h"
#include "store/pg/queries.h"
#include "store/pg/text.h"
#include "store/pg/with_connection.h"

namespace qm::store::pg {
namespace {

// Inserts audit records inside `tx` (one statement for all of them): those of requests that
// wrote nothing (writes commit theirs with the write, in qm_write_batch).
void InsertAudit(pqxx::work& tx, const std::vector<AuditRecord>& records) {
  std::vector<std::string> cols[13];
  for (const AuditRecord& r : records) pg_internal::AppendAuditColumns(r, cols);
  tx.exec_prepared("insert_audit", TextArray(cols[0]), TextArray(cols[1]), TextArray(cols[2]),
                   TextArray(cols[3]), TextArray(cols[4]), TextArray(cols[5]), TextArray(cols[6]),
                   TextArray(cols[7]), TextArray(cols[8]), TextArray(cols[9]), TextArray(cols[10]),
                   TextArray(cols[11]), TextArray(cols[12]));
}

}  // namespace

absl::Status PgStore::AppendAudit(const std::vector<AuditRecord>& records) {
  if (records.empty()) return absl::OkStatus();
  auto r = WithConnection(*pool_, [&](pqxx::connection& c) -> absl::StatusOr<bool> {
    pqxx::work tx(c);
    InsertAudit(tx, records);
    tx.commit();
    return true;
  });
  return r.status();
}

absl::StatusOr<std::vector<AuditRecord>> PgStore::QueryAudit(const AuditQuery& q) {
  return WithConnection(
      *pool_, [&](pqxx::connection& c) -> absl::StatusOr<std::vector<AuditRecord>> {
        pqxx::nontransaction tx(c);
        auto rows = tx.exec_prepared("query_audit", q.user, q.resource, q.namespace_, q.name,
                                     q.since ? Micros(*q.since) : int64_t{0},
                                     q.until ? Micros(*q.until) : int64_t{0}, q.after_id, q.limit);
        std::vector<AuditRecord> out;
        for (const auto& row : rows) {
          AuditRecord r;
          r.id = row[0].as<int64_t>();
          r.time = std::chrono::system_clock::time_point(
              std::chrono::microseconds(row[1].as<int64_t>()));
          r.request_id = row[2].as<std::string>();
          r.user = row[3].as<std::string>();
          auto groups = nlohmann::json::parse(row[4].as<std::string>(), nullptr, false);
          if (groups.is_array()) {
            for (const auto& g : groups) {
              if (g.is_string()) r.groups.push_back(g.get<std::string>());
            }
          }
          r.verb = row[5].as<std::string>();
          r.api_group = row[6].as<std::string>();
          r.resource = row[7].as<std::string>();
          r.subresource = row[8].as<std::string>();
          r.namespace_ = row[9].as<std::string>();
          r.name = row[10].as<std::string>();
          r.code = row[11].as<int>();
          r.source = row[12].as<std::string>();
          r.user_agent = row[13].as<std::string>();
          out.push_back(std::move(r));
        }
        return out;
      });
}

absl::StatusOr<int64_t> PgStore::PruneAudit(std::chrono::system_clock::time_point before) {
  return WithConnection(*pool_, [&](pqxx::connection& c) -> absl::StatusOr<int64_t> {
    pqxx::work tx(c);
    auto r = tx.exec_prepared("prune_audit", Micros(before));
    tx.commit();
    return static_cast<int64_t>(r.affected_rows());
  });
}

namespace {

// A ledger row from columns driver, pool, device, share_id, claim_uid, namespace, admin_access
// starting at `first` (kAllocationLedgerNow, kDeviceLedgerNow).
AllocationRecord RecordAt(const pqxx::row& row, int first) {
  return AllocationRecord{row[first].as<std::string>(),     row[first + 1].as<std::string>(),
                          row[first + 2].as<std::string>(), row[first + 3].as<std::string>(),
                          row[first + 4].as<std::string>(), row[first + 5].as<std::string>(),
                          row[first + 6].as<bool>()};
}

// A history row: id, time in microseconds, the ledger row, delta (kAllocationHistorySince,
// kDeviceHistorySince).
AllocationEvent EventOf(const pqxx::row& row) {
  AllocationEvent e;
  e.id = row[0].as<int64_t>();
  e.time = std::chrono::system_clock::time_point(std::chrono::microseconds(row[1].as<int64_t>()));
  e.row = RecordAt(row, 2);
  e.delta = row[9].as<int>();
  return e;
}

// A health history row: id, time in microseconds, driver, pool, device, delta
// (kHealthHistorySince).
HealthEvent HealthEventOf(const pqxx::row& row) {
  HealthEvent e;
  e.id = row[0].as<int64_t>();
  e.time = std::chrono::system_clock::time_point(std::chrono::microseconds(row[1].as<int64_t>()));
  e.driver = row[2].as<std::string>();
  e.pool = row[3].as<std::string>();
  e.device = row[4].as<std::string>();
  e.delta = row[5].as<int>();
  return e;
}

}  // namespace

absl::StatusOr<AllocationHistory> PgStore::ReadAllocationHistory(
    std::chrono::system_clock::time_point since) {
  return WithConnection(*pool_, [&](pqxx::connection& c) -> absl::StatusOr<AllocationHistory> {
    // One snapshot for the ledger and its history: a binding committing meanwhile shows in
    // both or in neither.
    pqxx::transaction<pqxx::repeatable_read, pqxx::readwrite_policy::read_only> tx(c);
    AllocationHistory out;
    for (const auto& row : tx.exec(queries::kAllocationLedgerNow)) {
      out.current.push_back(RecordAt(row, 0));
    }
    for (const auto& row : tx.exec_params(queries::kAllocationHistorySince, Micros(since))) {
      out.events.push_back(EventOf(row));
    }
    for (const auto& row : tx.exec_params(queries::kHealthHistorySince, Micros(since))) {
      out.health.push_back(HealthEventOf(row));
    }
    tx.commit();
    return out;
  });
}

absl::StatusOr<AllocationHistory> PgStore::ReadDeviceHistory(
    const std::string& driver, const std::string& pool, const std::string& device,
    std::chrono::system_clock::time_point since, int64_t limit, bool* truncated) {
  return WithConnection(*pool_, [&](pqxx::connection& c) -> absl::StatusOr<AllocationHistory> {
    pqxx::transaction<pqxx::repeatable_read, pqxx::readwrite_policy::read_only> tx(c);
    AllocationHistory out;
    for (const auto& row : tx.exec_params(queries::kDeviceLedgerNow, driver, pool, device)) {
      out.current.push_back(RecordAt(row, 0));
    }
    // One row more than asked for says whether there were more.
    for (const auto& row : tx.exec_params(queries::kDeviceHistorySince, driver, pool, device,
                                          Micros(since), limit + 1)) {
      out.events.push_back(EventOf(row));
    }
    tx.commit();
    *truncated = static_cast<int64_t>(out.events.size()) > limit;
    if (*truncated) out.events.resize(static_cast<size_t>(limit));
    return out;
  });
}

absl::StatusOr<int64_t> PgStore::PruneAllocationHistory(
    std::chrono::system_clock::time_point before) {
  return WithConnection(*pool_, [&](pqxx::connection& c) -> absl::StatusOr<int64_t> {
    pqxx::work tx(c);
    auto r = tx.exec_params(queries::kPruneAllocationHistory, Micros(before));
    auto health = tx.exec_params(queries::kPruneHealthHistory, Micros(before));
    tx.commit();
    return static_cast<int64_t>(r.affected_rows() + health.affected_rows());
  });
}

absl::Status PgStore::RenewNodeLeases(
    const std::map<std::string, std::chrono::system_clock::time_point>& renewals) {
  if (renewals.empty()) return absl::OkStatus();
  std::vector<std::string> names, micros;
  for (const auto& [name, at] : renewals) {
    names.push_back(name);
    micros.push_back(std::to_string(Micros(at)));
  }
  return WithConnection(*pool_, [&](pqxx::connection& c) -> absl::Status {
    pqxx::work tx(c);
    tx.exec_params0(queries::kRenewNodeLeases, TextArray(names), TextArray(micros));
    tx.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<std::map<std::string, std::chrono::system_clock::time_point>> PgStore::NodeLeases() {
  using Leases = std::map<std::string, std::chrono::system_clock::time_point>;
  return WithConnection(*pool_, [&](pqxx::connection& c) -> absl::StatusOr<Leases> {
    pqxx::nontransaction tx(c);
    Leases out;
    for (const auto& row : tx.exec(queries::kNodeLeases)) {
      out[row[0].as<std::string>()] =
          std::chrono::system_clock::time_point(std::chrono::microseconds(row[1].as<int64_t>()));
    }
    return out;
  });
}

namespace pg_internal {

void AppendAuditColumns(const AuditRecord& r, std::vector<std::string>* cols) {
  cols[0].push_back(std::to_string(Micros(r.time)));
  cols[1].push_back(r.request_id);
  cols[2].push_back(r.user);
  cols[3].push_back(model::json::WriteStringList(r.groups));
  cols[4].push_back(r.verb);
  cols[5].push_back(r.api_group);
  cols[6].push_back(r.resource);
  cols[7].push_back(r.subresource);
  cols[8].push_back(r.namespace_);
  cols[9].push_back(r.name);
  cols[10].push_back(std::to_string(r.code));
  cols[11].push_back(r.source);
  cols[12].push_back(r.user_agent);
}

}  // namespace pg_internal
}  // namespace qm::store::pg
