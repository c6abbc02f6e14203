#include "agent/nvml_source.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "agent/mig.h"
#include "common/quantity.h"
#include "spdlog/spdlog.h"

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

namespace {

constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kNotSupported = 3;
constexpr nvmlReturn_t kNotFound = 6;
constexpr nvmlReturn_t kTimeout = 10;
constexpr nvmlReturn_t kInvalidArgument = 2;
constexpr nvmlReturn_t kInsufficientResources = 23;
// GPU instance profile ids tried (NVML_GPU_INSTANCE_PROFILE_*: 0 .. COUNT-1, COUNT < 32), and
// compute instance profile ids (NVML_COMPUTE_INSTANCE_PROFILE_*: 0 .. COUNT-1, COUNT < 16).
constexpr unsigned int kMaxGpuInstanceProfiles = 32;
constexpr unsigned int kMaxComputeInstanceProfiles = 16;
constexpr unsigned int kComputeInstanceEngineProfileShared = 0;
constexpr unsigned int kGpuInstanceProfileInfoV2 =
    sizeof(nvmlGpuInstanceProfileInfo_v2_t) | (2u << 24);
constexpr unsigned int kInvalidInstanceId = 0xFFFFFFFF;
constexpr unsigned int kMigEnable = 1;       // NVML_DEVICE_MIG_ENABLE
constexpr unsigned int kNameBuffer = 96;     // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned int kUuidBuffer = 96;     // NVML_DEVICE_UUID_V2_BUFFER_SIZE
constexpr unsigned int kVersionBuffer = 80;  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE

// "560.35.03" -> "560.35.3", "12.6" -> "12.6.0": the semantic versions DRA attributes hold.
std::string SemVer(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, '.');
  std::vector<std::string> out;
  for (const auto& p : parts) {
    size_t first = p.find_first_not_of('0');
    out.push_back(first == std::string::npos ? "0" : p.substr(first));
  }
  while (out.size() < 3) out.push_back("0");
  return out[0] + "." + out[1] + "." + out[2];
}

// nvmlDeviceArchitecture_t (NVML_DEVICE_ARCH_*) as NVIDIA's DRA driver names them.
std::string ArchitectureName(unsigned int arch, int cc_major, int cc_minor) {
  switch (arch) {
    case 2:
      return "Kepler";
    case 3:
      return "Maxwell";
    case 4:
      return "Pascal";
    case 5:
      return "Volta";
    case 6:
      return "Turing";
    case 7:
      return "Ampere";
    case 8:
      return "Ada Lovelace";
    case 9:
      return "Hopper";
    case 10:
      return "Blackwell";
    default:
      break;
  }
  // Older drivers do not know newer architectures: the compute capability still tells.
  if (cc_major >= 10) return "Blackwell";
  if (cc_major == 9) return "Hopper";
  if (cc_major == 8) return cc_minor == 9 ? "Ada Lovelace" : "Ampere";
  if (cc_major == 7) return cc_minor == 5 ? "Turing" : "Volta";
  return "Unknown";
}

// nvmlBrandType_t (NVML_BRAND_*).
std::string BrandName(unsigned int brand) {
  static const char* const kNames[] = {
      "Unknown",   "Quadro",      "Tesla",     "NVS",        "Grid",      "GeForce",
      "Titan",     "NvidiaVApps", "NvidiaVPC", "NvidiaVCS",  "NvidiaVWS", "NvidiaCloudGaming",
      "QuadroRTX", "NvidiaRTX",   "Nvidia",    "GeForceRTX", "TitanRTX"};
  return brand < std::size(kNames) ? kNames[brand] : "Unknown";
}

// "00000000:07:00.0" -> "0000:07:00.0": the form sysfs and NVIDIA's DRA driver use.
std::string NormalizeBusId(const char* raw) {
  std::string s = absl::AsciiStrToLower(raw);
  if (auto colon = s.find(':'); colon != std::string::npos && colon > 4) {
    s = s.substr(colon - 4);
  }
  return s;
}

// The PCIe root complex of a PCI device ("pci0000:00"): the first directory under
// /sys/devices on the device's resolved sysfs path. Empty when sysfs does not know it.
std::string PcieRoot(const std::string& sysfs_root, const std::string& bus_id) {
  const std::string link = sysfs_root + "/bus/pci/devices/" + bus_id;
  char resolved[PATH_MAX];
  if (realpath(link.c_str(), resolved) == nullptr) return "";
  for (const auto& part : absl::StrSplit(std::string(resolved), '/')) {
    if (part.size() > 3 && part.substr(0, 3) == "pci") return std::string(part);
  }
  return "";
}

