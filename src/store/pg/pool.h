#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"

#include <pqxx/connection>

#include "common/mutex.h"

namespace qm::store::pg {

// A fixed-size pool of libpq connections. A leased connection is used by one thread at a time
// and goes back to the pool when the Lease ends; a lease marked broken is replaced by a fresh
// connection on the next Acquire. Thread-safe.
class ConnectionPool {
 public:
  class Lease {
   public:
    Lease(ConnectionPool* pool, std::unique_ptr<pqxx::connection> conn);
    Lease(Lease&&) noexcept;
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    pqxx::connection& operator*() { return *conn_; }
    pqxx::connection* operator->() { return conn_.get(); }
    // The connection failed; do not return it to the pool.
    void MarkBroken() { broken_ = true; }

   private:
    ConnectionPool* pool_;
    std::unique_ptr<pqxx::connection> conn_;
    bool broken_ = false;
  };

  // `on_connect` runs once on every new connection (e.g. to prepare statements).
  ConnectionPool(std::string url, int size,
                 std::function<void(pqxx::connection&)> on_connect = nullptr);
  ~ConnectionPool();

  // Waits for a free connection, opening one if needed. Unavailable if the database cannot be
  // reached.
  absl::StatusOr<Lease> Acquire();

  // Closes every idle connection (a broken one suggests the others broke with it: the database
  // restarted, or its connections were ended); the next Acquire opens fresh ones.
  void DropIdle();

  int size() const { return size_; }
  // Connections currently leased out (for the pool-use metric).
  int InUse();

 private:
  void Release(std::unique_ptr<pqxx::connection> conn, bool broken);

  const std::string url_;
  const int size_;
  const std::function<void(pqxx::connection&)> on_connect_;
  qm::Mutex mu_;
  qm::CondVar available_;
  std::vector<std::unique_ptr<pqxx::connection>> idle_ ABSL_GUARDED_BY(mu_);
  int open_ ABSL_GUARDED_BY(mu_) = 0;
  int in_use_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace qm::store::pg
