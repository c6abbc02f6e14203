#include "agent/checkpoint.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "auth/pki.h"

namespace qm::agent {
namespace {

using nlohmann::json;

constexpr int kVersion = 1;

json MigInstanceJson(const MigInstance& m) {
  return {{"parentUUID", m.parent_uuid},
          {"profileID", m.profile_id},
          {"placementStart", m.start},
          {"placementSize", m.size},
          {"gpuInstanceID", m.gpu_instance_id},
          {"computeInstanceID", m.compute_instance_id},
          {"uuid", m.uuid},
          {"deviceNodes", m.device_nodes}};
}

MigInstance MigInstanceFromJson(const json& j) {
  MigInstance m;
  m.parent_uuid = j.at("parentUUID").get<std::string>();
  m.profile_id = j.at("profileID").get<int64_t>();
  m.start = j.at("placementStart").get<int64_t>();
  m.size = j.at("placementSize").get<int64_t>();
  m.gpu_instance_id = j.at("gpuInstanceID").get<int64_t>();
  m.compute_instance_id = j.at("computeInstanceID").get<int64_t>();
  m.uuid = j.value("uuid", "");
  m.device_nodes = j.value("deviceNodes", std::vector<std::string>{});
  return m;
}

}  // namespace

std::string EncodeCheckpoint(const CheckpointData& data) {
  json claims = json::object();
  for (const auto& [uid, c] : data.claims) {
    json devices = json::array();
    for (const auto& d : c.devices) {
      json device = {{"request", d.request},
                     {"pool", d.pool},
                     {"device", d.device},
                     {"shareID", d.share_id},
                     {"cdiDeviceIDs", d.cdi_device_ids}};
      if (d.mig_instance) device["migInstance"] = MigInstanceJson(*d.mig_instance);
      devices.push_back(std::move(device));
    }
    claims[uid] = {{"namespace", c.namespace_},
                   {"name", c.name},
                   {"allocationID", c.allocation_id},
                   {"devices", std::move(devices)},
                   {"reported", c.reported}};
    if (c.mps_daemon) claims[uid]["mpsDaemon"] = true;
  }
  json unreported = json::object();
  for (const auto& [uid, c] : data.unreported) {
    unreported[uid] = {{"namespace", c.namespace_}, {"name", c.name}};
  }
  json out = {{"version", kVersion},
              {"node", data.node},
              {"resourceVersion", data.resource_version},
              {"claims", std::move(claims)},
              {"unreportedUnprepares", std::move(unreported)}};
  return out.dump(2) + "\n";
}

absl::StatusOr<CheckpointData> DecodeCheckpoint(const std::string& text) {
  json in = json::parse(text, nullptr, false);
  if (in.is_discarded() || !in.is_object()) {
    return absl::InvalidArgumentError("the checkpoint is not a JSON object");
  }
  try {
    if (in.value("version", 0) != kVersion) {
      return absl::InvalidArgumentError("unknown checkpoint version " +
                                        in.value("version", json(0)).dump());
    }
    CheckpointData data;
    data.node = in.value("node", "");
    data.resource_version = in.value("resourceVersion", int64_t{0});
    // Named, not temporaries: items() refers to the object it iterates.
    const json claims = in.value("claims", json::object());
    const json unreported = in.value("unreportedUnprepares", json::object());
    for (const auto& [uid, c] : claims.items()) {
      PreparedClaim claim;
      claim.uid = uid;
      claim.namespace_ = c.at("namespace").get<std::string>();
      claim.name = c.at("name").get<std::string>();
      claim.allocation_id = c.at("allocationID").get<std::string>();
      claim.reported = c.value("reported", false);
      claim.mps_daemon = c.value("mpsDaemon", false);
      const json devices = c.value("devices", json::array());
      for (const auto& d : devices) {
        PreparedDeviceRecord r;
        r.request = d.value("request", "");
        r.pool = d.at("pool").get<std::string>();
        r.device = d.at("device").get<std::string>();
        r.share_id = d.value("shareID", "");
        r.cdi_device_ids = d.value("cdiDeviceIDs", std::vector<std::string>{});
        if (d.contains("migInstance")) r.mig_instance = MigInstanceFromJson(d.at("migInstance"));
        claim.devices.push_back(std::move(r));
      }
      data.claims[uid] = std::move(claim);
    }
    for (const auto& [uid, c] : unreported.items()) {
      data.unreported[uid] = UnpreparedClaim{c.at("namespace").get<std::string>(),
                                             c.at("name").get<std::string>(), uid};
    }
    return data;
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(std::string("malformed checkpoint: ") + e.what());
  }
}

absl::StatusOr<CheckpointData> Checkpoint::Load(const std::string& node) const {
  std::ifstream in(path_);
  if (!in) {
    CheckpointData empty;
    empty.node = node;
    return empty;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  auto data = DecodeCheckpoint(ss.str());
  if (!data.ok()) {
    return absl::InvalidArgumentError(path_ + ": " + std::string(data.status().message()));
  }
  if (data->node != node) {
    return absl::InvalidArgumentError(path_ + " belongs to node \"" + data->node + "\", not \"" +
                                      node + "\"");
  }
  return data;
}

absl::Status Checkpoint::Save(const CheckpointData& data) const {
  return auth::WriteFileAtomically(path_, EncodeCheckpoint(data), 0600);
}

}  // namespace qm::agent
