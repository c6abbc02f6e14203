#include "agent/preparer.h"

#include <sys/stat.h>

#include <set>

#include "absl/strings/str_join.h"
#include "agent/cdi.h"
#include "common/status.h"
#include "model/names.h"
#include "spdlog/spdlog.h"

namespace qm::agent {

Preparer::Preparer(std::string node, std::string pool, std::string cdi_dir, CheckpointData* data,
                   const Checkpoint* checkpoint)
    : node_(std::move(node)),
      pool_(std::move(pool)),
      cdi_dir_(std::move(cdi_dir)),
      data_(data),
      checkpoint_(checkpoint) {}

void Preparer::SetInventory(Inventory inventory) { inventory_ = std::move(inventory); }

absl::Status Preparer::Save() { return checkpoint_->Save(*data_); }

absl::Status Preparer::Recover() {
  bool changed = false;
  std::set<std::string> on_disk;
  for (const auto& uid : ListCdiSpecs(cdi_dir_)) {
    on_disk.insert(uid);
    if (data_->claims.contains(uid)) continue;
    spdlog::info("removing CDI spec of claim {}: not in the checkpoint (an interrupted prepare)",
                 uid);
    QM_RETURN_IF_ERROR(RemoveCdiSpec(cdi_dir_, uid));
  }
  for (auto it = data_->claims.begin(); it != data_->claims.end();) {
    if (on_disk.contains(it->first)) {
      ++it;
      continue;
    }
    spdlog::info("forgetting claim {}/{}: its CDI spec is gone (an interrupted unprepare)",
                 it->second.namespace_, it->second.name);
    it = data_->claims.erase(it);
    changed = true;
  }
  return changed ? Save() : absl::OkStatus();
}

absl::StatusOr<PrepareOutcome> Preparer::Prepare(const ClaimAssignment& claim) {
  PrepareOutcome out;
  if (!IsSafeClaimUid(claim.uid)) {
    out.error = "claim uid \"" + claim.uid + "\" is not a UUID";
    return out;
  }
  if (auto held = data_->claims.find(claim.uid); held != data_->claims.end()) {
    if (held->second.allocation_id == claim.allocation_id) {
      out.devices = held->second.devices;
      out.already_prepared = true;
      return out;
    }
    QM_RETURN_IF_ERROR(Unprepare(claim.uid, held->second.namespace_, held->second.name));
  }
  if (claim.devices.empty()) {
    out.error = "no devices of driver " + inventory_.driver + " are allocated to the claim";
    return out;
  }
  CdiSpec spec;
  spec.annotations = {{"quartermaster.io/claim", claim.namespace_ + "/" + claim.name},
                      {"quartermaster.io/node", node_}};
  std::vector<std::string> uuids;
  std::set<std::string> nodes;
  std::vector<std::string> problems;
  for (const auto& d : claim.devices) {
    const std::string id = d.driver + "/" + d.pool + "/" + d.device;
    if (d.driver != inventory_.driver || d.pool != pool_) {
      problems.push_back(id + ": not a device of this agent (driver " + inventory_.driver +
                         ", pool " + pool_ + ")");
      continue;
    }
    auto local = inventory_.local.find(d.device);
    if (local == inventory_.local.end()) {
      problems.push_back(id + ": not published by this agent");
      continue;
    }
    // CDI device names allow [A-Za-z0-9_.:-]; a share id (a UUID) keeps shares apart.
    std::string name = claim.uid + "-" + d.device;
    if (!d.share_id.empty()) {
      if (!IsSafeClaimUid(d.share_id)) {
        problems.push_back(id + ": share id \"" + d.share_id + "\" is not a UUID");
        continue;
      }
      name += "-" + d.share_id;
    }
    CdiDevice cdi;
    cdi.name = name;
    cdi.device_nodes = local->second.device_nodes;
    cdi.env = {"QM_DEVICE_" + std::to_string(spec.devices.size()) + "=" + local->second.uuid};
    spec.devices.push_back(std::move(cdi));
    uuids.push_back(local->second.uuid);
    out.devices.push_back(PreparedDeviceRecord{
        d.request, d.pool, d.device, d.share_id, {QualifiedDeviceId(spec.kind, name)}});
  }
  if (!problems.empty()) {
    out.devices.clear();
    out.error = absl::StrJoin(problems, "; ");
    return out;
  }
  spec.env = {"NVIDIA_VISIBLE_DEVICES=" + absl::StrJoin(uuids, ","),
              "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
              "QM_CLAIM=" + claim.namespace_ + "/" + claim.name};
  spec.device_nodes = inventory_.common_device_nodes;
  mkdir(cdi_dir_.c_str(), 0755);
  QM_RETURN_IF_ERROR(WriteCdiSpec(cdi_dir_, claim.uid, spec));
  PreparedClaim record;
  record.namespace_ = claim.namespace_;
  record.name = claim.name;
  record.uid = claim.uid;
  record.allocation_id = claim.allocation_id;
  record.devices = out.devices;
  data_->claims[claim.uid] = std::move(record);
  data_->unreported.erase(claim.uid);
  QM_RETURN_IF_ERROR(Save());
  return out;
}

absl::Status Preparer::Unprepare(const std::string& uid, const std::string& namespace_,
                                 const std::string& name) {
  if (!IsSafeClaimUid(uid)) return absl::InvalidArgumentError("claim uid is not a UUID");
  QM_RETURN_IF_ERROR(RemoveCdiSpec(cdi_dir_, uid));
  data_->claims.erase(uid);
  data_->unreported[uid] = UnpreparedClaim{namespace_, name, uid};
  return Save();
}

absl::Status Preparer::MarkPreparedReported(const std::string& uid) {
  auto it = data_->claims.find(uid);
  if (it == data_->claims.end() || it->second.reported) return absl::OkStatus();
  it->second.reported = true;
  return Save();
}

absl::Status Preparer::MarkUnpreparedReported(const std::string& uid) {
  if (data_->unreported.erase(uid) == 0) return absl::OkStatus();
  return Save();
}

absl::Status Preparer::SetResourceVersion(int64_t rv) {
  if (rv <= data_->resource_version) return absl::OkStatus();
  data_->resource_version = rv;
  return Save();
}

}  // namespace qm::agent
