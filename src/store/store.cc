#include "store/store.h"

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

}  // namespace qm::store
