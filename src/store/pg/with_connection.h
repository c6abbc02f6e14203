#pragma once

// The one place the PostgreSQL store catches libpqxx's exceptions (pg_store.cc, pg_writer.cc,
// pg_changes.cc, pg_records.cc).

#include <string>
#include <utility>

#include <pqxx/pqxx>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "store/pg/pool.h"

namespace qm::store::pg {

// Runs `fn` with a leased connection and maps libpqxx exceptions to Status. The only place
// exceptions from libpqxx are caught.
//
// A connection that broke (the database restarted, or an administrator or a proxy ended it) is
// dropped with every idle one, which most likely broke with it, and `fn` runs again on a fresh
// connection: nothing it did can have committed, because libpqxx reports a connection lost
// during COMMIT as in_doubt_error, which is never run again. Without this each connection left
// in the pool would fail one request with 503 after the database came back.
template <typename Fn>
auto WithConnection(ConnectionPool& pool, Fn&& fn)
    -> decltype(fn(std::declval<pqxx::connection&>())) {
  constexpr int kAttempts = 3;
  for (int attempt = 1;; ++attempt) {
    auto lease = pool.Acquire();
    if (!lease.ok()) return lease.status();
    std::string lost;
    try {
      return fn(**lease);
    } catch (const pqxx::broken_connection& e) {
      lost = e.what();
    } catch (const pqxx::unique_violation& e) {
      return absl::AlreadyExistsError(std::string("already exists: ") + e.what());
    } catch (const pqxx::serialization_failure& e) {
      return absl::AbortedError(std::string("serialization failure: ") + e.what());
    } catch (const pqxx::in_doubt_error& e) {
      lease->MarkBroken();
      return absl::UnavailableError(std::string("commit outcome unknown: ") + e.what());
    } catch (const pqxx::sql_error& e) {
      // The server's last word before it closed the connection (e.g. "terminating connection
      // due to administrator command") is a lost connection, not an SQL error.
      if ((*lease)->is_open()) {
        return absl::InternalError(std::string("database error: ") + e.what());
      }
      lost = e.what();
    } catch (const nlohmann::json::exception& e) {
      return absl::InternalError(std::string("corrupt stored object: ") + e.what());
    } catch (const std::exception& e) {
      lease->MarkBroken();
      return absl::InternalError(std::string("database error: ") + e.what());
    }
    lease->MarkBroken();
    pool.DropIdle();
    if (attempt == kAttempts) {
      return absl::UnavailableError("database connection lost: " + lost);
    }
  }
}

}  // namespace qm::store::pg
