#include "agent/nvml_source.h"

#include <dlfcn.h>

#include <map>

#include "agent/nvml_source_internal.h"
#include "spdlog/spdlog.h"

namespace qm::agent {

using namespace nvml_internal;  // NOLINT(google-build-using-namespace)

absl::StatusOr<std::unique_ptr<NvmlSource>> NvmlSource::Open(const std::string& library,
                                                             const std::string& sysfs_root,
                                                             const std::string& proc_root) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return absl::FailedPreconditionError("cannot load the NVML library " + library + ": " +
                                         (err != nullptr ? err : "unknown error") +
                                         " (is the NVIDIA driver installed? --nvml-library PATH "
                                         "names another copy; --simulate FILE runs without GPUs)");
  }
  auto api = std::make_unique<Api>();
  std::vector<std::string> missing;
  auto bind = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
    if (fn == nullptr) missing.push_back(name);
  };
  bind(api->Init, "nvmlInit_v2");
  bind(api->Shutdown, "nvmlShutdown");
  bind(api->ErrorString, "nvmlErrorString");
  bind(api->SystemGetDriverVersion, "nvmlSystemGetDriverVersion");
  bind(api->SystemGetCudaDriverVersion, "nvmlSystemGetCudaDriverVersion_v2");
  bind(api->DeviceGetCount, "nvmlDeviceGetCount_v2");
  bind(api->DeviceGetHandleByIndex, "nvmlDeviceGetHandleByIndex_v2");
  bind(api->DeviceGetName, "nvmlDeviceGetName");
  bind(api->DeviceGetUUID, "nvmlDeviceGetUUID");
  bind(api->DeviceGetPciInfo, "nvmlDeviceGetPciInfo_v3");
  bind(api->DeviceGetMemoryInfo, "nvmlDeviceGetMemoryInfo");
  bind(api->DeviceGetCudaComputeCapability, "nvmlDeviceGetCudaComputeCapability");
  bind(api->DeviceGetBrand, "nvmlDeviceGetBrand");
  bind(api->DeviceGetArchitecture, "nvmlDeviceGetArchitecture");
  bind(api->DeviceGetMinorNumber, "nvmlDeviceGetMinorNumber");
  bind(api->DeviceGetMigMode, "nvmlDeviceGetMigMode");
  bind(api->DeviceGetMaxMigDeviceCount, "nvmlDeviceGetMaxMigDeviceCount");
  bind(api->DeviceGetMigDeviceHandleByIndex, "nvmlDeviceGetMigDeviceHandleByIndex");
  bind(api->DeviceGetAttributes, "nvmlDeviceGetAttributes_v2");
  bind(api->DeviceGetGpuInstanceId, "nvmlDeviceGetGpuInstanceId");
  bind(api->DeviceGetComputeInstanceId, "nvmlDeviceGetComputeInstanceId");
  const size_t required = missing.size();
  bind(api->EventSetCreate, "nvmlEventSetCreate");
  bind(api->EventSetFree, "nvmlEventSetFree");
  bind(api->EventSetWait, "nvmlEventSetWait_v2");
  bind(api->DeviceRegisterEvents, "nvmlDeviceRegisterEvents");
  bind(api->DeviceGetSupportedEventTypes, "nvmlDeviceGetSupportedEventTypes");
  if (missing.size() > required) {
    spdlog::warn("the NVML library {} lacks event functions; no health events will be watched",
                 library);
  }
  missing.resize(required);
  bind(api->DeviceGetHandleByUUID, "nvmlDeviceGetHandleByUUID");
  bind(api->DeviceGetGpuInstanceProfileInfoV, "nvmlDeviceGetGpuInstanceProfileInfoV");
  bind(api->DeviceGetGpuInstancePossiblePlacements,
       "nvmlDeviceGetGpuInstancePossiblePlacements_v2");
  bind(api->DeviceGetGpuInstances, "nvmlDeviceGetGpuInstances");
  bind(api->DeviceGetGpuInstanceById, "nvmlDeviceGetGpuInstanceById");
  bind(api->DeviceCreateGpuInstanceWithPlacement, "nvmlDeviceCreateGpuInstanceWithPlacement");
  bind(api->GpuInstanceGetInfo, "nvmlGpuInstanceGetInfo");
  bind(api->GpuInstanceGetComputeInstanceProfileInfo,
       "nvmlGpuInstanceGetComputeInstanceProfileInfo");
  bind(api->GpuInstanceCreateComputeInstance, "nvmlGpuInstanceCreateComputeInstance");
  bind(api->GpuInstanceGetComputeInstanceById, "nvmlGpuInstanceGetComputeInstanceById");
  bind(api->ComputeInstanceGetInfo, "nvmlComputeInstanceGetInfo_v2");
  bind(api->ComputeInstanceDestroy, "nvmlComputeInstanceDestroy");
  bind(api->GpuInstanceDestroy, "nvmlGpuInstanceDestroy");
  api->missing_mig.assign(missing.begin() + static_cast<std::ptrdiff_t>(required), missing.end());
  missing.resize(required);
  if (!missing.empty()) {
    dlclose(handle);
    std::string names;
    for (const auto& m : missing) names += (names.empty() ? "" : ", ") + m;
    return absl::FailedPreconditionError(
        "the NVML library " + library +
        " lacks functions the agent needs (driver too old?): " + names);
  }
  return std::unique_ptr<NvmlSource>(new NvmlSource(handle, std::move(api), sysfs_root, proc_root));
}

