#pragma once

// What a device event means for the devices the agent publishes, as NVIDIA's device plugin and
// DRA driver decide it: an XID critical error makes the GPU (or, when the event names a GPU and
// compute instance, that MIG device) unhealthy, except the XIDs that applications cause (13
// graphics engine exception, 31 GPU memory page fault, 43 GPU stopped processing, 45 preemptive
// cleanup, 68 video processor exception, 109 context switch timeout), which are ignored by
// default; a double-bit ECC error makes it unhealthy too; a single-bit (corrected) ECC error
// changes nothing. The server taints an unhealthy device (reason XidCriticalError or
// DoubleBitEccError: NoExecute).

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/inventory.h"

namespace qm::agent {

// 13, 31, 43, 45, 68, 109.
std::set<uint64_t> DefaultIgnoredXids();

// Parses a comma-separated list of XIDs ("13,31,43"); "" is the empty set. InvalidArgument
// naming the bad entry.
absl::StatusOr<std::set<uint64_t>> ParseXidList(const std::string& text);

struct HealthChange {
  std::vector<std::string> devices;  // published device names that became unhealthy
  std::string reason;                // XidCriticalError or DoubleBitEccError
  std::string message;               // "XID 79 on GPU-...: GPU has fallen off the bus"
};

// The devices of `inventory` that `event` makes unhealthy, with the reason. nullopt when the
// event changes nothing: an ignored XID, a corrected ECC error, another event type, or a GPU
// the inventory does not publish.
std::optional<HealthChange> ClassifyEvent(const DeviceEvent& event, const Inventory& inventory,
                                          const std::set<uint64_t>& ignored_xids);

}  // namespace qm::agent
