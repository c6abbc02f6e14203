#pragma once

// The size limits of DRA objects that validation applies, REST and gRPC alike: Kubernetes' own
// unless the server was started with --max-devices-per-slice or --max-results-per-claim, for
// fleets whose nodes carry more devices than Kubernetes allows in one slice or claim. The
// allocator has no ceiling of its own; the scheduler gives it max_results_per_claim, so it never
// allocates what the API would refuse to store.

#include <cstddef>

namespace qm::api {

struct ValidationLimits {
  // ResourceSlice spec.devices (Kubernetes' ResourceSliceMaxDevices); half as many when a
  // device uses taints, counters or list attributes (Kubernetes: 128 and 64).
  size_t max_devices_per_slice = 128;
  // ResourceClaim status.allocation.devices.results (Kubernetes' AllocationResultsMaxSize).
  size_t max_results_per_claim = 32;
};

// The limits in force. Thread-safe; SetValidationLimits is meant for start-up (and tests),
// before requests arrive.
ValidationLimits CurrentValidationLimits();
void SetValidationLimits(const ValidationLimits& limits);

}  // namespace qm::api
