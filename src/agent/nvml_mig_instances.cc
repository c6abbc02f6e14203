// NvmlSource as the MigInstanceManager of the dynamic MIG strategy: the GPU and compute instances
// it creates and destroys, and those it holds.

#include "agent/nvml_source.h"

#include <string>

#include "agent/nvml_source_internal.h"
#include "spdlog/spdlog.h"

namespace qm::agent {

using namespace nvml_internal;  // NOLINT(google-build-using-namespace)

bool NvmlSource::Holds(const InstanceKey& key) const {
  qm::MutexLock lock(&mu_);
  return held_.contains(key);
}

void NvmlSource::Hold(const MigInstance& instance) {
  qm::MutexLock lock(&mu_);
  held_.insert(KeyOf(instance));
}

absl::StatusOr<MigInstance> NvmlSource::Create(const LocalDevice& device) {
  const Api& nv = *api_;
  if (!device.mig_placement) {
    return absl::FailedPreconditionError("device " + device.uuid + " is no MIG placement");
  }
  if (absl::Status st = nv.InitForMig(); !st.ok()) return st;
  Api::ShutdownOnExit guard{nv};
  auto fail = [&](const std::string& call, nvmlReturn_t rc) {
    return absl::UnavailableError(nv.Error(call, rc));
  };
  const LocalDevice::MigPlacement& want = *device.mig_placement;
  nvmlDevice_t dev = nullptr;
  if (nvmlReturn_t rc = nv.DeviceGetHandleByUUID(device.parent_uuid.c_str(), &dev);
      rc != kSuccess) {
    return fail("nvmlDeviceGetHandleByUUID(" + device.parent_uuid + ")", rc);
  }
  unsigned int minor = 0, mig_current = 0, mig_pending = 0;
  if (nvmlReturn_t rc = nv.DeviceGetMinorNumber(dev, &minor); rc != kSuccess) {
    return fail("nvmlDeviceGetMinorNumber", rc);
  }
  if (nvmlReturn_t rc = nv.DeviceGetMigMode(dev, &mig_current, &mig_pending);
      rc != kSuccess || mig_current != kMigEnable) {
    return absl::FailedPreconditionError("GPU " + device.parent_uuid + " is not in MIG mode");
  }
  const unsigned int profile_id = static_cast<unsigned int>(want.profile_id);
  nvmlGpuInstanceProfileInfo_v2_t info{};
  info.version = kGpuInstanceProfileInfoV2;
  if (nvmlReturn_t rc = nv.DeviceGetGpuInstanceProfileInfoV(dev, profile_id, &info);
      rc != kSuccess) {
    return fail("nvmlDeviceGetGpuInstanceProfileInfoV", rc);
  }
  const nvmlGpuInstancePlacement_t placement{static_cast<unsigned int>(want.start),
                                             static_cast<unsigned int>(want.size)};
  nvmlGpuInstance_t gi = nullptr;
  if (nvmlReturn_t rc = nv.DeviceCreateGpuInstanceWithPlacement(dev, profile_id, &placement, &gi);
      rc != kSuccess) {
    if (rc == kInsufficientResources) {
      return absl::ResourceExhaustedError(nv.Error("nvmlDeviceCreateGpuInstanceWithPlacement", rc) +
                                          ": the placement overlaps a GPU instance that exists");
    }
    return fail("nvmlDeviceCreateGpuInstanceWithPlacement", rc);
  }
  MigInstance out;
  out.parent_uuid = device.parent_uuid;
  out.profile_id = want.profile_id;
  out.start = want.start;
  out.size = want.size;
  nvmlComputeInstance_t ci = nullptr;
  // Whatever fails after the GPU instance exists destroys what was made.
  auto undo = [&](absl::Status st) {
    std::string also;
    if (ci != nullptr) {
      if (nvmlReturn_t rc = nv.ComputeInstanceDestroy(ci); rc != kSuccess) {
        also += "; then " + nv.Error("nvmlComputeInstanceDestroy", rc);
      }
    }
    if (nvmlReturn_t rc = nv.GpuInstanceDestroy(gi); rc != kSuccess) {
      also += "; then " + nv.Error("nvmlGpuInstanceDestroy", rc);
    }
    return absl::Status(st.code(), std::string(st.message()) + also);
  };
  nvmlGpuInstanceInfo_t gi_info{};
  if (nvmlReturn_t rc = nv.GpuInstanceGetInfo(gi, &gi_info); rc != kSuccess) {
    return undo(fail("nvmlGpuInstanceGetInfo", rc));
  }
  out.gpu_instance_id = gi_info.id;
  // One compute instance spanning the GPU instance: the profile with its slice count.
  nvmlComputeInstanceProfileInfo_t ci_profile{};
  bool found = false;
  for (unsigned int cp = 0; cp < kMaxComputeInstanceProfiles && !found; ++cp) {
    nvmlComputeInstanceProfileInfo_t candidate{};
    nvmlReturn_t rc = nv.GpuInstanceGetComputeInstanceProfileInfo(
        gi, cp, kComputeInstanceEngineProfileShared, &candidate);
    if (rc == kNotSupported || rc == kInvalidArgument || rc == kNotFound) continue;
    if (rc != kSuccess) return undo(fail("nvmlGpuInstanceGetComputeInstanceProfileInfo", rc));
    if (candidate.sliceCount == info.sliceCount) {
      ci_profile = candidate;
      found = true;
    }
  }
  if (!found) {
    return undo(
        absl::FailedPreconditionError("no compute instance profile spans the GPU instance's " +
                                      std::to_string(info.sliceCount) + " slices"));
  }
  if (nvmlReturn_t rc = nv.GpuInstanceCreateComputeInstance(gi, ci_profile.id, &ci);
      rc != kSuccess) {
    ci = nullptr;
    return undo(fail("nvmlGpuInstanceCreateComputeInstance", rc));
  }
  nvmlComputeInstanceInfo_t ci_info{};
  if (nvmlReturn_t rc = nv.ComputeInstanceGetInfo(ci, &ci_info); rc != kSuccess) {
    return undo(fail("nvmlComputeInstanceGetInfo_v2", rc));
  }
  out.compute_instance_id = ci_info.id;
  // Its MIG device, as the static strategy enumerates them.
  unsigned int max_mig = 0;
  if (nvmlReturn_t rc = nv.DeviceGetMaxMigDeviceCount(dev, &max_mig); rc != kSuccess) {
    return undo(fail("nvmlDeviceGetMaxMigDeviceCount", rc));
  }
  for (unsigned int m = 0; m < max_mig && out.uuid.empty(); ++m) {
    nvmlDevice_t mig = nullptr;
    unsigned int mgi = 0, mci = 0;
    if (nv.DeviceGetMigDeviceHandleByIndex(dev, m, &mig) != kSuccess ||
        nv.DeviceGetGpuInstanceId(mig, &mgi) != kSuccess ||
        nv.DeviceGetComputeInstanceId(mig, &mci) != kSuccess || mgi != gi_info.id ||
        mci != ci_info.id) {
      continue;
    }
    char mig_uuid[kUuidBuffer] = {};
    if (nvmlReturn_t rc = nv.DeviceGetUUID(mig, mig_uuid, sizeof(mig_uuid)); rc != kSuccess) {
      return undo(fail("nvmlDeviceGetUUID", rc));
    }
    out.uuid = mig_uuid;
  }
  if (out.uuid.empty()) {
    return undo(absl::UnavailableError("NVML lists no MIG device of GPU instance " +
                                       std::to_string(gi_info.id) + ", compute instance " +
                                       std::to_string(ci_info.id) + " of " + device.parent_uuid));
  }
  out.device_nodes = device.device_nodes;
  const std::string base = proc_root_ + "/driver/nvidia/capabilities/gpu" + std::to_string(minor) +
                           "/mig/gi" + std::to_string(gi_info.id);
  for (const std::string& access :
       {base + "/access", base + "/ci" + std::to_string(ci_info.id) + "/access"}) {
    if (std::string cap = CapDeviceNode(access); !cap.empty()) out.device_nodes.push_back(cap);
  }
  Hold(out);
  return out;
}

absl::Status NvmlSource::Destroy(const MigInstance& instance) {
  const Api& nv = *api_;
  if (absl::Status st = nv.InitForMig(); !st.ok()) return st;
  Api::ShutdownOnExit guard{nv};
  auto fail = [&](const std::string& call, nvmlReturn_t rc) {
    return absl::UnavailableError(nv.Error(call, rc));
  };
  auto forget = [&] {
    qm::MutexLock lock(&mu_);
    held_.erase(KeyOf(instance));
  };
  nvmlDevice_t dev = nullptr;
  if (nvmlReturn_t rc = nv.DeviceGetHandleByUUID(instance.parent_uuid.c_str(), &dev);
      rc != kSuccess) {
    if (rc == kNotFound) {
      spdlog::warn("GPU {} is gone, and with it its GPU instance {}", instance.parent_uuid,
                   instance.gpu_instance_id);
      forget();
      return absl::OkStatus();
    }
    return fail("nvmlDeviceGetHandleByUUID(" + instance.parent_uuid + ")", rc);
  }
  nvmlGpuInstance_t gi = nullptr;
  nvmlReturn_t rc =
      nv.DeviceGetGpuInstanceById(dev, static_cast<unsigned int>(instance.gpu_instance_id), &gi);
  if (rc == kNotFound || rc == kInvalidArgument) {
    forget();  // destroyed already (by an earlier, interrupted unprepare, or by hand)
    return absl::OkStatus();
  }
  if (rc != kSuccess) return fail("nvmlDeviceGetGpuInstanceById", rc);
  nvmlGpuInstanceInfo_t info{};
  if (nvmlReturn_t rc2 = nv.GpuInstanceGetInfo(gi, &info); rc2 != kSuccess) {
    return fail("nvmlGpuInstanceGetInfo", rc2);
  }
  if (static_cast<int64_t>(info.profileId) != instance.profile_id ||
      static_cast<int64_t>(info.placement.start) != instance.start) {
    // The id was reused for an instance someone else made after ours went: not ours to destroy.
    spdlog::warn(
        "GPU instance {} of {} is no longer the one the agent created (profile {} at {} "
        "instead of {} at {}); left alone",
        instance.gpu_instance_id, instance.parent_uuid, info.profileId, info.placement.start,
        instance.profile_id, instance.start);
    forget();
    return absl::OkStatus();
  }
  if (instance.compute_instance_id >= 0) {
    nvmlComputeInstance_t ci = nullptr;
    nvmlReturn_t crc = nv.GpuInstanceGetComputeInstanceById(
        gi, static_cast<unsigned int>(instance.compute_instance_id), &ci);
    if (crc == kSuccess) {
      if (nvmlReturn_t drc = nv.ComputeInstanceDestroy(ci); drc != kSuccess) {
        return fail("nvmlComputeInstanceDestroy", drc);
      }
    } else if (crc != kNotFound && crc != kInvalidArgument) {
      return fail("nvmlGpuInstanceGetComputeInstanceById", crc);
    }
  }
  if (nvmlReturn_t drc = nv.GpuInstanceDestroy(gi); drc != kSuccess) {
    return fail("nvmlGpuInstanceDestroy", drc);
  }
  forget();
  return absl::OkStatus();
}

}  // namespace qm::agent
