#include "store/pg/pool.h"

#include <pqxx/pqxx>

namespace qm::store::pg {

ConnectionPool::Lease::Lease(ConnectionPool* pool, std::unique_ptr<pqxx::connection> conn)
    : pool_(pool), conn_(std::move(conn)) {}

ConnectionPool::Lease::Lease(Lease&& other) noexcept
    : pool_(other.pool_), conn_(std::move(other.conn_)), broken_(other.broken_) {
  other.pool_ = nullptr;
}

ConnectionPool::Lease::~Lease() {
  if (pool_ != nullptr) pool_->Release(std::move(conn_), broken_);
}

ConnectionPool::ConnectionPool(std::string url, int size,
                               std::function<void(pqxx::connection&)> on_connect)
    : url_(std::move(url)), size_(size), on_connect_(std::move(on_connect)) {}

ConnectionPool::~ConnectionPool() = default;

absl::StatusOr<ConnectionPool::Lease> ConnectionPool::Acquire() {
  {
    qm::MutexLock lock(&mu_);
    while (idle_.empty() && open_ >= size_) available_.Wait(&mu_);
    if (!idle_.empty()) {
      auto conn = std::move(idle_.back());
      idle_.pop_back();
      ++in_use_;
      return Lease(this, std::move(conn));
    }
    ++open_;
    ++in_use_;
  }
  try {
    auto conn = std::make_unique<pqxx::connection>(url_);
    if (on_connect_) on_connect_(*conn);
    return Lease(this, std::move(conn));
  } catch (const std::exception& e) {
    qm::MutexLock lock(&mu_);
    --open_;
    --in_use_;
    available_.Signal();
    return absl::UnavailableError(std::string("cannot connect to PostgreSQL: ") + e.what());
  }
}

void ConnectionPool::DropIdle() {
  std::vector<std::unique_ptr<pqxx::connection>> dropped;
  {
    qm::MutexLock lock(&mu_);
    open_ -= static_cast<int>(idle_.size());
    dropped.swap(idle_);
  }
  available_.SignalAll();
  // `dropped` closes them here, outside the lock.
}

int ConnectionPool::InUse() {
  qm::MutexLock lock(&mu_);
  return in_use_;
}

void ConnectionPool::Release(std::unique_ptr<pqxx::connection> conn, bool broken) {
  qm::MutexLock lock(&mu_);
  --in_use_;
  if (broken || conn == nullptr || !conn->is_open()) {
    --open_;
  } else {
    idle_.push_back(std::move(conn));
  }
  available_.Signal();
}

}  // namespace qm::store::pg
