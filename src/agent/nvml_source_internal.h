#pragma once

// What the files of NvmlSource share (nvml_source.cc: loading the library, the MIG strategy and
// the event watch; nvml_discover.cc: Discover; nvml_mig_instances.cc: the MigInstanceManager):
// NVML's C ABI, the resolved function pointers (NvmlSource::Api) and the NVML constants they use.
// Not for use outside them.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "agent/nvml_source.h"

namespace qm::agent {

// NVML's C ABI, declared here rather than taken from nvml.h so the agent builds without the
// CUDA toolkit. Only what the agent calls; layouts and values as in nvml.h (NVML 12.x, stable
// since the _v2/_v3 entry points named here were introduced).
extern "C" {
typedef int nvmlReturn_t;  // an enum in nvml.h: int-sized
typedef struct nvmlDevice_st* nvmlDevice_t;

struct nvmlPciInfo_t {
  char busIdLegacy[16];  // NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];  // NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE: "00000000:07:00.0"
};

struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct nvmlDeviceAttributes_t {
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
  unsigned int gpuInstanceSliceCount;
  unsigned int computeInstanceSliceCount;
  unsigned long long memorySizeMB;
};

typedef struct nvmlEventSet_st* nvmlEventSet_t;

struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // the XID for XID critical errors
  unsigned int gpuInstanceId;    // 0xFFFFFFFF: not a MIG device's event
  unsigned int computeInstanceId;
};

// MIG instance management (the dynamic MIG strategy).
typedef struct nvmlGpuInstance_st* nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st* nvmlComputeInstance_t;

struct nvmlGpuInstancePlacement_t {
  unsigned int start;
  unsigned int size;
};

struct nvmlGpuInstanceProfileInfo_v2_t {
  unsigned int version;  // nvmlGpuInstanceProfileInfo_v2: sizeof | 2 << 24
  unsigned int id;
  unsigned int isP2pSupported;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
  char name[96];  // NVML_DEVICE_NAME_V2_BUFFER_SIZE: "MIG 1g.5gb"
};

struct nvmlGpuInstanceInfo_t {
  nvmlDevice_t device;
  unsigned int id;
  unsigned int profileId;
  nvmlGpuInstancePlacement_t placement;
};

struct nvmlComputeInstanceProfileInfo_t {
  unsigned int id;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
};

struct nvmlComputeInstanceInfo_t {
  nvmlDevice_t device;
  nvmlGpuInstance_t gpuInstance;
  unsigned int id;
  unsigned int profileId;
  nvmlGpuInstancePlacement_t placement;  // nvmlComputeInstancePlacement_t: the same layout
};
}

namespace nvml_internal {

inline constexpr nvmlReturn_t kSuccess = 0;
inline constexpr nvmlReturn_t kNotSupported = 3;
inline constexpr nvmlReturn_t kNotFound = 6;
inline constexpr nvmlReturn_t kTimeout = 10;
inline constexpr nvmlReturn_t kInvalidArgument = 2;
inline constexpr nvmlReturn_t kInsufficientResources = 23;
// GPU instance profile ids tried (NVML_GPU_INSTANCE_PROFILE_*: 0 .. COUNT-1, COUNT < 32), and
// compute instance profile ids (NVML_COMPUTE_INSTANCE_PROFILE_*: 0 .. COUNT-1, COUNT < 16).
inline constexpr unsigned int kMaxGpuInstanceProfiles = 32;
inline constexpr unsigned int kMaxComputeInstanceProfiles = 16;
inline constexpr unsigned int kComputeInstanceEngineProfileShared = 0;
inline constexpr unsigned int kGpuInstanceProfileInfoV2 =
    sizeof(nvmlGpuInstanceProfileInfo_v2_t) | (2u << 24);
inline constexpr unsigned int kInvalidInstanceId = 0xFFFFFFFF;
inline constexpr unsigned int kMigEnable = 1;       // NVML_DEVICE_MIG_ENABLE
inline constexpr unsigned int kNameBuffer = 96;     // NVML_DEVICE_NAME_V2_BUFFER_SIZE
inline constexpr unsigned int kUuidBuffer = 96;     // NVML_DEVICE_UUID_V2_BUFFER_SIZE
inline constexpr unsigned int kVersionBuffer = 80;  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE

// The capability device file a MIG access file names ("DeviceFileMinor: 12" ->
// /dev/nvidia-caps/nvidia-cap12). Empty when the file is missing or says nothing.
std::string CapDeviceNode(const std::string& access_file);

}  // namespace nvml_internal

