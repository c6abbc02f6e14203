#pragma once

// Prepares and unprepares claims on the node: a CDI spec per claim (cdi.h) and the checkpoint
// (checkpoint.h) kept in step with the files, so that whatever the agent is told, and wherever it
// is interrupted, it neither prepares a claim twice nor leaves a spec behind:
//  * Prepare writes the spec, then the checkpoint. A crash in between leaves a spec the
//    checkpoint does not know; Recover() removes it at start (the server sends the claim again if
//    it is still assigned).
//  * Unprepare removes the spec, then the checkpoint entry. A claim whose spec is gone at start is
//    dropped from the checkpoint by Recover(), so it is prepared again if still assigned.
//  * MIG placements (the dynamic MIG strategy, mig.h): Prepare creates each placement's instance
//    first and records the instances in the checkpoint before it writes the spec, so a crash
//    after that leaves a claim without spec, which Recover() drops after destroying its
//    instances. Any failure of the prepare destroys what it created. Unprepare destroys the
//    instances first; when one cannot be destroyed (still in use) nothing else changes and the
//    error is returned (the claim stays prepared).
// Not thread-safe: the agent calls it from its session thread only.

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/checkpoint.h"
#include "agent/inventory.h"
#include "agent/mps.h"
#include "agent/sharing.h"
#include "agent/timeslice.h"

namespace qm::agent {

// One claim to prepare, as the server assigned it (the agent's drivers only).
struct ClaimAssignment {
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string allocation_id;
  struct Device {
    std::string request;
    std::string driver;
    std::string pool;
    std::string device;
    std::string share_id;
    // Consumable-capacity share: what the share takes ("memory": "10Gi").
    std::map<std::string, std::string> consumed_capacity;
  };
  std::vector<Device> devices;
  // The opaque configs of the claim and its classes (GpuConfig, MigDeviceConfig: sharing.h).
  std::vector<OpaqueConfig> configs;
};

// The outcome of Prepare: per device, its CDI device IDs, or an error for the claim.
struct PrepareOutcome {
  std::vector<PreparedDeviceRecord> devices;
  std::string error;              // set: nothing was prepared
  bool already_prepared = false;  // held before with this allocation: nothing was done
};

class Preparer {
 public:
  // `data` is the loaded checkpoint, owned by the caller and kept current here; `checkpoint`
  // persists it.
  Preparer(std::string node, std::string pool, std::string cdi_dir, CheckpointData* data,
           const Checkpoint* checkpoint);

  // The devices this node publishes (what a claim may name).
  void SetInventory(Inventory inventory);

  // Where the MPS state of claims with an MPS sharing config is kept: <dir>/<claim uid>/pipe
  // (mounted into the claim's containers) and <dir>/<claim uid>/log. Default /run/qm-agent/mps.
  void SetMpsRoot(std::string dir) { mps_root_ = std::move(dir); }

  // Starts an MPS control daemon for each claim with an MPS sharing config (and quits it at
  // unprepare); a daemon that cannot start fails the claim. Not owned; nullptr (the default):
  // no daemons, only the env and the pipe directory.
  void SetMpsControl(const MpsControl* mps) { mps_ = mps; }

  // Sets the compute time slice of each whole GPU of a claim with a TimeSlicing sharing config
  // (timeslice.h) before its spec is written; a refusal fails the claim (nothing is prepared).
  // Not owned; nullptr (the default): only the env (QM_DEVICE_<n>_TIMESLICE_INTERVAL).
  void SetTimeSlicer(const TimeSlicer* timeslicer) { timeslicer_ = timeslicer; }

  // Creates the MIG instances of the placements a claim got (dynamic MIG strategy) and destroys
  // them at unprepare. Not owned; nullptr (the default): a claim with a placement fails, and so
  // does the unprepare of a claim that holds an instance. Set it before Recover, which tells it
  // which instances the checkpoint holds.
  void SetMigInstances(MigInstanceManager* mig) { mig_ = mig; }

  // Brings the files and the checkpoint into agreement after a start: specs of ours that the
  // checkpoint does not list are removed; checkpointed claims whose spec is missing are dropped;
  // MPS directories of claims not held are removed, their daemons told to quit (call
  // SetMpsRoot and SetMpsControl first); MIG instances of dropped claims are destroyed, those of
  // held claims handed to MigInstanceManager::Hold.
  absl::Status Recover();

  // Prepares `claim`: idempotent for the allocation it is held with; a claim held for another
  // allocation is unprepared first. Devices must be of this node's driver and pool and be
  // published; otherwise the outcome carries an error and nothing is written. A failure to write
  // the spec or the checkpoint is an error Status (nothing is held then).
  absl::StatusOr<PrepareOutcome> Prepare(const ClaimAssignment& claim);

  // Unprepares claim `uid`: destroys its MIG instances, removes its spec and forgets it (and
  // records it as unreported). OK when it is not held. An instance that cannot be destroyed is an
  // error, and the claim stays held (without the instances that were destroyed).
  absl::Status Unprepare(const std::string& uid, const std::string& namespace_,
                         const std::string& name);

  // The server acknowledged the report of claim `uid` (prepared or unprepared).
  absl::Status MarkPreparedReported(const std::string& uid);
  absl::Status MarkUnpreparedReported(const std::string& uid);

  absl::Status SetResourceVersion(int64_t rv);

  const CheckpointData& data() const { return *data_; }

 private:
  absl::Status Save();

  const std::string node_;
  const std::string pool_;
  const std::string cdi_dir_;
  CheckpointData* data_;
  const Checkpoint* checkpoint_;
  Inventory inventory_;
  std::string mps_root_ = "/run/qm-agent/mps";
  const MpsControl* mps_ = nullptr;
  const TimeSlicer* timeslicer_ = nullptr;
  MigInstanceManager* mig_ = nullptr;
};

}  // namespace qm::agent
