#pragma once

// What a node agent knows about its machine: the devices it publishes (as ResourceSlice
// devices of one driver), what preparing each of them takes (UUID, device nodes), and the node
// labels and capacity derived from them. A DeviceSource discovers it: simulated from a YAML file
// today (simulated_source.h), NVML on real machines later, behind the same interface.

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/dra.h"

namespace qm::agent {

// The driver name NVIDIA's DRA driver publishes GPUs under; the seed DeviceClasses select it.
inline constexpr char kGpuDriver[] = "gpu.nvidia.com";

// What preparing one published device needs.
struct LocalDevice {
  std::string uuid;                       // "GPU-6513270e-..." (or "MIG-..." for a MIG device)
  int index = 0;                          // the GPU's index (its /dev/nvidia<minor>)
  std::string parent_uuid;                // MIG devices: the GPU they are carved from
  std::vector<std::string> device_nodes;  // device files the container needs
};

struct Inventory {
  std::string driver = kGpuDriver;
  // Published in one pool named after the node, in this order.
  std::vector<model::Device> devices;
  std::vector<model::CounterSet> shared_counters;
  std::map<std::string, LocalDevice> local;  // by device name
  // Devices to report unhealthy, by name, with the reason (e.g. XidCriticalError).
  std::map<std::string, std::string> unhealthy;
  // Device files every container with a device of this driver needs (/dev/nvidiactl, ...).
  std::vector<std::string> common_device_nodes;
  // GPU Feature Discovery style labels (nvidia.com/gpu.product, ...) and node capacity
  // ("nvidia.com/gpu": "4").
  std::map<std::string, std::string> node_labels;
  std::map<std::string, std::string> node_capacity;
};

// Finds the devices of the machine. Implementations are used from one thread at a time.
class DeviceSource {
 public:
  virtual ~DeviceSource() = default;
  // The current inventory. Called at every (re)connection, so changes since the last one are
  // published.
  virtual absl::StatusOr<Inventory> Discover() = 0;
};

}  // namespace qm::agent
