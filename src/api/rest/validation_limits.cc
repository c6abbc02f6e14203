#include "api/rest/validation_limits.h"

#include <atomic>

namespace qm::api {
namespace {

std::atomic<size_t> max_devices_per_slice{ValidationLimits{}.max_devices_per_slice};
std::atomic<size_t> max_results_per_claim{ValidationLimits{}.max_results_per_claim};

}  // namespace

ValidationLimits CurrentValidationLimits() {
  return {max_devices_per_slice.load(std::memory_order_relaxed),
          max_results_per_claim.load(std::memory_order_relaxed)};
}

void SetValidationLimits(const ValidationLimits& limits) {
  max_devices_per_slice.store(limits.max_devices_per_slice, std::memory_order_relaxed);
  max_results_per_claim.store(limits.max_results_per_claim, std::memory_order_relaxed);
}

}  // namespace qm::api