std::string MigProfile(const nvmlDeviceAttributes_t& a) {
  // NVIDIA names profiles by GPU instance slices and memory rounded up to whole GB (a 3-slice
  // instance of 40192 MiB is 3g.40gb).
  const unsigned long long gb = (a.memorySizeMB + 1023) / 1024;
  return std::to_string(a.gpuInstanceSliceCount) + "g." + std::to_string(gb) + "gb";
}

// The capability device file a MIG access file names ("DeviceFileMinor: 12" ->
// /dev/nvidia-caps/nvidia-cap12). Empty when the file is missing or says nothing.
std::string CapDeviceNode(const std::string& access_file) {
  std::ifstream in(access_file);
  std::string line;
  while (std::getline(in, line)) {
    int minor = -1;
    if (std::sscanf(line.c_str(), "DeviceFileMinor: %d", &minor) == 1 && minor >= 0) {
      return "/dev/nvidia-caps/nvidia-cap" + std::to_string(minor);
    }
  }
  return "";
}

// "MIG 1g.5gb" -> "1g.5gb"; computed as MigProfile does when the driver gives no name.
std::string GpuInstanceProfileName(const nvmlGpuInstanceProfileInfo_v2_t& info) {
  std::string name(info.name, strnlen(info.name, sizeof(info.name)));
  if (name.rfind("MIG ", 0) == 0) name = name.substr(4);
  if (!name.empty()) return name;
  const unsigned long long gb = (info.memorySizeMB + 1023) / 1024;
  return std::to_string(info.sliceCount) + "g." + std::to_string(gb) + "gb";
}

Quantity Mebibytes(unsigned long long mib) {
  return Quantity::FromInt(static_cast<int64_t>(mib) * 1024 * 1024, Quantity::Format::kBinarySI);
}

}  // namespace

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

  // Initialises NVML for one change of MIG instances (end it with a ShutdownOnExit):
  // FailedPrecondition when the library lacks the MIG functions, Unavailable when nvmlInit fails.
  absl::Status InitForMig() const {
    if (!missing_mig.empty()) {
      return absl::FailedPreconditionError("the NVML library lacks " + missing_mig.front());
    }
    if (nvmlReturn_t rc = Init(); rc != kSuccess) {
      return absl::UnavailableError(Error("nvmlInit_v2", rc));
    }
    return absl::OkStatus();
  }
  struct ShutdownOnExit {
    const Api& nv;
    ~ShutdownOnExit() { nv.Shutdown(); }
  };
};

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

