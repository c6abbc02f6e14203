#include "agent/preparer.h"

#include <sys/stat.h>

#include <filesystem>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "agent/cdi.h"
#include "common/status.h"
#include "model/names.h"
#include "spdlog/spdlog.h"

namespace qm::agent {
namespace {

// Where containers find the MPS control daemon's pipes (CUDA_MPS_PIPE_DIRECTORY).
constexpr char kMpsContainerDir[] = "/tmp/nvidia-mps";

// "memory" -> "MEMORY", "example.com/bw" -> "EXAMPLE_COM_BW": capacity names in env names.
std::string EnvName(const std::string& name) {
  std::string out = absl::AsciiStrToUpper(name);
  for (char& c : out) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return out;
}

// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT takes whole megabytes ("<uuid>=1024M").
std::string MegabytesLimit(const Quantity& q) {
  const int64_t mib = (q.Value() + 1024 * 1024 - 1) / (1024 * 1024);
  return std::to_string(mib) + "M";
}

// "MIG 1g.5gb at memory slice 3 of GPU-...": a placement in messages.
std::string DescribePlacement(const LocalDevice& local) {
  return "placement " + std::to_string(local.mig_placement->start) + "+" +
         std::to_string(local.mig_placement->size) + " (profile " +
         std::to_string(local.mig_placement->profile_id) + ") of " + local.parent_uuid;
}

std::string DescribeInstance(const MigInstance& m) {
  return "MIG instance " + (m.uuid.empty() ? std::string("?") : m.uuid) + " (GPU instance " +
         std::to_string(m.gpu_instance_id) + ", compute instance " +
         std::to_string(m.compute_instance_id) + " of " + m.parent_uuid + ")";
}

}  // namespace

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
    for (const auto& d : it->second.devices) {
      if (!d.mig_instance) continue;
      absl::Status st = mig_ != nullptr ? mig_->Destroy(*d.mig_instance)
                                        : absl::FailedPreconditionError("no MIG instance manager");
      if (!st.ok()) {
        // Left to whoever finds it: its placements are not published while it exists.
        spdlog::warn("claim {}/{}: cannot destroy {}: {}", it->second.namespace_, it->second.name,
                     DescribeInstance(*d.mig_instance), st.ToString());
      }
    }
    it = data_->claims.erase(it);
    changed = true;
  }
  if (mig_ != nullptr) {
    for (const auto& [uid, claim] : data_->claims) {
      for (const auto& d : claim.devices) {
        if (d.mig_instance) mig_->Hold(*d.mig_instance);
      }
    }
  }
  // MPS directories (and daemons) of claims no longer held (an interrupted prepare or unprepare).
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(mps_root_, ec)) {
    const std::string uid = entry.path().filename().string();
    if (!IsSafeClaimUid(uid) || data_->claims.contains(uid)) continue;
    spdlog::info("removing MPS directory of claim {}: not prepared", uid);
    if (mps_ != nullptr) {
      if (absl::Status st =
              mps_->Stop(entry.path().string() + "/pipe", entry.path().string() + "/log");
          !st.ok()) {
        spdlog::warn("MPS control daemon of claim {}: {}", uid, st.ToString());
      }
    }
    std::error_code rm;
    std::filesystem::remove_all(entry.path(), rm);
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
  // MPS settings of the claim's devices: one pipe directory, one thread percentage and one list
  // of pinned memory limits for the whole claim (CUDA reads them per process, not per device).
  bool mps = false;
  std::optional<int> mps_percentage;
  std::vector<std::string> mps_limits;
  std::vector<std::pair<std::string, std::string>> mps_device_limits;  // for the daemon
  std::vector<std::pair<std::string, std::string>> timeslices;         // GPU uuid, interval
  // MIG instances created for the claim's placements; destroyed when the claim fails.
  std::vector<MigInstance> created;
  auto rollback = [&] {
    for (const MigInstance& m : created) {
      if (absl::Status st = mig_->Destroy(m); !st.ok()) {
        spdlog::warn("claim {}/{}: cannot destroy {} again: {}", claim.namespace_, claim.name,
                     DescribeInstance(m), st.ToString());
      }
    }
    created.clear();
  };
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
    std::optional<DeviceConfig> config;
    if (const OpaqueConfig* c = ConfigForRequest(claim.configs, inventory_.driver, d.request)) {
      auto parsed = ParseDeviceConfig(c->parameters_json);
      if (!parsed.ok()) {
        problems.push_back(id + ": invalid config (" + c->source + ") for request " + d.request +
                           ": " + std::string(parsed.status().message()));
        continue;
      }
      config = *std::move(parsed);
    }
    const bool is_mig = !local->second.parent_uuid.empty();
    if (config && config->kind == "GpuConfig" && is_mig) {
      problems.push_back(id + ": a GpuConfig does not apply to a MIG device (use MigDeviceConfig)");
      continue;
    }
    if (config && config->kind == "MigDeviceConfig" && !is_mig) {
      problems.push_back(id + ": a MigDeviceConfig applies to MIG devices only (use GpuConfig)");
      continue;
    }
    // A MIG placement: its instance is made now (and destroyed again if the claim fails).
    LocalDevice dev = local->second;
    std::optional<MigInstance> instance;
    if (dev.mig_placement) {
      if (mig_ == nullptr) {
        problems.push_back(id + ": a MIG placement, but this agent creates no MIG instances");
        continue;
      }
      auto made = mig_->Create(dev);
      if (!made.ok()) {
        problems.push_back(id + ": creating the MIG instance of " + DescribePlacement(dev) + ": " +
                           std::string(made.status().message()));
        continue;
      }
      spdlog::info("claim {}/{}: created {} for {}", claim.namespace_, claim.name,
                   DescribeInstance(*made), d.device);
      created.push_back(*made);
      instance = *made;
      dev.uuid = made->uuid;
      dev.device_nodes = made->device_nodes;
    }
    const std::string n = std::to_string(spec.devices.size());
    std::vector<std::string> env = {"QM_DEVICE_" + n + "=" + dev.uuid};
    // A consumable-capacity share: its limits, for the workload (and MPS below) to honour.
    std::optional<Quantity> share_memory;
    for (const auto& [capacity, value] : d.consumed_capacity) {
      env.push_back("QM_DEVICE_" + n + "_" + EnvName(capacity) + "=" + value);
      if (capacity == "memory") {
        if (auto q = ParseQuantity(value); q.ok()) share_memory = *q;
      }
    }
    if (config && config->sharing.strategy == SharingConfig::Strategy::kTimeSlicing) {
      env.push_back("QM_DEVICE_" + n + "_TIMESLICE_INTERVAL=" + config->sharing.interval);
      if (!is_mig) timeslices.emplace_back(dev.uuid, config->sharing.interval);
    }
    if (config && config->sharing.strategy == SharingConfig::Strategy::kMps) {
      const SharingConfig& s = config->sharing;
      if (s.active_thread_percentage) {
        if (mps_percentage && *mps_percentage != *s.active_thread_percentage) {
          problems.push_back(id +
                             ": MPS configs of one claim must agree on "
                             "defaultActiveThreadPercentage");
          continue;
        }
        mps_percentage = s.active_thread_percentage;
      }
      // The most specific limit: this GPU's (by UUID, or index for whole GPUs), the default,
      // else what a consumable-capacity share of memory took.
      std::optional<Quantity> limit = s.pinned_memory_limit;
      if (!limit) limit = share_memory;
      if (auto it = s.per_device_pinned_memory_limit.find(dev.uuid);
          it != s.per_device_pinned_memory_limit.end()) {
        limit = it->second;
      } else if (auto by_index = s.per_device_pinned_memory_limit.find(std::to_string(dev.index));
                 !is_mig && by_index != s.per_device_pinned_memory_limit.end()) {
        limit = by_index->second;
      }
      if (limit) {
        mps_limits.push_back(dev.uuid + "=" + MegabytesLimit(*limit));
        mps_device_limits.emplace_back(dev.uuid, MegabytesLimit(*limit));
      }
      mps = true;
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
    cdi.device_nodes = dev.device_nodes;
    cdi.env = std::move(env);
    spec.devices.push_back(std::move(cdi));
    uuids.push_back(dev.uuid);
    out.devices.push_back(PreparedDeviceRecord{
        d.request, d.pool, d.device, d.share_id, {QualifiedDeviceId(spec.kind, name)}, instance});
  }
  if (!problems.empty()) {
    rollback();
    out.devices.clear();
    out.error = absl::StrJoin(problems, "; ");
    return out;
  }
  if (timeslicer_ != nullptr) {
    for (const auto& [uuid, interval] : timeslices) {
      if (absl::Status st = timeslicer_->Apply(uuid, interval); !st.ok()) {
        rollback();
        out.devices.clear();
        out.error = "setting the time slice of GPU " + uuid + " to " + interval + ": " +
                    std::string(st.message());
        return out;
      }
    }
  }
  spec.env = {"NVIDIA_VISIBLE_DEVICES=" + absl::StrJoin(uuids, ","),
              "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
              "QM_CLAIM=" + claim.namespace_ + "/" + claim.name};
  spec.device_nodes = inventory_.common_device_nodes;
  const std::string mps_dir = mps_root_ + "/" + claim.uid;
  const std::string pipe_dir = mps_dir + "/pipe", log_dir = mps_dir + "/log";
  if (mps) {
    // The pipe directory the claim's MPS control daemon serves; each claim gets its own, so
    // clients of different claims never share a daemon.
    std::error_code ec;
    std::filesystem::create_directories(pipe_dir, ec);
    if (ec) {
      rollback();
      return absl::FailedPreconditionError("cannot create " + pipe_dir + ": " + ec.message());
    }
    spec.env.push_back(std::string("CUDA_MPS_PIPE_DIRECTORY=") + kMpsContainerDir);
    if (mps_percentage) {
      spec.env.push_back("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=" + std::to_string(*mps_percentage));
    }
    if (!mps_limits.empty()) {
      spec.env.push_back("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=" + absl::StrJoin(mps_limits, ","));
    }
    spec.mounts.push_back(CdiMount{pipe_dir, kMpsContainerDir});
    if (mps_ != nullptr) {
      MpsDaemonSpec daemon{pipe_dir, log_dir, uuids, mps_percentage, mps_device_limits};
      if (absl::Status st = mps_->Start(daemon); !st.ok()) {
        std::filesystem::remove_all(mps_dir, ec);
        rollback();
        out.devices.clear();
        out.error =
            "the MPS control daemon of the claim did not start: " + std::string(st.message());
        return out;
      }
    }
  }
  PreparedClaim record;
  record.namespace_ = claim.namespace_;
  record.name = claim.name;
  record.uid = claim.uid;
  record.allocation_id = claim.allocation_id;
  record.devices = out.devices;
  record.mps_daemon = mps && mps_ != nullptr;
  auto undo = [&] {
    if (mps && mps_ != nullptr) (void)mps_->Stop(pipe_dir, log_dir);
    if (!created.empty()) {
      rollback();
      data_->claims.erase(claim.uid);
      if (absl::Status st = Save(); !st.ok()) {
        spdlog::warn("claim {}/{}: {}", claim.namespace_, claim.name, st.ToString());
      }
    }
  };
  if (!created.empty()) {
    // The instances are in the checkpoint before the spec exists (see the header).
    data_->claims[claim.uid] = record;
    if (absl::Status st = Save(); !st.ok()) {
      undo();
      return st;
    }
  }
  mkdir(cdi_dir_.c_str(), 0755);
  if (absl::Status st = WriteCdiSpec(cdi_dir_, claim.uid, spec); !st.ok()) {
    undo();
    return st;
  }
  data_->claims[claim.uid] = std::move(record);
  data_->unreported.erase(claim.uid);
  QM_RETURN_IF_ERROR(Save());
  return out;
}

