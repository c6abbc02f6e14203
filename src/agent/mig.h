#pragma once

// How a MIG device is published, the same for NVML discovery and `--simulate`: a device of type
// `mig` named `gpu-<i>-mig-<profile>-<n>` that consumes counters of its GPU's counter set
// `gpu-<i>-counter-set` (memory, compute-slices), as KEP-4815 partitionable devices do. The
// counter set holds what all MIG devices of the GPU together can take, so the allocator never
// hands out more of a GPU than it has, whichever way it is partitioned.

#include <cstdint>
#include <string>

#include "common/quantity.h"
#include "model/dra.h"

namespace qm::agent {

// "gpu-1" -> "gpu-1-counter-set".
std::string MigCounterSetName(const std::string& gpu_name);

// The counter set of GPU `gpu_name`: its `memory` and, as `compute-slices`, the most MIG devices
// it can hold (7 on A100/H100, 4 on A30: one per GPU instance slice).
model::CounterSet MigCounterSet(const std::string& gpu_name, const Quantity& memory,
                                int64_t compute_slices);

struct MigDeviceSpec {
  std::string gpu_name;     // the parent's device name, "gpu-1"
  std::string parent_uuid;  // "GPU-..."
  int64_t parent_index = 0;
  std::string uuid;     // "MIG-..."
  std::string profile;  // "3g.40gb"
  int64_t nth = 0;      // the how-manieth device of this profile on the GPU
  Quantity memory;
  int64_t multiprocessors = 0;
  int64_t gpu_instance_slices = 0;
};

// The MIG device: its name, the MIG attributes (type, uuid, parentUUID, parentIndex, profile,
// index), capacities memory and multiprocessors, and the counters it consumes. The caller adds
// the attributes it shares with whole GPUs (productName, driverVersion, ...).
model::Device NewMigDevice(const MigDeviceSpec& spec);

}  // namespace qm::agent