NvmlSource::NvmlSource(void* handle, std::unique_ptr<Api> api, std::string sysfs_root,
                       std::string proc_root)
    : handle_(handle),
      api_(std::move(api)),
      sysfs_root_(std::move(sysfs_root)),
      proc_root_(std::move(proc_root)) {}

NvmlSource::~NvmlSource() {
  api_.reset();
  if (handle_ != nullptr) dlclose(handle_);
}

absl::Status NvmlSource::SetMigStrategy(MigStrategy strategy) {
  if (strategy == MigStrategy::kDynamic && !api_->missing_mig.empty()) {
    std::string names;
    for (const auto& m : api_->missing_mig) names += (names.empty() ? "" : ", ") + m;
    return absl::FailedPreconditionError(
        "the dynamic MIG strategy needs MIG functions the NVML library lacks (driver too old?): " +
        names);
  }
  mig_strategy_ = strategy;
  return absl::OkStatus();
}

MigInstanceManager* NvmlSource::mig_instances() {
  return api_->missing_mig.empty() ? this : nullptr;
}

absl::Status NvmlSource::WatchEvents(const std::function<void(const DeviceEvent&)>& on_event,
                                     const std::atomic<bool>& stop) {
  const Api& nv = *api_;
  if (nv.EventSetCreate == nullptr || nv.EventSetFree == nullptr || nv.EventSetWait == nullptr ||
      nv.DeviceRegisterEvents == nullptr || nv.DeviceGetSupportedEventTypes == nullptr) {
    return absl::UnimplementedError("the NVML library has no event functions");
  }
  if (absl::Status st = nv.InitNvml(); !st.ok()) return st;
  Api::ShutdownOnExit guard{nv};
  nvmlEventSet_t set = nullptr;
  if (nvmlReturn_t rc = nv.EventSetCreate(&set); rc != kSuccess) {
    return absl::UnavailableError(nv.Error("nvmlEventSetCreate", rc));
  }
  struct FreeGuard {
    const Api& nv;
    nvmlEventSet_t set;
    ~FreeGuard() { nv.EventSetFree(set); }
  } free_guard{nv, set};

  unsigned int count = 0;
  if (nvmlReturn_t rc = nv.DeviceGetCount(&count); rc != kSuccess) {
    return absl::UnavailableError(nv.Error("nvmlDeviceGetCount_v2", rc));
  }
  // As NVIDIA's device plugin: XID critical errors and ECC errors, on every GPU that supports
  // them (a GPU in MIG mode reports its MIG devices' events with their instance ids).
  constexpr unsigned long long kWanted =
      kEventXidCriticalError | kEventDoubleBitEccError | kEventSingleBitEccError;
  std::map<nvmlDevice_t, std::string> uuids;
  for (unsigned int index = 0; index < count; ++index) {
    const std::string at = "GPU " + std::to_string(index) + ": ";
    nvmlDevice_t dev = nullptr;
    if (nvmlReturn_t rc = nv.DeviceGetHandleByIndex(index, &dev); rc != kSuccess) {
      return absl::UnavailableError(nv.Error(at + "nvmlDeviceGetHandleByIndex_v2", rc));
    }
    char uuid[kUuidBuffer] = {};
    if (nvmlReturn_t rc = nv.DeviceGetUUID(dev, uuid, sizeof(uuid)); rc != kSuccess) {
      return absl::UnavailableError(nv.Error(at + "nvmlDeviceGetUUID", rc));
    }
    unsigned long long supported = 0;
    nvmlReturn_t rc = nv.DeviceGetSupportedEventTypes(dev, &supported);
    if (rc == kSuccess && (supported & kWanted) != 0) {
      rc = nv.DeviceRegisterEvents(dev, supported & kWanted, set);
    }
    if (rc == kNotSupported || (rc == kSuccess && (supported & kWanted) == 0)) {
      spdlog::warn("{} ({}) does not report XID or ECC events: no health checks for it", uuid,
                   at.substr(0, at.size() - 2));
      continue;
    }
    if (rc != kSuccess)
      return absl::UnavailableError(nv.Error(at + "nvmlDeviceRegisterEvents", rc));
    uuids[dev] = uuid;
  }
  if (uuids.empty()) return absl::UnimplementedError("no GPU reports XID or ECC events");
  spdlog::info("watching NVML events (XID critical errors, ECC errors) of {} GPUs", uuids.size());
  while (!stop.load()) {
    nvmlEventData_t data{};
    nvmlReturn_t rc = nv.EventSetWait(set, &data, 1000);
    if (rc == kTimeout) continue;
    if (rc != kSuccess) return absl::UnavailableError(nv.Error("nvmlEventSetWait_v2", rc));
    DeviceEvent event;
    if (auto it = uuids.find(data.device); it != uuids.end()) {
      event.gpu_uuid = it->second;
    } else {
      char uuid[kUuidBuffer] = {};
      if (nv.DeviceGetUUID(data.device, uuid, sizeof(uuid)) != kSuccess) continue;
      event.gpu_uuid = uuid;
    }
    event.type = data.eventType;
    event.data = data.eventData;
    if (data.gpuInstanceId != kInvalidInstanceId) event.gpu_instance_id = data.gpuInstanceId;
    if (data.computeInstanceId != kInvalidInstanceId) {
      event.compute_instance_id = data.computeInstanceId;
    }
    on_event(event);
  }
  return absl::OkStatus();
}

}  // namespace qm::agent
