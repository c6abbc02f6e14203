#include "agent/nvml_source.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
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
}

namespace {

constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kNotSupported = 3;
constexpr nvmlReturn_t kNotFound = 6;
constexpr nvmlReturn_t kTimeout = 10;
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

  std::string Error(const std::string& call, nvmlReturn_t rc) const {
    const char* text = ErrorString != nullptr ? ErrorString(rc) : nullptr;
    return call + ": " + (text != nullptr ? text : "NVML error") + " (" + std::to_string(rc) + ")";
  }
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
          std::nullopt};
      inv.local[d.name] = LocalDevice{uuid, static_cast<int>(index), "", {dev_node}};
      inv.devices.push_back(std::move(d));
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
