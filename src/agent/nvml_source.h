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
// A GPU in MIG mode is published as its MIG devices (the GPU instances that exist, as
// nvidia-smi / mig-parted created them), not as a whole GPU: the whole GPU cannot be handed out
// while it is partitioned. Each MIG device consumes counters (memory, multiprocessors) of a
// counter set of its parent GPU (`gpu-<index>-counter-set`), so the pool describes the
// partitioning as KEP-4815 partitionable devices do. The agent does not create or destroy
// GPU instances itself. A MIG device's container also needs the capability device files of its
// GPU and compute instance (/dev/nvidia-caps/nvidia-cap<N>, N from
// /proc/driver/nvidia/capabilities/gpu<minor>/mig/gi<G>[/ci<C>]/access).

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "agent/inventory.h"

namespace qm::agent {

inline constexpr char kDefaultNvmlLibrary[] = "libnvidia-ml.so.1";

class NvmlSource final : public DeviceSource {
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

  struct Api;  // the resolved function pointers (nvml_source.cc)

 private:
  NvmlSource(void* handle, std::unique_ptr<Api> api, std::string sysfs_root, std::string proc_root);

  void* handle_;
  std::unique_ptr<Api> api_;
  const std::string sysfs_root_;
  const std::string proc_root_;
};

}  // namespace qm::agent
