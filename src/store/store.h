#pragma once

#include <chrono>
#include <cstdint>
#include <future>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/quantity.h"
#include "model/object.h"

namespace qm::store {

struct ListOptions {
  std::string resource;    // group-qualified plural, required
  std::string namespace_;  // empty: all namespaces (or a cluster-scoped resource)
  // Continue after this (namespace, name) position, in key order; empty: from the start.
  std::string after_namespace;
  std::string after_name;
  int64_t limit = 0;  // 0: no limit
};

struct ListResult {
  std::vector<model::ObjectPtr> items;  // ordered by (namespace, name); shared, never changed
  int64_t resource_version = 0;         // the store revision the list reflects
  bool more = false;                    // more items exist past the last one returned
};

// What one ledger row takes from a limit that the store enforces, as the ResourceSlice that
// publishes the device states it: a consumable-capacity share's amount of one capacity of its
// device, or what a partitionable device consumes from one counter of its pool's counter sets.
struct DeviceCharge {
  enum class Kind { kCapacity, kCounter };
  Kind kind = Kind::kCapacity;
  std::string owner;  // kCapacity: the device; kCounter: the counter set
  std::string name;   // the capacity or the counter
  Quantity amount;
  Quantity limit;  // the capacity's or the counter's value
  bool operator==(const DeviceCharge&) const = default;
};

// One device given to one claim: a row of the device-allocation ledger (ARCHITECTURE §4). The
// store refuses a second exclusive row (empty share_id, not admin access) for the same device,
// and any row whose charges would take a capacity of its device, or a counter of its pool
// (driver, pool, counter set), past the limit: the capacity charges of every share add up; a
// device's counter charges count once while any non-admin row holds it, however many shares it
// has. A row's charges are the writer's to supply (from the slices it allocated against); rows
// without charges are limited by nothing but exclusivity. ListDeviceClaims does not read
// charges back.
struct DeviceClaim {
  std::string driver;
  std::string pool;
  std::string device;
  std::string share_id;  // set for consumable-capacity shares
  std::string claim_uid;
  bool admin_access = false;
  std::string consumed_capacity;  // JSON object text, "{}" when none
  std::vector<DeviceCharge> charges;
  bool operator==(const DeviceClaim&) const = default;
};

// One row of the device-allocation ledger as the allocation history sees it.
struct AllocationRecord {
  std::string driver;
  std::string pool;
  std::string device;
  std::string share_id;
  std::string claim_uid;
  std::string claim_namespace;  // the claim's namespace when the row was written; "" if unknown
  bool admin_access = false;
  bool operator==(const AllocationRecord&) const = default;
};

// One change of the ledger, recorded in the transaction that made it: a row inserted (+1, a
// binding) or deleted (-1, a release).
struct AllocationEvent {
  int64_t id = 0;  // increasing in the order the store recorded the events
  std::chrono::system_clock::time_point time;
  AllocationRecord row;
  int delta = 0;  // +1 or -1
};

// One change of a device's health as its ResourceSlice says it: the device gained (+1) or lost
// (-1) a quartermaster.io/unhealthy taint of its own, recorded in the transaction that wrote the
// slice (a slice created or deleted with such a device counts as gaining or losing it).
struct HealthEvent {
  int64_t id = 0;  // increasing in the order the store recorded the events
  std::chrono::system_clock::time_point time;
  std::string driver;
  std::string pool;
  std::string device;
  int delta = 0;  // +1 or -1
  bool operator==(const HealthEvent&) const = default;
};

// The ledger now and every change after a point in time, read from one consistent snapshot:
// undoing `events` from the newest back, starting at `current`, gives the ledger as it was at
// any time since then. `health` does the same for the devices' unhealthy taints, starting at
// the slices as they are now.
struct AllocationHistory {
  std::vector<AllocationRecord> current;  // the ledger now, in no particular order
  std::vector<AllocationEvent> events;    // oldest first (by time, then id)
  std::vector<HealthEvent> health;        // oldest first (by time, then id)
};

// A limit a transaction must respect once it is applied: the quota usage of `key` in
// `namespace_` (what the namespace's pods and resource claims count against it, kept by the
// store as model::json::QuotaUsage counts, whoever writes them) is at most `hard`. Stores need
// to keep usage only for namespaces that hold a ResourceQuota (resource "resourcequotas");
// elsewhere the usage may read as 0.
struct QuotaCheck {
  std::string namespace_;
  std::string key;
  int64_t hard = 0;
  bool operator==(const QuotaCheck&) const = default;
};

// A precondition of a transaction, checked before its writes: `namespace_` holds exactly
// `count` ResourceQuotas and the newest of them has resource_version `newest` (0 when there are
// none). Quota admission computes its QuotaChecks from quotas it read from a cache and states
// here what it saw, so that a quota the cache did not show yet fails the transaction
// (QuotaSetChangedError) instead of being left unchecked.
struct QuotaSetCheck {
  std::string namespace_;
  int64_t count = 0;
  int64_t newest = 0;
  bool operator==(const QuotaSetCheck&) const = default;
};

// One entry of the audit trail: who did what to which object, and the answer.
struct AuditRecord {
  int64_t id = 0;  // assigned by the store; increasing
  std::chrono::system_clock::time_point time;
  std::string request_id;
  std::string user;
  std::vector<std::string> groups;
  std::string verb;  // create, update, patch, delete, deletecollection, get, ...
  std::string api_group;
  std::string resource;
  std::string subresource;
  std::string namespace_;
  std::string name;
  int code = 0;
  std::string source;  // client address
  std::string user_agent;
};

// One object write of a Transaction.
struct Write {
  enum class Kind { kCreate, kUpdate, kDelete };
  Kind kind = Kind::kUpdate;
  model::Object object;     // kCreate, kUpdate
  model::ResourceKey key;   // kDelete
  int64_t expected_rv = 0;  // kUpdate, kDelete; 0 skips the check
};

// Several writes and device-ledger changes committed together or not at all: the scheduler's
// binding (device rows, every claim's allocation and reservedFor, the pod's node).
struct Transaction {
  std::vector<Write> writes;
  std::vector<DeviceClaim> claim_devices;   // rows to insert
  std::vector<std::string> release_claims;  // claim uids whose rows are deleted first
  // Audit records inserted in the same transaction when it commits (stores without an audit
  // trail ignore them).
  std::vector<AuditRecord> audit;
  // Checked after the writes are applied, in the same transaction (quota admission).
  std::vector<QuotaCheck> quota_checks;
  // Checked before the writes, in the same transaction (quota admission from a cache).
  std::vector<QuotaSetCheck> quota_sets;
};

// Filters of an audit query; empty fields match everything. Results are oldest first, at most
// `limit`, starting after id `after_id` (the continue token).
struct AuditQuery {
  std::string user;
  std::string resource;
  std::string namespace_;
  std::string name;
  std::optional<std::chrono::system_clock::time_point> since;
  std::optional<std::chrono::system_clock::time_point> until;
  int64_t limit = 500;
  int64_t after_id = 0;
};

// While an AuditScope lives on a thread, every Create, Update and Delete that thread submits is
// recorded in the audit trail with `record` (the object's namespace and name filled in from the
// write when the record has none), in the same transaction as the write: the change and its
// record commit together or not at all. Scopes do not nest.
class AuditScope {
 public:
  explicit AuditScope(const AuditRecord* record);
  ~AuditScope();
  AuditScope(const AuditScope&) = delete;
  AuditScope& operator=(const AuditScope&) = delete;
  // The record of the innermost live scope on this thread, or null.
  static const AuditRecord* Current();

