#pragma once

// GPU discovery through NVML (the NVIDIA Management Library), the default DeviceSource of
// `qm-agent`. The library is opened with dlopen at run time (`libnvidia-ml.so.1`, or
// `--nvml-library PATH`), so the agent builds and starts without CUDA or NVML installed and
// says why when the library is missing instead of failing to load.
//
// What it publishes matches SimulatedSource (and NVIDIA's DRA driver): per GPU the attributes
// productName, brand, architecture, cudaComputeCapability, driverVersion, cudaDriverVersion,
// uuid, pcieBusID, resource.kubernetes.io/pcieRoot (from sysfs; left out when sysfs does not
// know the device), index, minor, type, and capacity memory.
//
// A GPU in MIG mode is not published as a whole GPU (it cannot be handed out while it is
// partitioned) but, as mig.h describes, either (static MIG strategy, the default) as its MIG
// devices (the GPU instances that exist, as nvidia-smi / mig-parted created them), or (dynamic)
// as every placement of every GPU instance profile it supports
// (nvmlDeviceGetGpuInstanceProfileInfoV, nvmlDeviceGetGpuInstancePossiblePlacements_v2), whose
// instances this source creates and destroys as the MigInstanceManager of the agent
// (nvmlDeviceCreateGpuInstanceWithPlacement, nvmlGpuInstanceCreateComputeInstance,
// nvmlComputeInstanceDestroy, nvmlGpuInstanceDestroy). Either way the devices consume counters of
// a counter set of their parent GPU (`gpu-<index>-counter-set`), so the pool describes the
// partitioning as KEP-4815 partitionable devices do. With the dynamic strategy the placements
// that overlap a GPU instance the agent does not hold (made by someone else) are left out. A MIG
// device's container also needs the capability device files of its GPU and compute instance
// (/dev/nvidia-caps/nvidia-cap<N>, N from
// /proc/driver/nvidia/capabilities/gpu<minor>/mig/gi<G>[/ci<C>]/access).

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <tuple>

#include "absl/status/statusor.h"
#include "agent/inventory.h"
#include "agent/mig.h"
#include "common/mutex.h"

namespace qm::agent {

inline constexpr char kDefaultNvmlLibrary[] = "libnvidia-ml.so.1";

class NvmlSource final : public DeviceSource, public MigInstanceManager {
 public:
  // Opens `library` and resolves the NVML functions the agent uses. FailedPrecondition naming
  // the library and dlerror() when it cannot be loaded or lacks a function. `sysfs_root` is
  // where PCI devices are looked up for their PCIe root, `proc_root` where the driver lists
  // the capability device files of MIG devices ("/sys", "/proc"; tests point them elsewhere).
  static absl::StatusOr<std::unique_ptr<NvmlSource>> Open(const std::string& library,
                                                          const std::string& sysfs_root = "/sys",
                                                          const std::string& proc_root = "/proc");
  ~NvmlSource() override;

  // Initialises NVML, reads every GPU (and MIG device) and shuts NVML down again, so a driver
  // reload between reconnections is picked up.
  absl::StatusOr<Inventory> Discover() override;

  // Registers for XID critical and ECC error events on every GPU that supports them
  // (nvmlDeviceRegisterEvents) and reports each (nvmlEventSetWait_v2, one second at a time) until
  // `stop`. Unimplemented when the library lacks the event functions or no GPU supports the
  // events; Unavailable when NVML fails (the GPU is lost, the driver went away).
  absl::Status WatchEvents(const std::function<void(const DeviceEvent&)>& on_event,
                           const std::atomic<bool>& stop) override;

  // How MIG-mode GPUs are published (static by default). FailedPrecondition naming the missing
  // functions when `strategy` is dynamic and the library lacks the MIG management functions.
  // Call before the first Discover.
  absl::Status SetMigStrategy(MigStrategy strategy);

  // This source, when the library has the MIG management functions (whatever the strategy, so
  // that instances a checkpoint holds can be destroyed after a change of strategy); else nullptr.
  MigInstanceManager* mig_instances() override;

  // MigInstanceManager. Each call initialises NVML and shuts it down again.
  absl::StatusOr<MigInstance> Create(const LocalDevice& device) override;
  absl::Status Destroy(const MigInstance& instance) override;
  void Hold(const MigInstance& instance) override;

  struct Api;  // the resolved function pointers (nvml_source_internal.h)

 private:
  NvmlSource(void* handle, std::unique_ptr<Api> api, std::string sysfs_root, std::string proc_root);

  // The agent's instances: GPU UUID, GPU instance id, profile id, placement start.
  using InstanceKey = std::tuple<std::string, int64_t, int64_t, int64_t>;
  static InstanceKey KeyOf(const MigInstance& m) {
    return {m.parent_uuid, m.gpu_instance_id, m.profile_id, m.start};
  }
  bool Holds(const InstanceKey& key) const;

  void* handle_;
  std::unique_ptr<Api> api_;
  const std::string sysfs_root_;
  const std::string proc_root_;
  MigStrategy mig_strategy_ = MigStrategy::kStatic;
  mutable qm::Mutex mu_;
  std::set<InstanceKey> held_ ABSL_GUARDED_BY(mu_);
};

}  // namespace qm::agent