struct NvmlSource::Api {
  nvmlReturn_t (*Init)();
  nvmlReturn_t (*Shutdown)();
  const char* (*ErrorString)(nvmlReturn_t);
  nvmlReturn_t (*SystemGetDriverVersion)(char*, unsigned int);
  nvmlReturn_t (*SystemGetCudaDriverVersion)(int*);
  nvmlReturn_t (*DeviceGetCount)(unsigned int*);
  nvmlReturn_t (*DeviceGetHandleByIndex)(unsigned int, nvmlDevice_t*);
  nvmlReturn_t (*DeviceGetName)(nvmlDevice_t, char*, unsigned int);
  nvmlReturn_t (*DeviceGetUUID)(nvmlDevice_t, char*, unsigned int);
  nvmlReturn_t (*DeviceGetPciInfo)(nvmlDevice_t, nvmlPciInfo_t*);
  nvmlReturn_t (*DeviceGetMemoryInfo)(nvmlDevice_t, nvmlMemory_t*);
  nvmlReturn_t (*DeviceGetCudaComputeCapability)(nvmlDevice_t, int*, int*);
  nvmlReturn_t (*DeviceGetBrand)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*DeviceGetArchitecture)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*DeviceGetMinorNumber)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*DeviceGetMigMode)(nvmlDevice_t, unsigned int*, unsigned int*);
  nvmlReturn_t (*DeviceGetMaxMigDeviceCount)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*DeviceGetMigDeviceHandleByIndex)(nvmlDevice_t, unsigned int, nvmlDevice_t*);
  nvmlReturn_t (*DeviceGetAttributes)(nvmlDevice_t, nvmlDeviceAttributes_t*);
  nvmlReturn_t (*DeviceGetGpuInstanceId)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*DeviceGetComputeInstanceId)(nvmlDevice_t, unsigned int*);
  // Events: optional (WatchEvents answers Unimplemented without them).
  nvmlReturn_t (*EventSetCreate)(nvmlEventSet_t*);
  nvmlReturn_t (*EventSetFree)(nvmlEventSet_t);
  nvmlReturn_t (*EventSetWait)(nvmlEventSet_t, nvmlEventData_t*, unsigned int);
  nvmlReturn_t (*DeviceRegisterEvents)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
  nvmlReturn_t (*DeviceGetSupportedEventTypes)(nvmlDevice_t, unsigned long long*);
  // MIG instance management: optional (the dynamic MIG strategy needs them).
  nvmlReturn_t (*DeviceGetHandleByUUID)(const char*, nvmlDevice_t*);
  nvmlReturn_t (*DeviceGetGpuInstanceProfileInfoV)(nvmlDevice_t, unsigned int,
                                                   nvmlGpuInstanceProfileInfo_v2_t*);
  nvmlReturn_t (*DeviceGetGpuInstancePossiblePlacements)(nvmlDevice_t, unsigned int,
                                                         nvmlGpuInstancePlacement_t*,
                                                         unsigned int*);
  nvmlReturn_t (*DeviceGetGpuInstances)(nvmlDevice_t, unsigned int, nvmlGpuInstance_t*,
                                        unsigned int*);
  nvmlReturn_t (*DeviceGetGpuInstanceById)(nvmlDevice_t, unsigned int, nvmlGpuInstance_t*);
  nvmlReturn_t (*DeviceCreateGpuInstanceWithPlacement)(nvmlDevice_t, unsigned int,
                                                       const nvmlGpuInstancePlacement_t*,
                                                       nvmlGpuInstance_t*);
  nvmlReturn_t (*GpuInstanceGetInfo)(nvmlGpuInstance_t, nvmlGpuInstanceInfo_t*);
  nvmlReturn_t (*GpuInstanceGetComputeInstanceProfileInfo)(nvmlGpuInstance_t, unsigned int,
                                                           unsigned int,
                                                           nvmlComputeInstanceProfileInfo_t*);
  nvmlReturn_t (*GpuInstanceCreateComputeInstance)(nvmlGpuInstance_t, unsigned int,
                                                   nvmlComputeInstance_t*);
  nvmlReturn_t (*GpuInstanceGetComputeInstanceById)(nvmlGpuInstance_t, unsigned int,
                                                    nvmlComputeInstance_t*);
  nvmlReturn_t (*ComputeInstanceGetInfo)(nvmlComputeInstance_t, nvmlComputeInstanceInfo_t*);
  nvmlReturn_t (*ComputeInstanceDestroy)(nvmlComputeInstance_t);
  nvmlReturn_t (*GpuInstanceDestroy)(nvmlGpuInstance_t);
  // The names of the MIG management functions the library lacks (empty: it has them all).
  std::vector<std::string> missing_mig;

  std::string Error(const std::string& call, nvmlReturn_t rc) const {
    const char* text = ErrorString != nullptr ? ErrorString(rc) : nullptr;
    return call + ": " + (text != nullptr ? text : "NVML error") + " (" + std::to_string(rc) + ")";
  }

  // Initialises NVML (end it with a ShutdownOnExit: NVML is reference counted, so every
  // successful init needs its shutdown, whatever fails after it): Unavailable when it fails.
  absl::Status InitNvml() const {
    if (nvmlReturn_t rc = Init(); rc != nvml_internal::kSuccess) {
      return absl::UnavailableError(Error("nvmlInit_v2", rc));
    }
    return absl::OkStatus();
  }
  // The same for one change of MIG instances: FailedPrecondition first when the library lacks
  // the MIG functions.
  absl::Status InitForMig() const {
    if (!missing_mig.empty()) {
      return absl::FailedPreconditionError("the NVML library lacks " + missing_mig.front());
    }
    return InitNvml();
  }
  struct ShutdownOnExit {
    const Api& nv;
    ~ShutdownOnExit() { nv.Shutdown(); }
  };
};

}  // namespace qm::agent