 private:
  const AuditRecord* previous_;
};

// The errors every Store returns for a missing key and a stale revision, worded as the
// Kubernetes apiserver words them.
absl::Status NotFoundError(const model::ResourceKey& key);
absl::Status ConflictError(const model::ResourceKey& key);
// Aborted: the device of `row` is already held exclusively by another claim.
absl::Status DeviceTakenError(const DeviceClaim& row);
// Aborted: the charges of `row` do not fit what is left of its device's capacity or its pool's
// counters.
absl::Status DeviceOvercommittedError(const DeviceClaim& row);
// ResourceExhausted: `check` failed.
absl::Status QuotaCheckError(const QuotaCheck& check);
// Aborted: the namespace's ResourceQuotas are not the ones `check` describes; recognized by
// IsQuotaSetChanged.
absl::Status QuotaSetChangedError(const QuotaSetCheck& check);
bool IsQuotaSetChanged(const absl::Status& status);

// Durable home of every API object, with a change log that watches replay.
//
// Contract shared by all implementations (checked by tests/integration/store_conformance):
//  * Every successful write takes the next value of one global, strictly increasing revision,
//    stores it as the object's resource_version, and appends exactly one WatchEvent with that
//    revision to the change log, atomically with the write. Revisions become visible in order:
//    once ChangesSince returns revision N, no change with a revision below N appears later.
//  * Create fails with AlreadyExists when the key exists.
//  * Update and Delete take the revision the caller last saw; a mismatch is Aborted
//    (a Kubernetes 409 Conflict); a missing key is NotFound. expected_rv == 0 skips the check.
//  * uid, creation_timestamp, generation and the body are stored as given: metadata policy
//    (what changes bump generation, finalizers) belongs to the service layer.
//  * Errors from the backend map to Unavailable (connection), Aborted (serialization) or
//    Internal; no exception escapes.
// Implementations are thread-safe.
class Store {
 public:
  virtual ~Store() = default;

