#pragma once

// What a node agent knows about its machine: the devices it publishes (as ResourceSlice
// devices of one driver), what preparing each of them takes (UUID, device nodes), and the node
// labels and capacity derived from them. A DeviceSource discovers it: simulated from a YAML file
// (simulated_source.h) or through NVML (nvml_source.h), behind the same interface.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/mig.h"
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
  // MIG devices discovered through NVML: their GPU and compute instance ids, which NVML's health
  // events carry; -1 when unknown (whole GPUs, simulated MIG devices).
  int64_t gpu_instance_id = -1;
  int64_t compute_instance_id = -1;
  // A MIG placement published with the dynamic strategy (mig.h): the instance is created at
  // prepare (MigInstanceManager), so `uuid` is empty until then; `device_nodes` holds the GPU's
  // device file, the instance's capability files come with the instance.
  struct MigPlacement {
    int64_t profile_id = 0;  // NVML's GPU instance profile id
    int64_t start = 0;       // memory slices
    int64_t size = 0;
  };
  std::optional<MigPlacement> mig_placement = std::nullopt;
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

// What GPU Feature Discovery's node labels are made of, as NVML reports it (or a simulate file
// describes it): the first GPU's memory, architecture and compute capability stand for all.
struct GpuLabelFacts {
  int64_t count = 0;               // whole GPUs
  std::set<std::string> products;  // product names ("NVIDIA H100 80GB HBM3")
  int64_t first_memory_mib = 0;
  std::string first_architecture;            // "Hopper"
  std::string compute_major, compute_minor;  // "9", "0"
  std::string driver_version;                // "550.54.15"
  std::string cuda_major, cuda_minor;        // the CUDA driver API version: "12", "4"
  bool mig_capable = false;
  bool any_mig = false;  // some GPU has MIG mode on
};

// Sets inv->node_labels as GPU Feature Discovery does (nvidia.com/gpu.product, .count, .memory,
// .family, .compute.*, cuda.driver.*, cuda.runtime.*, mig.capable, mig.strategy; no gpu.*
// label without a GPU) and the node's "nvidia.com/gpu" capacity.
void SetGpuFeatureLabels(const GpuLabelFacts& facts, Inventory* inv);

// A device event as the driver reports it (NVML's nvmlEventData_t): what happened to which GPU,
// and, for a MIG device, which GPU and compute instance. health.h decides what it means.
struct DeviceEvent {
  std::string gpu_uuid;              // the physical GPU's UUID
  uint64_t type = 0;                 // NVML's event type bits (kEventXidCriticalError, ...)
  uint64_t data = 0;                 // the XID for XID events
  int64_t gpu_instance_id = -1;      // -1: not a MIG device's event (the whole GPU)
  int64_t compute_instance_id = -1;  // -1: every compute instance of the GPU instance
};

// nvmlEventType* bits.
inline constexpr uint64_t kEventSingleBitEccError = 0x1;
inline constexpr uint64_t kEventDoubleBitEccError = 0x2;
inline constexpr uint64_t kEventXidCriticalError = 0x8;

// Finds the devices of the machine. Discover is called from one thread at a time; WatchEvents
// runs on a thread of its own, concurrently with Discover.
class DeviceSource {
 public:
  virtual ~DeviceSource() = default;
  // The current inventory. Called at every (re)connection, so changes since the last one are
  // published.
  virtual absl::StatusOr<Inventory> Discover() = 0;
  // Reports device events (XID critical errors, double-bit ECC errors) to `on_event` until
  // `stop` is set (checked at least every second) or it fails. Unimplemented when the source
  // has no events (simulated GPUs, a driver without event support); any other error: the
  // caller may call it again later.
  virtual absl::Status WatchEvents(const std::function<void(const DeviceEvent&)>& on_event,
                                   const std::atomic<bool>& stop) {
    (void)on_event;
    (void)stop;
    return absl::UnimplementedError("this device source reports no events");
  }
  // Creates and destroys the MIG instances of the placements it publishes with the dynamic MIG
  // strategy (mig.h); owned by the source. nullptr when it cannot.
  virtual MigInstanceManager* mig_instances() { return nullptr; }
};

}  // namespace qm::agent
