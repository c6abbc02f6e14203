#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "store/pg/pool.h"
#include "store/store.h"

namespace qm::store::pg {

// The PostgreSQL Store (ARCHITECTURE.md §4). Writes run in one transaction each, serialised by
// an advisory lock so revisions commit in order; every write appends to change_log and
// NOTIFYs `qm_changes`. Thread-safe.
class PgStore final : public Store {
 public:
  // Opens a pool of `pool_size` connections to `url` plus one listening connection.
  // Migrations must already be applied (see Migrate).
  static absl::StatusOr<std::unique_ptr<PgStore>> Open(const std::string& url, int pool_size);
  ~PgStore() override;

  absl::StatusOr<model::Object> Create(const model::Object& obj) override;
  absl::StatusOr<model::Object> Update(const model::Object& obj, int64_t expected_rv) override;
  absl::StatusOr<model::Object> Delete(const model::ResourceKey& key, int64_t expected_rv) override;
  absl::StatusOr<model::Object> Get(const model::ResourceKey& key) override;
  absl::StatusOr<ListResult> List(const ListOptions& options) override;
  absl::StatusOr<int64_t> CurrentRevision() override;
  absl::StatusOr<std::vector<model::WatchEvent>> ChangesSince(int64_t after_rv,
                                                              int64_t limit) override;
  void WaitForChanges(int64_t after_rv, std::chrono::milliseconds timeout) override;
  absl::Status Compact(int64_t through_rv) override;
  absl::Status Ping() override;

  ConnectionPool& pool() { return *pool_; }

 private:
  struct Listener;
  PgStore(std::string url, std::unique_ptr<ConnectionPool> pool);

  const std::string url_;
  std::unique_ptr<ConnectionPool> pool_;
  std::mutex listen_mu_;
  std::unique_ptr<Listener> listener_ ABSL_GUARDED_BY(listen_mu_);
};

// Applies every migration not yet recorded in schema_migrations, in name order, in one
// transaction under an advisory lock (safe with several replicas starting at once).
absl::Status Migrate(const std::string& url);

}  // namespace qm::store::pg