absl::Status Preparer::Unprepare(const std::string& uid, const std::string& namespace_,
                                 const std::string& name) {
  if (!IsSafeClaimUid(uid)) return absl::InvalidArgumentError("claim uid is not a UUID");
  if (auto held = data_->claims.find(uid); held != data_->claims.end()) {
    // The instances first: one still in use keeps the claim prepared, spec and all.
    std::vector<std::string> failures;
    bool destroyed = false;
    for (auto& d : held->second.devices) {
      if (!d.mig_instance) continue;
      absl::Status st = mig_ != nullptr
                            ? mig_->Destroy(*d.mig_instance)
                            : absl::FailedPreconditionError(
                                  "this agent destroys no MIG instances (it was started without "
                                  "a source that manages them)");
      if (!st.ok()) {
        failures.push_back("cannot destroy " + DescribeInstance(*d.mig_instance) + " of " +
                           d.device + ": " + std::string(st.message()));
        continue;
      }
      spdlog::info("claim {}/{}: destroyed {}", namespace_, name,
                   DescribeInstance(*d.mig_instance));
      d.mig_instance.reset();
      destroyed = true;
    }
    if (!failures.empty()) {
      if (destroyed) QM_RETURN_IF_ERROR(Save());
      return absl::FailedPreconditionError(absl::StrJoin(failures, "; "));
    }
  }
  QM_RETURN_IF_ERROR(RemoveCdiSpec(cdi_dir_, uid));
  const std::string mps_dir = mps_root_ + "/" + uid;
  if (auto held = data_->claims.find(uid);
      held != data_->claims.end() && held->second.mps_daemon && mps_ != nullptr) {
    // The workloads are gone: a daemon that does not answer is not worth keeping the claim for.
    if (absl::Status st = mps_->Stop(mps_dir + "/pipe", mps_dir + "/log"); !st.ok()) {
      spdlog::warn("MPS control daemon of claim {}/{}: {}", namespace_, name, st.ToString());
    }
  }
  std::error_code ec;  // a claim without MPS has no directory: nothing to remove
  std::filesystem::remove_all(mps_dir, ec);
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
