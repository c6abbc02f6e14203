#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/id_generator.h"
#include "model/object.h"
#include "model/selector.h"
#include "service/ledger.h"
#include "service/list_request.h"
#include "service/watch_hub.h"
#include "store/store.h"

namespace qm::service {

struct DeleteOptions {
  std::optional<std::string> precondition_uid;
  std::optional<int64_t> precondition_resource_version;
  bool dry_run = false;
  // gracePeriodSeconds of the request; nullopt: the object's default (DefaultGracePeriodSeconds).
  // 0 also drops kDevicesPreparedFinalizer (a forced deletion does not wait for the agent).
  std::optional<int64_t> grace_period_seconds;
};

struct DeleteResult {
  model::Object object;  // last state (deleted) or the object now marked for deletion
  bool deleted = false;  // false: finalizers remain, only deletionTimestamp was set
};

// One write of ObjectService::CommitBatch.
struct BatchWrite {
  enum class Kind { kCreate, kUpdate, kDelete };
  Kind kind = Kind::kUpdate;
  // kCreate: the new object; kUpdate: the desired object.
  model::Object object;
  // kUpdate, kDelete: the stored object the write was computed from; its resourceVersion is the
  // write's precondition.
  model::Object current;
};

// Kubernetes object-metadata semantics on top of a Store: uid, creationTimestamp and
// generation assignment; optimistic concurrency with retries for unconditional writes;
// deletionTimestamp and finalizers; namespaces that must exist and that take their contents
// with them when deleted. Works on hub-version objects whose body the caller (the REST codecs)
// has produced. Thread-safe; holds no state of its own besides its dependencies.
class ObjectService {
 public:
  // With a `hub`, lists are served from its cache once it has caught up with the store
  // (read-your-writes), otherwise from the store.
  ObjectService(store::Store& store, const Clock& clock, IdGenerator& ids, WatchHub* hub = nullptr);

  // Stores a new object. Fills uid, creationTimestamp, generation 1, and the name from
  // generateName when the name is empty. NotFound when its namespace does not exist;
  // AlreadyExists when the name is taken. Pods and resource claims pass ResourceQuota admission
  // (CreateWithinQuota: atomic with the write, PermissionDenied with Kubernetes' "exceeded
  // quota" message, failing when quota state cannot be read). With dry_run nothing is written.
  absl::StatusOr<model::Object> Create(model::Object obj, bool dry_run);

  // Computes the new state from the current one and writes it. `mutate` gets the stored object
  // and returns the desired object (or an error, returned as is). When the desired object's
  // resourceVersion is non-zero it must equal the stored one (else Aborted = 409 Conflict);
  // when it is zero, a concurrent write makes the whole read-mutate-write run again.
  // Keeps uid and creationTimestamp; bumps generation when spec_digest changed; refuses new
  // finalizers on an object being deleted; an object being deleted whose last finalizer is
  // removed is written and then deleted for real (the returned object is the deletion's).
  absl::StatusOr<model::Object> Update(
      const model::ResourceKey& key,
      const std::function<absl::StatusOr<model::Object>(const model::Object&)>& mutate,
      bool dry_run);

  // Deletes now, or, when finalizers remain, sets deletionTimestamp (graceful_deletion.h: now +
  // the grace period, with deletionGracePeriodSeconds; a later delete may shorten it; a grace
  // period of 0 removes kDevicesPreparedFinalizer first). A namespace is marked,
  // emptied, and removed once nothing is left in it (creating content in a namespace being
  // deleted is Forbidden).
  absl::StatusOr<DeleteResult> Delete(const model::ResourceKey& key, const DeleteOptions& options);

  absl::StatusOr<model::Object> Get(const model::ResourceKey& key);
  // The object cache's copy of `key` when it has one, else the store's; `from_cache` says which.
  // A cached copy may lag the store by a few ms (or show an object just deleted): use it only to
  // compute a write that is conditional on its resourceVersion (Aborted when stale), and decide
  // anything that writes nothing on the store's copy.
  absl::StatusOr<model::Object> GetForWrite(const model::ResourceKey& key, bool* from_cache);

  // Several creates, updates and deletes in one store transaction: all of them or none. Each
  // gets the metadata policy of Create, Update and Delete (uid, creationTimestamp and generation
  // 1 on create; uid, creationTimestamp and deletionTimestamp kept and generation bumped on a
  // spec change on update; a delete of an object with finalizers only sets deletionTimestamp).
  // Aborted when an object changed since `current` was read (recompute and retry), or when a
  // create's name is taken (AlreadyExists); NotFound when a namespace is missing. While an
  // AuditScope lives on the calling thread, each write commits with a copy of its record (verb
  // create, update or delete, and the object's resource, namespace and name). Not for
  // ResourceClaims whose allocation changes (their ledger rows are not maintained here). Returns
  // the stored objects in order.
  absl::StatusOr<std::vector<model::Object>> CommitBatch(std::vector<BatchWrite> writes);

  // Lists with label and field selectors applied. `limit` counts matching objects.
  absl::StatusOr<store::ListResult> List(const ListRequest& request);
  // Lists from the object cache once it shows every write of the listed resource this process
  // committed (Store::LastCommittedRevisionOf: a create's quota lookup waits for no pod), without
  // asking the store for its newest revision (another replica's newest writes may be missing):
  // for admission checks that, like Kubernetes' informers, accept that. Falls back to List
  // without a cache.
  absl::StatusOr<store::ListResult> ListCached(const ListRequest& request);
  // WatchHub::LastChanges of `resources`, with ListCached's view of the cache (this process's
  // own writes included). FailedPrecondition without a cache.
  absl::StatusOr<std::vector<int64_t>> LastChanges(const std::vector<std::string>& resources);

  store::Store& store() { return store_; }

 private:
  absl::Status CheckNamespace(const std::string& ns);
  absl::Status DeleteNamespaceContents(const std::string& ns);
  absl::StatusOr<bool> NamespaceIsEmpty(const std::string& ns);
  // After `deleted` is gone (by the change of revision `deleted_rv`): removes its namespace if
  // that is being deleted and now empty.
  absl::Status FinishNamespaceIfEmpty(const model::ResourceKey& deleted, int64_t deleted_rv);
  // Store writes that keep the device ledger in step with claims whose allocation a client
  // (an external allocator, not the scheduler) writes: an update that changes a claim's
  // status.allocation replaces the claim's ledger rows in the same transaction (Aborted when a
  // device is held exclusively by another claim, or when the allocation takes more of a
  // device's capacity or a pool's shared counters than is left). Deleting a claim needs nothing
  // of the kind: the store releases a deleted claim's rows itself.
  absl::StatusOr<model::Object> StoreUpdate(const model::Object& current,
                                            const model::Object& next);
  // The ResourceSlices of the pools `allocation` takes devices from, from the object cache.
  absl::StatusOr<std::unique_ptr<SliceDevices>> SlicesOf(const model::AllocationResult& allocation);

  store::Store& store_;
  const Clock& clock_;
  IdGenerator& ids_;
  WatchHub* hub_;
};

}  // namespace qm::service
