#include "store/store.h"

#include "absl/strings/cord.h"

namespace qm::store {

absl::Status NotFoundError(const model::ResourceKey& key) {
  return absl::NotFoundError(key.resource + " \"" + key.name + "\" not found");
}

absl::Status ConflictError(const model::ResourceKey& key) {
  return absl::AbortedError("Operation cannot be fulfilled on " + key.resource + " \"" + key.name +
                            "\": the object has been modified; please apply your changes to the "
                            "latest version and try again");
}

std::future<absl::StatusOr<std::vector<model::Object>>> Store::CommitAsync(Transaction txn) {
  std::promise<absl::StatusOr<std::vector<model::Object>>> done;
  done.set_value(Commit(txn));
  return done.get_future();
}

absl::Status DeviceTakenError(const DeviceClaim& row) {
  return absl::AbortedError("device " + row.driver + "/" + row.pool + "/" + row.device +
                            " is already allocated to another claim");
}

absl::Status DeviceOvercommittedError(const DeviceClaim& row) {
  return absl::AbortedError("device " + row.driver + "/" + row.pool + "/" + row.device +
                            ": not enough capacity or shared counters left for this allocation");
}

absl::Status QuotaCheckError(const QuotaCheck& check) {
  return absl::ResourceExhaustedError("quota usage of " + check.key + " in namespace " +
                                      check.namespace_ + " would pass " +
                                      std::to_string(check.hard));
}

namespace {
constexpr char kQuotaSetChangedPayload[] = "quartermaster.io/quota-set-changed";
}  // namespace

absl::Status QuotaSetChangedError(const QuotaSetCheck& check) {
  absl::Status status = absl::AbortedError("the resourcequotas of namespace " + check.namespace_ +
                                           " changed since they were read; read them again");
  status.SetPayload(kQuotaSetChangedPayload, absl::Cord(check.namespace_));
  return status;
}

bool IsQuotaSetChanged(const absl::Status& status) {
  return status.GetPayload(kQuotaSetChangedPayload).has_value();
}

absl::StatusOr<std::map<std::string, int64_t>> Store::QuotaUsed(const std::string&) {
  return absl::UnimplementedError("this store keeps no quota usage");
}

}  // namespace qm::store

namespace qm::store {
namespace {
thread_local const AuditRecord* current_audit = nullptr;
}  // namespace

AuditScope::AuditScope(const AuditRecord* record) : previous_(current_audit) {
  current_audit = record;
}

AuditScope::~AuditScope() { current_audit = previous_; }

const AuditRecord* AuditScope::Current() { return current_audit; }

absl::Status Store::AppendAudit(const std::vector<AuditRecord>&) { return absl::OkStatus(); }

absl::StatusOr<std::vector<AuditRecord>> Store::QueryAudit(const AuditQuery&) {
  return absl::UnimplementedError("this store keeps no audit trail");
}

absl::StatusOr<int64_t> Store::PruneAudit(std::chrono::system_clock::time_point) { return 0; }

absl::StatusOr<AllocationHistory> Store::ReadAllocationHistory(
    std::chrono::system_clock::time_point) {
  return absl::UnimplementedError("this store keeps no allocation history");
}

absl::StatusOr<int64_t> Store::PruneAllocationHistory(std::chrono::system_clock::time_point) {
  return absl::UnimplementedError("this store keeps no allocation history");
}

absl::StatusOr<AllocationHistory> Store::ReadDeviceHistory(const std::string&, const std::string&,
                                                           const std::string&,
                                                           std::chrono::system_clock::time_point,
                                                           int64_t, bool*) {
  return absl::UnimplementedError("this store keeps no allocation history");
}

absl::Status Store::RenewNodeLeases(
    const std::map<std::string, std::chrono::system_clock::time_point>&) {
  return absl::UnimplementedError("this store keeps no node leases");
}

absl::StatusOr<std::map<std::string, std::chrono::system_clock::time_point>> Store::NodeLeases() {
  return absl::UnimplementedError("this store keeps no node leases");
}

}  // namespace qm::store
