#pragma once

// A Store that forwards every call to an in-memory store, for tests that wrap a few calls to
// inject faults or delays and leave the rest alone.

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "store/memory_store.h"

namespace qm::service::fakes {

class ForwardingStore : public store::Store {
 public:
  absl::StatusOr<model::Object> Create(const model::Object& obj) override {
    return inner.Create(obj);
  }
  absl::StatusOr<model::Object> Update(const model::Object& obj, int64_t rv) override {
    return inner.Update(obj, rv);
  }
  absl::StatusOr<model::Object> Delete(const model::ResourceKey& key, int64_t rv) override {
    return inner.Delete(key, rv);
  }
  absl::StatusOr<model::Object> Get(const model::ResourceKey& key) override {
    return inner.Get(key);
  }
  absl::StatusOr<store::ListResult> List(const store::ListOptions& o) override {
    return inner.List(o);
  }
  absl::StatusOr<store::ListResult> ListAll() override { return inner.ListAll(); }
  absl::StatusOr<int64_t> CurrentRevision() override { return inner.CurrentRevision(); }
  int64_t LastCommittedRevision() override { return inner.LastCommittedRevision(); }
  int64_t LastCommittedRevisionOf(const std::string& resource) override {
    return inner.LastCommittedRevisionOf(resource);
  }
  absl::StatusOr<std::vector<model::WatchEvent>> ChangesSince(int64_t rv, int64_t limit) override {
    return inner.ChangesSince(rv, limit);
  }
  void WaitForChanges(int64_t rv, std::chrono::milliseconds t) override {
    inner.WaitForChanges(rv, t);
  }
  absl::Status Compact(int64_t rv) override { return inner.Compact(rv); }
  absl::StatusOr<std::vector<model::Object>> Commit(const store::Transaction& txn) override {
    return inner.Commit(txn);
  }
  absl::StatusOr<std::vector<store::DeviceClaim>> ListDeviceClaims() override {
    return inner.ListDeviceClaims();
  }
  absl::StatusOr<std::map<std::string, int64_t>> QuotaUsed(const std::string& ns) override {
    return inner.QuotaUsed(ns);
  }
  absl::Status Ping() override { return absl::OkStatus(); }

  store::MemoryStore inner;
};

}  // namespace qm::service::fakes
