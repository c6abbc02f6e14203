#pragma once

// How a MIG device is published, the same for NVML discovery and `--simulate`, in one of two
// strategies (MigStrategy; NvmlSource::SetMigStrategy, `mig: dynamic` in a simulate file):
//
//  * static (the default): the MIG devices that exist (made with `nvidia-smi mig` or
//    mig-parted) are published, each a device of type `mig` named `gpu-<i>-mig-<profile>-<n>`
//    that consumes counters of its GPU's counter set `gpu-<i>-counter-set` (memory,
//    compute-slices), as KEP-4815 partitionable devices do. The counter set holds what all MIG
//    devices of the GPU together can take, so the allocator never hands out more of a GPU than
//    it has, whichever way it is partitioned.
//  * dynamic (NVIDIA's DynamicMIG): every placement of every MIG profile the GPU supports is
//    published, `gpu-<i>-mig-<profile>-at-<start>`, and the agent creates the GPU instance (and
//    a compute instance spanning it) when a claim that got the placement is prepared, and
//    destroys it at unprepare (MigInstanceManager). Besides memory and compute-slices the
//    counter set holds one counter per memory slice, `memory-slice-<k>` (value 1), and a
//    placement consumes the counters of the memory slices it covers (start .. start+size-1):
//    two placements that overlap cannot both be allocated, which is exactly what the GPU
//    allows (NVIDIA's DRA driver models it the same way).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/quantity.h"
#include "model/dra.h"

namespace qm::agent {

struct LocalDevice;

enum class MigStrategy { kStatic, kDynamic };

// "static" or "dynamic"; InvalidArgument naming the accepted values otherwise.
absl::StatusOr<MigStrategy> ParseMigStrategy(const std::string& text);

// "gpu-1" -> "gpu-1-counter-set".
std::string MigCounterSetName(const std::string& gpu_name);

// The counter set of GPU `gpu_name`: its `memory` and, as `compute-slices`, the most MIG devices
// it can hold (7 on A100/H100, 4 on A30: one per GPU instance slice).
model::CounterSet MigCounterSet(const std::string& gpu_name, const Quantity& memory,
                                int64_t compute_slices);

// "memory-slice-3".
std::string MemorySliceCounter(int64_t slice);

// The counter set of a GPU published with the dynamic strategy: MigCounterSet plus
// `memory-slice-0` .. `memory-slice-<memory_slices - 1>`, each 1.
model::CounterSet DynamicMigCounterSet(const std::string& gpu_name, const Quantity& memory,
                                       int64_t compute_slices, int64_t memory_slices);

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

// One placement of one GPU instance profile (dynamic strategy).
struct MigPlacementSpec {
  std::string gpu_name;  // "gpu-1"
  std::string parent_uuid;
  int64_t parent_index = 0;
  std::string profile;     // "1g.5gb" (or "1g.5gb+me")
  int64_t profile_id = 0;  // NVML's GPU instance profile id
  int64_t start = 0;       // first memory slice
  int64_t size = 0;        // memory slices covered
  Quantity memory;
  int64_t multiprocessors = 0;
  int64_t gpu_instance_slices = 0;
};

// "gpu-0-mig-1g-5gb-at-3": the profile with every character other than a letter or digit as
// '-', and the placement's start.
std::string MigPlacementDeviceName(const std::string& gpu_name, const std::string& profile,
                                   int64_t start);

// The placement's device: type `mig`, parentUUID, parentIndex, profile, placementStart,
// placementSize (no uuid: the instance does not exist before it is prepared), capacities memory
// and multiprocessors, consuming memory, compute-slices and its memory-slice-<k> counters.
model::Device NewMigPlacementDevice(const MigPlacementSpec& spec);

// The standard placements of a GPU with `compute_slices` GPU instance slices (7: A100, H100,
// H200, B200; 4: A30) and `memory`, for simulated GPUs: profiles 1g, 2g, 3g, 4g and 7g (A30:
// 1g, 2g, 4g) at the starts NVIDIA's drivers allow, over 8 (A30: 4) memory slices, with the
// memory of the slices each covers. Empty for other slice counts.
std::vector<MigPlacementSpec> StandardMigPlacements(const std::string& gpu_name,
                                                    const std::string& parent_uuid,
                                                    int64_t parent_index, int64_t compute_slices,
                                                    const Quantity& memory);

// A GPU instance (with one compute instance spanning it) the agent created for a claim.
struct MigInstance {
  std::string parent_uuid;  // the GPU
  int64_t profile_id = 0;   // GPU instance profile and placement it was created with
  int64_t start = 0;
  int64_t size = 0;
  int64_t gpu_instance_id = -1;
  int64_t compute_instance_id = -1;
  std::string uuid;                       // the MIG device's UUID, "MIG-..."
  std::vector<std::string> device_nodes;  // the GPU's and the capability device files
  bool operator==(const MigInstance&) const = default;
};

// Creates and destroys the MIG instances of dynamically published placements. Implemented by
// the device sources that publish them (NvmlSource, SimulatedSource); called from the agent's
// session thread, concurrently with nothing but the source's own WatchEvents.
class MigInstanceManager {
 public:
  virtual ~MigInstanceManager() = default;

  // Creates the GPU instance of placement `device` (a LocalDevice with mig_placement) and a
  // compute instance spanning it, and finds its MIG device. On any error nothing stays created:
  // ResourceExhausted when the placement overlaps a GPU instance that exists, FailedPrecondition
  // for a device that is no placement or a GPU that is not in MIG mode, Unavailable (with the
  // NVML call and its error) for anything else.
  virtual absl::StatusOr<MigInstance> Create(const LocalDevice& device) = 0;

  // Destroys `instance` (its compute instance, then its GPU instance). OK when it is gone
  // already (or its id now names another placement: that instance is not ours). An error
  // (the instance is in use, NVML fails) leaves it as it was.
  virtual absl::Status Destroy(const MigInstance& instance) = 0;

  // Tells the manager that `instance`, created before (found in the checkpoint at start), is
  // the agent's: its placements stay published. Instances the agent neither created nor holds
  // are someone else's: the placements they overlap are not published.
  virtual void Hold(const MigInstance& instance) = 0;
};

}  // namespace qm::agent
