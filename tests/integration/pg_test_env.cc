#include "pg_test_env.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <pqxx/pqxx>
#include <stdexcept>

#include "store/pg/pg_store.h"

namespace qm::testing {

PgTestEnv& PgTestEnv::Get() {
  static PgTestEnv* env = new PgTestEnv();
  return *env;
}

PgTestEnv::PgTestEnv() {
  if (const char* url = std::getenv("QM_TEST_DATABASE_URL"); url != nullptr && *url != '\0') {
    url_ = url;
    Reset();
    return;
  }
  char tmpl[] = "/tmp/qm-it-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  chmod(dir_.c_str(), 0755);  // the postgres user must reach its data directory
  pg_ = std::make_unique<store::pg::EmbeddedPostgres>(dir_ + "/pg", "");
  if (auto st = pg_->Start(); !st.ok()) throw std::runtime_error(st.ToString());
  url_ = pg_->ConnectionUrl();
  std::atexit([] {
    PgTestEnv& e = Get();
    if (e.pg_) (void)e.pg_->Stop();
    if (!e.dir_.empty()) std::filesystem::remove_all(e.dir_);
  });
  Reset();
}

PgTestEnv::~PgTestEnv() = default;

void PgTestEnv::Reset() {
  pqxx::connection c(url_);
  pqxx::nontransaction tx(c);
  tx.exec("DROP SCHEMA IF EXISTS public CASCADE");
  tx.exec("CREATE SCHEMA public");
  auto st = store::pg::Migrate(url_);
  if (!st.ok()) throw std::runtime_error(st.ToString());
}

void PgTestEnv::Restart() {
  if (!pg_) return;
  if (auto st = pg_->Stop(); !st.ok()) throw std::runtime_error(st.ToString());
  if (auto st = pg_->Start(); !st.ok()) throw std::runtime_error(st.ToString());
}

}  // namespace qm::testing