  virtual absl::StatusOr<model::Object> Create(const model::Object& obj) = 0;
  virtual absl::StatusOr<model::Object> Update(const model::Object& obj, int64_t expected_rv) = 0;
  // Removes the object; returns its last state carrying the deletion's revision.
  virtual absl::StatusOr<model::Object> Delete(const model::ResourceKey& key,
                                               int64_t expected_rv) = 0;
  virtual absl::StatusOr<model::Object> Get(const model::ResourceKey& key) = 0;
  virtual absl::StatusOr<ListResult> List(const ListOptions& options) = 0;
  // Every object of every resource, from one consistent snapshot, ordered by key.
  virtual absl::StatusOr<ListResult> ListAll() = 0;

  // The newest revision written.
  virtual absl::StatusOr<int64_t> CurrentRevision() = 0;
  // The newest revision that writes through this Store object committed (0: none yet), known
  // without asking the backend: a cache that reached it shows this process's own writes.
  virtual int64_t LastCommittedRevision() = 0;
  // The same for the writes of objects of `resource` only: a cache that reached it shows this
  // process's own writes of that resource, and for a resource written rarely (ResourceQuotas,
  // which every create's quota admission lists) it is reached long before the newest revision.
  // By default the newest revision of all.
  virtual int64_t LastCommittedRevisionOf(const std::string& resource) {
    (void)resource;
    return LastCommittedRevision();
  }

  // Changes with revision > `after_rv`, oldest first, at most `limit` of them.
  // OutOfRange when `after_rv` is older than the compacted part of the log (a 410 Expired).
  virtual absl::StatusOr<std::vector<model::WatchEvent>> ChangesSince(int64_t after_rv,
                                                                      int64_t limit) = 0;

  // ChangesSince for the one reader that follows the log to its end, waiting with
  // WaitForChanges in between (the watch hub): it may answer with fewer changes than exist, as
  // long as those it leaves out make WaitForChanges return at once. A store that knows the
  // changes right after `after_rv` (its own commits) answers without reading the log.
  virtual absl::StatusOr<std::vector<model::WatchEvent>> FollowChanges(int64_t after_rv,
                                                                       int64_t limit) {
    return ChangesSince(after_rv, limit);
  }

  // Blocks until a change newer than `after_rv` may exist or `timeout` passes. Spurious
  // wake-ups are allowed; callers re-read with ChangesSince or FollowChanges.
  virtual void WaitForChanges(int64_t after_rv, std::chrono::milliseconds timeout) = 0;

