#pragma once

// The agent's record of what it has prepared, kept in `<state-dir>/checkpoint.json` so a
// restarted agent knows which claims it holds (it tells the server, which answers with only the
// differences), neither preparing a claim twice nor leaking one whose workload went away while
// it was down. Written atomically (temporary file, fsync, rename) after every change.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/mig.h"

namespace qm::agent {

struct PreparedDeviceRecord {
  std::string request;
  std::string pool;
  std::string device;
  std::string share_id;
  std::vector<std::string> cdi_device_ids;
  // The MIG instance created for the device (a placement published with the dynamic MIG
  // strategy): destroyed at unprepare, whether or not the agent restarted in between.
  std::optional<MigInstance> mig_instance = std::nullopt;
  bool operator==(const PreparedDeviceRecord&) const = default;
};

struct PreparedClaim {
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string allocation_id;  // the allocation the devices were prepared for
  std::vector<PreparedDeviceRecord> devices;
  bool reported = false;    // the server acknowledged ReportPrepared
  bool mps_daemon = false;  // an MPS control daemon was started for it (mps.h): quit at unprepare
  bool operator==(const PreparedClaim&) const = default;
};

// A claim unprepared whose ReportUnprepared has not been acknowledged yet.
struct UnpreparedClaim {
  std::string namespace_;
  std::string name;
  std::string uid;
  bool operator==(const UnpreparedClaim&) const = default;
};

struct CheckpointData {
  std::string node;
  // The resource_version of the last assignment message processed.
  int64_t resource_version = 0;
  std::map<std::string, PreparedClaim> claims;        // by uid
  std::map<std::string, UnpreparedClaim> unreported;  // by uid
  bool operator==(const CheckpointData&) const = default;
};

std::string EncodeCheckpoint(const CheckpointData& data);
// InvalidArgument when `text` is not a checkpoint this version wrote.
absl::StatusOr<CheckpointData> DecodeCheckpoint(const std::string& text);

// The checkpoint file of one agent.
class Checkpoint {
 public:
  explicit Checkpoint(std::string path) : path_(std::move(path)) {}
  // The stored data; empty data (for `node`) when there is no file yet. InvalidArgument when the
  // file is corrupt or belongs to another node (the caller decides what to do about it).
  absl::StatusOr<CheckpointData> Load(const std::string& node) const;
  absl::Status Save(const CheckpointData& data) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace qm::agent
