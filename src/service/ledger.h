#pragma once

// The device-allocation ledger rows (ARCHITECTURE.md §4) that stand for a claim's allocation:
// one per allocated device, written in the same store transaction as the allocation itself, by
// the scheduler and by the object service when a client writes an allocation.

#include <optional>
#include <string>
#include <vector>

#include "model/dra.h"
#include "store/store.h"

namespace qm::service {

// One row per result of `allocation`, held by the claim `claim_uid`.
std::vector<store::DeviceClaim> LedgerRows(const model::AllocationResult& allocation,
                                           const std::string& claim_uid);

// The status.allocation of a ResourceClaim's stored body (JSON text without metadata); nullopt
// when it has none (or, which validation prevents, one that does not decode).
std::optional<model::AllocationResult> ClaimAllocation(const std::string& body);

}  // namespace qm::service