  // Drops change-log entries with revision <= `through_rv` (never the newest one).
  virtual absl::Status Compact(int64_t through_rv) = 0;

  // Applies `txn` atomically; on success returns the stored objects in write order, each with its
  // own revision (and change-log entry). Any failing write fails the whole transaction with that
  // write's error; a device already held exclusively (DeviceTakenError) or a row whose charges
  // do not fit (DeviceOvercommittedError) is Aborted, so a scheduler that lost a race retries on
  // a fresh snapshot; a failed quota check is ResourceExhausted (QuotaCheckError). Released
  // claims give their charges back in the same transaction. Deleting a ResourceClaim (here or
  // through Delete) releases its ledger rows too: the ledger never outlives its claims.
  virtual absl::StatusOr<std::vector<model::Object>> Commit(const Transaction& txn) = 0;
  // Commit without blocking the caller: the outcome, as Commit's, arrives through the future.
  // Stores that group commits queue the transaction so that many callers share one durable
  // commit without a thread each; this default commits synchronously.
  virtual std::future<absl::StatusOr<std::vector<model::Object>>> CommitAsync(Transaction txn);
  // The whole device-allocation ledger, ordered by (driver, pool, device, share_id, claim_uid).
  virtual absl::StatusOr<std::vector<DeviceClaim>> ListDeviceClaims() = 0;
  // The quota usage of namespace `ns` by key (keys nothing counts against are absent or 0), as
  // QuotaCheck compares it. Stores that keep none answer Unimplemented, which quota admission
  // treats as any other failure to read: the create fails.
  virtual absl::StatusOr<std::map<std::string, int64_t>> QuotaUsed(const std::string& ns);
  // Cheap liveness probe of the backend (for /readyz).
  virtual absl::Status Ping() = 0;

  // The audit trail. AppendAudit stores records now (denials, which change nothing);
  // QueryAudit reads them back; PruneAudit drops those older than `before` and says how many.
  // Stores without an audit trail keep nothing and answer Unimplemented to queries.
  virtual absl::Status AppendAudit(const std::vector<AuditRecord>& records);
  virtual absl::StatusOr<std::vector<AuditRecord>> QueryAudit(const AuditQuery& query);
  virtual absl::StatusOr<int64_t> PruneAudit(std::chrono::system_clock::time_point before);

  // The allocation history: every ledger change Commit (and the ledger maintenance of any
  // other writer) made, and every change of a device's own unhealthy taint in a ResourceSlice
  // write, kept durably with the change itself. ReadAllocationHistory returns the ledger now and
  // the changes of both kinds recorded after `since`; PruneAllocationHistory drops changes older
  // than `before` (the ledger and newer history stay exact) and says how many. Stores without a
  // history answer Unimplemented.
  virtual absl::StatusOr<AllocationHistory> ReadAllocationHistory(
      std::chrono::system_clock::time_point since);
  virtual absl::StatusOr<int64_t> PruneAllocationHistory(
      std::chrono::system_clock::time_point before);
  // One device's part of it: the ledger rows holding the device now and its changes after
  // `since`, newest first, at most `limit` of them (`*truncated` set when there were more).
  virtual absl::StatusOr<AllocationHistory> ReadDeviceHistory(
      const std::string& driver, const std::string& pool, const std::string& device,
      std::chrono::system_clock::time_point since, int64_t limit, bool* truncated);

  // Node leases: when each node's agent was last heard, by whichever replica heard it, so that
  // every replica's node monitor sees every heartbeat. RenewNodeLeases records a time per node
  // (a lease only moves forward: an older time than the stored one changes nothing) in one
  // statement; NodeLeases reads them all. A node's lease goes with the Node. Stores that keep
  // none answer Unimplemented (a single server then judges by what it heard itself).
  virtual absl::Status RenewNodeLeases(
      const std::map<std::string, std::chrono::system_clock::time_point>& renewals);
  virtual absl::StatusOr<std::map<std::string, std::chrono::system_clock::time_point>> NodeLeases();
};

}  // namespace qm::store
