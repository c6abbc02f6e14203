// NvmlSource::Discover: every GPU, its MIG devices (static strategy) or MIG placements (dynamic),
// and GPU Feature Discovery's node labels.

#include "agent/nvml_source.h"

#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "agent/mig.h"
#include "agent/nvml_source_internal.h"
#include "common/quantity.h"
#include "spdlog/spdlog.h"

namespace qm::agent {

using namespace nvml_internal;  // NOLINT(google-build-using-namespace)

namespace {

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

std::string nvml_internal::CapDeviceNode(const std::string& access_file) {
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

absl::StatusOr<Inventory> NvmlSource::Discover() {
  const Api& nv = *api_;
  if (absl::Status st = nv.InitNvml(); !st.ok()) return st;
  Api::ShutdownOnExit guard{nv};
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
  GpuLabelFacts facts;
  facts.count = count;
  facts.products = std::move(products);
  facts.first_memory_mib = static_cast<int64_t>(first_memory_mib);
  facts.first_architecture = first_arch;
  facts.compute_major = std::to_string(first_cc_major);
  facts.compute_minor = std::to_string(first_cc_minor);
  facts.driver_version = driver_text;
  facts.cuda_major = std::to_string(cuda / 1000);
  facts.cuda_minor = std::to_string(cuda % 1000 / 10);
  facts.mig_capable = mig_capable;
  facts.any_mig = any_mig;
  SetGpuFeatureLabels(facts, &inv);
  return inv;
}

}  // namespace qm::agent