absl::StatusOr<Inventory> NvmlSource::Discover() {
  const Api& nv = *api_;
  if (nvmlReturn_t rc = nv.Init(); rc != kSuccess) {
    return absl::UnavailableError(nv.Error("nvmlInit_v2", rc));
  }
  // NVML is reference counted: every successful init needs its shutdown, whatever fails below.
  struct ShutdownGuard {
    const Api& nv;
    ~ShutdownGuard() { nv.Shutdown(); }
  } guard{nv};
  auto fail = [&](const std::string& call, nvmlReturn_t rc) {
    return absl::UnavailableError(nv.Error(call, rc));
  };

  char version[kVersionBuffer] = {};
  if (nvmlReturn_t rc = nv.SystemGetDriverVersion(version, sizeof(version)); rc != kSuccess) {
    return fail("nvmlSystemGetDriverVersion", rc);
  }
  int cuda = 0;
  if (nvmlReturn_t rc = nv.SystemGetCudaDriverVersion(&cuda); rc != kSuccess) {
    return fail("nvmlSystemGetCudaDriverVersion_v2", rc);
  }
  const std::string driver_text = version;
  // 12060 -> "12.6".
  const std::string cuda_text =
      std::to_string(cuda / 1000) + "." + std::to_string(cuda % 1000 / 10);
  const model::Version driver_version{SemVer(driver_text)};
  const model::Version cuda_version{SemVer(cuda_text)};

  unsigned int count = 0;
  if (nvmlReturn_t rc = nv.DeviceGetCount(&count); rc != kSuccess) {
    return fail("nvmlDeviceGetCount_v2", rc);
  }

  Inventory inv;
  inv.common_device_nodes = {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"};
  std::set<std::string> products;
  std::string first_arch;
  int first_cc_major = 0, first_cc_minor = 0;
  unsigned long long first_memory_mib = 0;
  bool mig_capable = count > 0, any_mig = false;
  for (unsigned int index = 0; index < count; ++index) {
    const std::string at = "GPU " + std::to_string(index) + ": ";
    nvmlDevice_t dev = nullptr;
    if (nvmlReturn_t rc = nv.DeviceGetHandleByIndex(index, &dev); rc != kSuccess) {
      return fail(at + "nvmlDeviceGetHandleByIndex_v2", rc);
    }
    char name[kNameBuffer] = {}, uuid[kUuidBuffer] = {};
    if (nvmlReturn_t rc = nv.DeviceGetName(dev, name, sizeof(name)); rc != kSuccess) {
      return fail(at + "nvmlDeviceGetName", rc);
    }
    if (nvmlReturn_t rc = nv.DeviceGetUUID(dev, uuid, sizeof(uuid)); rc != kSuccess) {
      return fail(at + "nvmlDeviceGetUUID", rc);
    }
    nvmlPciInfo_t pci{};
    if (nvmlReturn_t rc = nv.DeviceGetPciInfo(dev, &pci); rc != kSuccess) {
      return fail(at + "nvmlDeviceGetPciInfo_v3", rc);
    }
    nvmlMemory_t memory{};
    if (nvmlReturn_t rc = nv.DeviceGetMemoryInfo(dev, &memory); rc != kSuccess) {
      return fail(at + "nvmlDeviceGetMemoryInfo", rc);
    }
    int cc_major = 0, cc_minor = 0;
    if (nvmlReturn_t rc = nv.DeviceGetCudaComputeCapability(dev, &cc_major, &cc_minor);
        rc != kSuccess) {
      return fail(at + "nvmlDeviceGetCudaComputeCapability", rc);
    }
    unsigned int brand = 0, arch = 0, minor = index;
    if (nv.DeviceGetBrand(dev, &brand) != kSuccess) brand = 0;
    if (nv.DeviceGetArchitecture(dev, &arch) != kSuccess) arch = 0;
    // The minor number names /dev/nvidia<minor>; it can differ from the NVML index.
    if (nvmlReturn_t rc = nv.DeviceGetMinorNumber(dev, &minor); rc != kSuccess) {
      return fail(at + "nvmlDeviceGetMinorNumber", rc);
    }
    unsigned int mig_current = 0, mig_pending = 0;
    nvmlReturn_t mig_rc = nv.DeviceGetMigMode(dev, &mig_current, &mig_pending);
    if (mig_rc != kSuccess && mig_rc != kNotSupported) {
      return fail(at + "nvmlDeviceGetMigMode", mig_rc);
    }
    mig_capable = mig_capable && mig_rc == kSuccess;

    const std::string architecture = ArchitectureName(arch, cc_major, cc_minor);
    const std::string bus_id = NormalizeBusId(pci.busId);
    const std::string pcie_root = PcieRoot(sysfs_root_, bus_id);
    const std::string cc_text = std::to_string(cc_major) + "." + std::to_string(cc_minor);
    products.insert(name);
    if (index == 0) {
      first_arch = architecture;
      first_cc_major = cc_major;
      first_cc_minor = cc_minor;
      first_memory_mib = memory.total / (1024 * 1024);
    }
    auto common = [&](model::Device& d) {
      d.attributes["productName"] = std::string(name);
      d.attributes["brand"] = BrandName(brand);
      d.attributes["architecture"] = architecture;
      d.attributes["cudaComputeCapability"] = model::Version{SemVer(cc_text)};
      d.attributes["driverVersion"] = driver_version;
      d.attributes["cudaDriverVersion"] = cuda_version;
      d.attributes["pcieBusID"] = bus_id;
      if (!pcie_root.empty()) d.attributes["resource.kubernetes.io/pcieRoot"] = pcie_root;
    };
    const std::string gpu_name = "gpu-" + std::to_string(index);
    const std::string dev_node = "/dev/nvidia" + std::to_string(minor);

    if (mig_rc != kSuccess || mig_current != kMigEnable) {
      model::Device d;
      d.name = gpu_name;
      common(d);
      d.attributes["type"] = std::string("gpu");
      d.attributes["uuid"] = std::string(uuid);
      d.attributes["index"] = static_cast<int64_t>(index);
      d.attributes["minor"] = static_cast<int64_t>(minor);
      d.capacity["memory"] = model::DeviceCapacity{
          Quantity::FromInt(static_cast<int64_t>(memory.total), Quantity::Format::kBinarySI),
          nullptr};
      inv.local[d.name] = LocalDevice{uuid, static_cast<int>(index), "", {dev_node}};
      inv.devices.push_back(std::move(d));
      continue;
    }

    if (mig_strategy_ == MigStrategy::kDynamic) {
      // MIG mode, dynamic: every placement of every profile, over a counter set of this GPU
      // with a counter per memory slice (mig.h).
      any_mig = true;
      unsigned int max_mig = 0;
      if (nvmlReturn_t rc = nv.DeviceGetMaxMigDeviceCount(dev, &max_mig); rc != kSuccess) {
        return fail(at + "nvmlDeviceGetMaxMigDeviceCount", rc);
      }
      // The MIG devices that exist, by GPU instance: compute instance and UUID.
      std::map<int64_t, std::pair<int64_t, std::string>> mig_by_gi;
      for (unsigned int m = 0; m < max_mig; ++m) {
        nvmlDevice_t mig = nullptr;
        nvmlReturn_t rc = nv.DeviceGetMigDeviceHandleByIndex(dev, m, &mig);
        if (rc == kNotFound) continue;
        if (rc != kSuccess) return fail(at + "nvmlDeviceGetMigDeviceHandleByIndex", rc);
        char mig_uuid[kUuidBuffer] = {};
        unsigned int gi = 0, ci = 0;
        if (nv.DeviceGetUUID(mig, mig_uuid, sizeof(mig_uuid)) == kSuccess &&
            nv.DeviceGetGpuInstanceId(mig, &gi) == kSuccess &&
            nv.DeviceGetComputeInstanceId(mig, &ci) == kSuccess) {
          mig_by_gi[gi] = {ci, mig_uuid};
        }
      }
      struct Existing {
        int64_t id, profile_id, start, size;
      };
      std::vector<Existing> existing;
      std::vector<MigPlacementSpec> placements;
      int64_t memory_slices = 0;
      for (unsigned int p = 0; p < kMaxGpuInstanceProfiles; ++p) {
        const std::string pat = at + "GPU instance profile " + std::to_string(p) + ": ";
        nvmlGpuInstanceProfileInfo_v2_t info{};
        info.version = kGpuInstanceProfileInfoV2;
        nvmlReturn_t rc = nv.DeviceGetGpuInstanceProfileInfoV(dev, p, &info);
        if (rc == kNotSupported || rc == kInvalidArgument || rc == kNotFound) continue;
        if (rc != kSuccess) return fail(pat + "nvmlDeviceGetGpuInstanceProfileInfoV", rc);
        if (info.sliceCount == 0) continue;
        unsigned int n = 0;
        rc = nv.DeviceGetGpuInstancePossiblePlacements(dev, p, nullptr, &n);
        if (rc == kNotSupported) continue;
        if (rc != kSuccess) return fail(pat + "nvmlDeviceGetGpuInstancePossiblePlacements_v2", rc);
        std::vector<nvmlGpuInstancePlacement_t> found(n);
        if (n > 0) {
          rc = nv.DeviceGetGpuInstancePossiblePlacements(dev, p, found.data(), &n);
          if (rc != kSuccess) {
            return fail(pat + "nvmlDeviceGetGpuInstancePossiblePlacements_v2", rc);
          }
          found.resize(std::min<size_t>(n, found.size()));
        }
        const std::string profile = GpuInstanceProfileName(info);
        for (const auto& pl : found) {
          // Counters are named per memory slice and a counter set holds at most 32 counters.
          if (pl.size == 0 || pl.start + pl.size > 30 || pl.start + pl.size < pl.start) {
            return absl::InternalError(pat + "NVML gave an impossible placement (start " +
                                       std::to_string(pl.start) + ", size " +
                                       std::to_string(pl.size) + ")");
          }
          memory_slices = std::max<int64_t>(memory_slices, pl.start + pl.size);
          placements.push_back(MigPlacementSpec{
              gpu_name, uuid, static_cast<int64_t>(index), profile, p, pl.start, pl.size,
              Mebibytes(info.memorySizeMB), info.multiprocessorCount, info.sliceCount});
        }
        if (info.instanceCount == 0) continue;
        std::vector<nvmlGpuInstance_t> gis(info.instanceCount);
        unsigned int have = info.instanceCount;
        rc = nv.DeviceGetGpuInstances(dev, p, gis.data(), &have);
        if (rc != kSuccess) return fail(pat + "nvmlDeviceGetGpuInstances", rc);
        for (unsigned int g = 0; g < std::min<unsigned int>(have, info.instanceCount); ++g) {
          nvmlGpuInstanceInfo_t gi_info{};
          if (nvmlReturn_t rc2 = nv.GpuInstanceGetInfo(gis[g], &gi_info); rc2 != kSuccess) {
            return fail(pat + "nvmlGpuInstanceGetInfo", rc2);
          }
          existing.push_back(
              Existing{gi_info.id, p, gi_info.placement.start, gi_info.placement.size});
        }
      }
      if (placements.empty()) {
        spdlog::warn(
            "{} ({}) is in MIG mode but NVML lists no GPU instance placements: nothing "
            "of it is published",
            uuid, at.substr(0, at.size() - 2));
        continue;
      }
      inv.shared_counters.push_back(DynamicMigCounterSet(
          gpu_name,
          Quantity::FromInt(static_cast<int64_t>(memory.total), Quantity::Format::kBinarySI),
          max_mig, memory_slices));
      int left_out = 0;
      for (const MigPlacementSpec& p : placements) {
        const Existing* mine = nullptr;
        bool foreign = false;
        for (const Existing& e : existing) {
          if (e.start >= p.start + p.size || p.start >= e.start + e.size) continue;
          if (!Holds(InstanceKey{uuid, e.id, e.profile_id, e.start})) {
            foreign = true;
          } else if (e.profile_id == p.profile_id && e.start == p.start) {
            mine = &e;
          }
        }
        if (foreign) {
          ++left_out;
          continue;
        }
        model::Device d = NewMigPlacementDevice(p);
        common(d);
        LocalDevice local{"", static_cast<int>(index), uuid, {dev_node}};
        local.mig_placement = LocalDevice::MigPlacement{p.profile_id, p.start, p.size};
        if (mine != nullptr) {
          // The agent's instance of this placement: its ids, which health events carry.
          local.gpu_instance_id = mine->id;
          if (auto it = mig_by_gi.find(mine->id); it != mig_by_gi.end()) {
            local.compute_instance_id = it->second.first;
            local.uuid = it->second.second;
          }
        }
        inv.local[d.name] = std::move(local);
        inv.devices.push_back(std::move(d));
      }
      if (left_out > 0) {
        spdlog::info(
            "{}: {} MIG placements left out: they overlap GPU instances this agent did "
            "not create",
            gpu_name, left_out);
      }
      continue;
    }

    // MIG mode: the GPU instances that exist, over a counter set of this GPU.
    any_mig = true;
    unsigned int max_mig = 0;
    if (nvmlReturn_t rc = nv.DeviceGetMaxMigDeviceCount(dev, &max_mig); rc != kSuccess) {
      return fail(at + "nvmlDeviceGetMaxMigDeviceCount", rc);
    }
    // What all MIG devices of the GPU together can take: its memory and, as compute, the GPU
    // instance slices (7 on A100/H100: one per possible MIG device).
    inv.shared_counters.push_back(MigCounterSet(
        gpu_name,
        Quantity::FromInt(static_cast<int64_t>(memory.total), Quantity::Format::kBinarySI),
        max_mig));
    std::map<std::string, int64_t> seen;
    for (unsigned int m = 0; m < max_mig; ++m) {
      nvmlDevice_t mig = nullptr;
      nvmlReturn_t rc = nv.DeviceGetMigDeviceHandleByIndex(dev, m, &mig);
      if (rc == kNotFound) continue;  // no MIG device in this slot
      if (rc != kSuccess) return fail(at + "nvmlDeviceGetMigDeviceHandleByIndex", rc);
      const std::string mat = at + "MIG device " + std::to_string(m) + ": ";
      char mig_uuid[kUuidBuffer] = {};
      if (nvmlReturn_t rc2 = nv.DeviceGetUUID(mig, mig_uuid, sizeof(mig_uuid)); rc2 != kSuccess) {
        return fail(mat + "nvmlDeviceGetUUID", rc2);
      }
      nvmlDeviceAttributes_t attrs{};
      if (nvmlReturn_t rc2 = nv.DeviceGetAttributes(mig, &attrs); rc2 != kSuccess) {
        return fail(mat + "nvmlDeviceGetAttributes_v2", rc2);
      }
      const std::string profile = MigProfile(attrs);
      model::Device d = NewMigDevice(MigDeviceSpec{
          gpu_name, uuid, static_cast<int64_t>(index), mig_uuid, profile, seen[profile]++,
          Mebibytes(attrs.memorySizeMB), attrs.multiprocessorCount, attrs.gpuInstanceSliceCount});
      common(d);
      LocalDevice local{mig_uuid, static_cast<int>(index), uuid, {dev_node}};
      unsigned int gi = 0, ci = 0;
      if (nv.DeviceGetGpuInstanceId(mig, &gi) == kSuccess &&
          nv.DeviceGetComputeInstanceId(mig, &ci) == kSuccess) {
        // Health events name the MIG device by these ids (nvmlEventData_t).
        local.gpu_instance_id = static_cast<int64_t>(gi);
        local.compute_instance_id = static_cast<int64_t>(ci);
        const std::string base = proc_root_ + "/driver/nvidia/capabilities/gpu" +
                                 std::to_string(minor) + "/mig/gi" + std::to_string(gi);
        for (const std::string& access :
             {base + "/access", base + "/ci" + std::to_string(ci) + "/access"}) {
          if (std::string cap = CapDeviceNode(access); !cap.empty()) {
            local.device_nodes.push_back(cap);
          }
        }
      }
      inv.local[d.name] = std::move(local);
      inv.devices.push_back(std::move(d));
    }
  }

  // GPU Feature Discovery's labels.
  auto& l = inv.node_labels;
  if (count > 0) {
    std::string product = products.size() == 1 ? *products.begin() : "mixed";
    std::replace(product.begin(), product.end(), ' ', '-');
    l["nvidia.com/gpu.present"] = "true";
    l["nvidia.com/gpu.product"] = product;
    l["nvidia.com/gpu.count"] = std::to_string(count);
    l["nvidia.com/gpu.memory"] = std::to_string(first_memory_mib);
    std::string family = absl::AsciiStrToLower(first_arch);
    std::replace(family.begin(), family.end(), ' ', '-');
    l["nvidia.com/gpu.family"] = family;
    l["nvidia.com/gpu.compute.major"] = std::to_string(first_cc_major);
    l["nvidia.com/gpu.compute.minor"] = std::to_string(first_cc_minor);
  }
  std::vector<std::string> dv = absl::StrSplit(driver_text, '.');
  l["nvidia.com/cuda.driver.major"] = dv[0];
  l["nvidia.com/cuda.driver.minor"] = dv.size() > 1 ? dv[1] : "0";
  l["nvidia.com/cuda.driver.rev"] = dv.size() > 2 ? dv[2] : "0";
  l["nvidia.com/cuda.runtime.major"] = std::to_string(cuda / 1000);
  l["nvidia.com/cuda.runtime.minor"] = std::to_string(cuda % 1000 / 10);
  l["nvidia.com/mig.capable"] = mig_capable ? "true" : "false";
  if (any_mig) l["nvidia.com/mig.strategy"] = "mixed";
  inv.node_capacity["nvidia.com/gpu"] = std::to_string(count);
  return inv;
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

absl::Status NvmlSource::WatchEvents(const std::function<void(const DeviceEvent&)>& on_event,
                                     const std::atomic<bool>& stop) {
  const Api& nv = *api_;
  if (nv.EventSetCreate == nullptr || nv.EventSetFree == nullptr || nv.EventSetWait == nullptr ||
      nv.DeviceRegisterEvents == nullptr || nv.DeviceGetSupportedEventTypes == nullptr) {
    return absl::UnimplementedError("the NVML library has no event functions");
  }
  if (nvmlReturn_t rc = nv.Init(); rc != kSuccess) {
    return absl::UnavailableError(nv.Error("nvmlInit_v2", rc));
  }
  struct ShutdownGuard {
    const Api& nv;
    ~ShutdownGuard() { nv.Shutdown(); }
  } guard{nv};
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
