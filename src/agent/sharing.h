#pragma once

// Opaque device configs of claims and classes, in the format NVIDIA's DRA driver reads
// (apiVersion resource.nvidia.com/v1beta1; kind GpuConfig for whole GPUs, MigDeviceConfig for
// MIG devices), e.g.
//
//   config:
//   - requests: [gpu]
//     opaque:
//       driver: gpu.nvidia.com
//       parameters:
//         apiVersion: resource.nvidia.com/v1beta1
//         kind: GpuConfig
//         sharing:
//           strategy: MPS                     # or TimeSlicing
//           mpsConfig:
//             defaultActiveThreadPercentage: 50
//             defaultPinnedDeviceMemoryLimit: 10Gi
//             defaultPerDevicePinnedMemoryLimit: {"0": 5Gi}   # by GPU index or UUID
//           # timeSlicingConfig: {interval: Long}              # Default, Short, Medium, Long
//
// Parsing is strict, as NVIDIA's driver decodes strictly: an unknown field, a wrong kind or a
// value out of range is an error naming the field, and the claim is not prepared.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/quantity.h"

namespace qm::agent {

inline constexpr char kNvidiaConfigApiVersion[] = "resource.nvidia.com/v1beta1";

// One opaque config as the server sends it (qm.agent.v1.OpaqueConfig).
struct OpaqueConfig {
  std::string source;                 // FromClass or FromClaim
  std::vector<std::string> requests;  // empty: every request
  std::string driver;
  std::string parameters_json;
};

struct SharingConfig {
  enum class Strategy { kNone, kTimeSlicing, kMps };
  Strategy strategy = Strategy::kNone;
  std::string interval = "Default";             // TimeSlicing: Default, Short, Medium or Long
  std::optional<int> active_thread_percentage;  // MPS: 1..100
  std::optional<Quantity> pinned_memory_limit;  // MPS: for every device
  std::map<std::string, Quantity> per_device_pinned_memory_limit;  // key: GPU index or UUID
};

struct DeviceConfig {
  std::string kind;  // GpuConfig or MigDeviceConfig
  SharingConfig sharing;
};

// Parses the parameters of one opaque config. InvalidArgument("sharing.strategy: ...") when
// they are not a valid GpuConfig or MigDeviceConfig.
absl::StatusOr<DeviceConfig> ParseDeviceConfig(const std::string& parameters_json);

// The config that applies to the device allocated for `request` ("gpu", or "gpu/a100" for a
// subrequest): of `configs` for `driver`, class configs before claim configs, the last one
// naming the request (or no request) wins, as in NVIDIA's driver. nullptr: none.
const OpaqueConfig* ConfigForRequest(const std::vector<OpaqueConfig>& configs,
                                     const std::string& driver, const std::string& request);

}  // namespace qm::agent
