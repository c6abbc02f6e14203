#pragma once

// `qm-agent --simulate FILE`: GPUs described in YAML instead of discovered through NVML, for
// machines without GPUs, tests and demos. The devices look as NVIDIA's DRA driver publishes
// them (driver gpu.nvidia.com), so the same DeviceClasses and claims work against simulated and
// real nodes.
//
//   driverVersion: "560.35.03"     # optional (default shown)
//   cudaDriverVersion: "12.6"      # optional (default shown)
//   gpus:
//   - model: NVIDIA A100-SXM4-80GB # required; architecture and compute capability are known
//     memory: 80Gi                 # required, a quantity
//     count: 4                     # optional, default 1
//     architecture: Ampere         # needed only for models the agent does not know
//     cudaComputeCapability: "8.0" # likewise
//     pcieRoot: pci0000:00         # optional (default pci0000:00)
//     mig: [3g.40gb, 3g.40gb]      # optional: each of these GPUs is split into these MIG devices
//     # or  mig: dynamic             # every MIG placement of the GPU is published, and instances
//                                  # are "created" at prepare (mig.h, the dynamic strategy)
//
// Each GPU gets a stable UUID derived from the node name and its index, so a restarted agent
// publishes the same devices.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/inventory.h"
#include "agent/mig.h"
#include "common/mutex.h"

namespace qm::agent {

struct SimulatedGpus {
  std::string model;
  std::string memory;  // quantity text
  int count = 1;
  std::string architecture;        // empty: from the model
  std::string compute_capability;  // "8.0"; empty: from the model
  std::string pcie_root = "pci0000:00";
  std::vector<std::string> mig;  // MIG profiles per GPU, e.g. "3g.40gb"
  bool mig_dynamic = false;      // `mig: dynamic`: every placement, instances made at prepare
  // Reported unhealthy with this reason (e.g. XidCriticalError); empty: healthy. For tests and
  // demos of the server's health taints; the file is read again at every reconnection.
  std::string unhealthy;
};

struct Simulation {
  std::string driver_version = "560.35.03";
  std::string cuda_driver_version = "12.6";
  std::vector<SimulatedGpus> gpus;
};

// Parses the YAML. InvalidArgument naming the field (`gpus[1].memory: ...`) for anything that
// is missing, malformed or unknown.
absl::StatusOr<Simulation> ParseSimulation(const std::string& yaml);

// The inventory of `simulation` on node `node`. InvalidArgument when a model is unknown and its
// architecture or compute capability is not given.
absl::StatusOr<Inventory> BuildInventory(const Simulation& simulation, const std::string& node);

// Reads and parses the file at every Discover, so edits show at the next reconnection. As the
// MigInstanceManager of `mig: dynamic` GPUs it keeps their instances in memory: Create refuses
// a placement that overlaps one (ResourceExhausted) and names the new MIG device with a new UUID
// (random per run, as a GPU's are); Hold (the checkpoint's instances after a restart) makes them
// known again.
class SimulatedSource final : public DeviceSource, public MigInstanceManager {
 public:
  SimulatedSource(std::string path, std::string node);
  absl::StatusOr<Inventory> Discover() override;

  MigInstanceManager* mig_instances() override { return this; }
  absl::StatusOr<MigInstance> Create(const LocalDevice& device) override;
  absl::Status Destroy(const MigInstance& instance) override;
  void Hold(const MigInstance& instance) override;

 private:
  const std::string path_;
  const std::string node_;
  const std::string nonce_;  // random per source: MIG UUIDs of this run
  qm::Mutex mu_;
  std::vector<MigInstance> instances_ ABSL_GUARDED_BY(mu_);
  int64_t serial_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace qm::agent
