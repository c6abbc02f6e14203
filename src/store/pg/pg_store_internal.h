#pragma once

// What the files of PgStore share (pg_store.cc: opening, reads, compaction, migrations;
// pg_writer.cc: the write queue and group commit; pg_changes.cc: the change log, followed and
// watched): a queued write, the listening connection and the decoding of object rows. Not for
// use outside them.

#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "store/pg/pg_store.h"

namespace qm::store::pg {
namespace pg_internal {

using Clock = std::chrono::system_clock;

inline Clock::time_point FromEpoch(int64_t s) { return Clock::time_point(std::chrono::seconds(s)); }

void DecodeColumns(const std::string& labels, const std::string& meta_text,
                   const std::string& fields, model::Object* obj);

// The object in the 13 columns of kSelectColumns, starting at column `at`.
model::Object DecodeRow(const pqxx::row& r, int at = 0);

// The audit record's 13 columns, as insert_audit and qm_write_batch take them, appended to
// cols[0] .. cols[12].
void AppendAuditColumns(const AuditRecord& r, std::vector<std::string>* cols);

}  // namespace pg_internal

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

}  // namespace qm::store::pg
