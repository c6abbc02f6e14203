#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace qm::store::pg {

// A private PostgreSQL cluster under a data directory, for running without --database-url.
//
// Start() runs initdb on first use (trust auth, user "quartermaster"), then starts the server
// with pg_ctl listening on a Unix socket inside the directory only (no TCP). A cluster left
// running by a crashed process is reused. PostgreSQL refuses to run as root: when this process
// is root, the cluster belongs to and runs as the `postgres` system user. Stop() shuts it down
// (fast mode: in-flight transactions are rolled back, committed ones are durable).
class EmbeddedPostgres {
 public:
  // `data_dir` is the cluster directory (created if missing); `bin_dir` holds initdb/pg_ctl,
  // empty to search /usr/lib/postgresql/<newest>/bin.
  EmbeddedPostgres(std::string data_dir, std::string bin_dir);
  ~EmbeddedPostgres();

  // FailedPrecondition with an install hint when the PostgreSQL binaries are missing.
  absl::Status Start();
  absl::Status Stop();
  bool running() const { return running_; }

  // libpq connection string for the running cluster.
  std::string ConnectionUrl() const;

 private:
  std::string data_dir_;
  std::string bin_dir_;
  std::string run_as_;  // system user to run PostgreSQL as, empty for this process's user
  bool running_ = false;
};

}  // namespace qm::store::pg
