#pragma once

#include <memory>
#include <string>

#include "store/pg/embedded_postgres.h"

namespace qm::testing {

// A private PostgreSQL cluster for one test binary, started on first use in a fresh temporary
// directory and stopped at exit. Set QM_TEST_DATABASE_URL to use an existing server instead.
class PgTestEnv {
 public:
  static PgTestEnv& Get();

  const std::string& url() const { return url_; }

  // Empties the database and applies the migrations again.
  void Reset();

  // Stops and starts the server (embedded cluster only), as a crash-restart would.
  void Restart();

  ~PgTestEnv();

 private:
  PgTestEnv();
  std::string dir_;
  std::unique_ptr<store::pg::EmbeddedPostgres> pg_;
  std::string url_;
};

}  // namespace qm::testing
