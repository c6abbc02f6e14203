#include "agent/simulated_source.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "agent/mig.h"
#include "common/quantity.h"

namespace qm::agent {
namespace {

struct KnownModel {
  const char* match;  // matched as a case-insensitive substring; more specific names first
  const char* architecture;
  const char* compute_capability;
  bool mig_capable;
  int mig_slices;  // GPU instance slices: the most MIG devices one GPU holds
};

// What NVML would report for the models users are likely to simulate.
constexpr KnownModel kModels[] = {
    {"GH200", "Hopper", "9.0", true, 7},      {"H200", "Hopper", "9.0", true, 7},
    {"H100", "Hopper", "9.0", true, 7},       {"H20", "Hopper", "9.0", true, 7},
    {"B200", "Blackwell", "10.0", true, 7},   {"B100", "Blackwell", "10.0", true, 7},
    {"A100", "Ampere", "8.0", true, 7},       {"A30", "Ampere", "8.0", true, 4},
    {"A40", "Ampere", "8.6", false, 0},       {"A10", "Ampere", "8.6", false, 0},
    {"L40", "Ada Lovelace", "8.9", false, 0}, {"L4", "Ada Lovelace", "8.9", false, 0},
    {"T4", "Turing", "7.5", false, 0},        {"V100", "Volta", "7.0", false, 0},
};

const KnownModel* FindModel(const std::string& model) {
  const std::string upper = absl::AsciiStrToUpper(model);
  for (const auto& m : kModels) {
    if (upper.find(m.match) != std::string::npos) return &m;
  }
  return nullptr;
}

absl::Status FieldError(const std::string& path, const std::string& message) {
  return absl::InvalidArgumentError(path + ": " + message);
}

// "560.35.03" -> "560.35.3", "12.6" -> "12.6.0": the semantic versions DRA attributes hold.
absl::StatusOr<std::string> SemVer(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, '.');
  if (parts.empty() || parts.size() > 3) return absl::InvalidArgumentError("not a version");
  std::vector<std::string> out;
  for (const auto& p : parts) {
    if (p.empty() || !std::all_of(p.begin(), p.end(), [](char c) { return std::isdigit(c); })) {
      return absl::InvalidArgumentError("not a version: " + text);
    }
    size_t first = p.find_first_not_of('0');
    out.push_back(first == std::string::npos ? "0" : p.substr(first));
  }
  while (out.size() < 3) out.push_back("0");
  return out[0] + "." + out[1] + "." + out[2];
}

// 128 stable bits from a text, formatted as a UUID: FNV-1a twice with different offsets.
std::string StableUuid(const std::string& text) {
  auto fnv = [&](uint64_t h) {
    for (unsigned char c : text) {
      h ^= c;
      h *= 1099511628211ULL;
    }
    return h;
  };
  const uint64_t a = fnv(1469598103934665603ULL), b = fnv(0x9e3779b97f4a7c15ULL);
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xffff),
                static_cast<unsigned>(b >> 48),
                static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return buf;
}

// "3g.40gb" -> compute slices 3, memory 40 (GB, published as Gi).
bool ParseMigProfile(const std::string& profile, int* slices, int* memory_gb) {
  int s = 0, m = 0;
  char tail[8] = {};
  if (std::sscanf(profile.c_str(), "%dg.%d%7s", &s, &m, tail) != 3) return false;
  if (std::string(tail) != "gb" || s < 1 || s > 8 || m < 1) return false;
  *slices = s;
  *memory_gb = m;
  return true;
}

std::string Scalar(const YAML::Node& node) { return node.IsScalar() ? node.as<std::string>() : ""; }

}  // namespace

absl::StatusOr<Simulation> ParseSimulation(const std::string& yaml) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(std::string("not YAML: ") + e.what());
  }
  if (!root.IsMap()) return absl::InvalidArgumentError("the file must be a YAML mapping");
  Simulation sim;
  for (const auto& kv : root) {
    const std::string key = Scalar(kv.first);
    if (key == "driverVersion") {
      sim.driver_version = Scalar(kv.second);
      if (!SemVer(sim.driver_version).ok()) {
        return FieldError(key,
                          "want a version such as 560.35.03, got \"" + sim.driver_version + "\"");
      }
    } else if (key == "cudaDriverVersion") {
      sim.cuda_driver_version = Scalar(kv.second);
      if (!SemVer(sim.cuda_driver_version).ok()) {
        return FieldError(key,
                          "want a version such as 12.6, got \"" + sim.cuda_driver_version + "\"");
      }
    } else if (key != "gpus") {
      return FieldError(key, "unknown field (want gpus, driverVersion, cudaDriverVersion)");
    }
  }
  const YAML::Node gpus = root["gpus"];
  if (!gpus || !gpus.IsSequence() || gpus.size() == 0) {
    return FieldError("gpus", "required: a list of {model, memory, count}");
  }
  for (size_t i = 0; i < gpus.size(); ++i) {
    const std::string path = "gpus[" + std::to_string(i) + "]";
    const YAML::Node g = gpus[i];
    if (!g.IsMap()) return FieldError(path, "want a mapping with model, memory and count");
    SimulatedGpus out;
    for (const auto& kv : g) {
      const std::string key = Scalar(kv.first);
      const std::string fpath = path + "." + key;
      if (key == "model") {
        out.model = Scalar(kv.second);
      } else if (key == "memory") {
        out.memory = Scalar(kv.second);
      } else if (key == "count") {
        try {
          out.count = kv.second.as<int>();
        } catch (const YAML::Exception&) {
          return FieldError(fpath, "want a whole number");
        }
        if (out.count < 1 || out.count > 1024) return FieldError(fpath, "want 1 to 1024");
      } else if (key == "architecture") {
        out.architecture = Scalar(kv.second);
      } else if (key == "cudaComputeCapability") {
        out.compute_capability = Scalar(kv.second);
        if (!SemVer(out.compute_capability).ok()) {
          return FieldError(fpath, "want a version such as 8.0");
        }
      } else if (key == "pcieRoot") {
        out.pcie_root = Scalar(kv.second);
      } else if (key == "unhealthy") {
        out.unhealthy = Scalar(kv.second);
      } else if (key == "mig") {
        if (kv.second.IsScalar() && Scalar(kv.second) == "dynamic") {
          out.mig_dynamic = true;
          continue;
        }
        if (!kv.second.IsSequence()) {
          return FieldError(fpath, "want a list of MIG profiles, or dynamic");
        }
        int slices = 0;
        for (size_t j = 0; j < kv.second.size(); ++j) {
          std::string profile = Scalar(kv.second[j]);
          int s = 0, m = 0;
          if (!ParseMigProfile(profile, &s, &m)) {
            return FieldError(fpath + "[" + std::to_string(j) + "]",
                              "want a MIG profile such as 1g.10gb, got \"" + profile + "\"");
          }
          slices += s;
          out.mig.push_back(profile);
        }
        if (slices > 7) return FieldError(fpath, "the profiles need more than 7 compute slices");
      } else {
        return FieldError(fpath,
                          "unknown field (want model, memory, count, architecture, "
                          "cudaComputeCapability, pcieRoot, mig, unhealthy)");
      }
    }
    if (out.model.empty()) return FieldError(path + ".model", "required");
    if (out.memory.empty()) return FieldError(path + ".memory", "required, e.g. 80Gi");
    auto q = ParseQuantity(out.memory);
    if (!q.ok() || q->Sign() <= 0) {
      return FieldError(path + ".memory",
                        "want a positive quantity such as 80Gi, got \"" + out.memory + "\"");
    }
    sim.gpus.push_back(std::move(out));
  }
  return sim;
}

absl::StatusOr<Inventory> BuildInventory(const Simulation& sim, const std::string& node) {
  Inventory inv;
  inv.common_device_nodes = {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"};
  auto driver = SemVer(sim.driver_version);
  auto cuda = SemVer(sim.cuda_driver_version);
  if (!driver.ok() || !cuda.ok()) return absl::InvalidArgumentError("bad driver versions");
  int index = 0;
  std::set<std::string> models;
  int64_t first_memory_mib = 0;
  std::string first_arch, first_cc;
  bool mig_capable = true, any_mig = false;
  for (size_t i = 0; i < sim.gpus.size(); ++i) {
    const SimulatedGpus& g = sim.gpus[i];
    const std::string path = "gpus[" + std::to_string(i) + "]";
    const KnownModel* known = FindModel(g.model);
    std::string arch = !g.architecture.empty() ? g.architecture
                       : known != nullptr      ? known->architecture
                                               : "";
    std::string cc = !g.compute_capability.empty() ? g.compute_capability
                     : known != nullptr            ? known->compute_capability
                                                   : "";
    if (arch.empty()) {
      return absl::InvalidArgumentError(path + ".architecture: required for model \"" + g.model +
                                        "\", which the agent does not know");
    }
    if (cc.empty()) {
      return absl::InvalidArgumentError(path + ".cudaComputeCapability: required for model \"" +
                                        g.model + "\", which the agent does not know");
    }
    auto cc_version = SemVer(cc);
    if (!cc_version.ok()) return absl::InvalidArgumentError(path + ".cudaComputeCapability: bad");
    auto memory = ParseQuantity(g.memory);
    if (!memory.ok()) return memory.status();
    if ((!g.mig.empty() || g.mig_dynamic) && known != nullptr && !known->mig_capable) {
      return absl::InvalidArgumentError(path + ".mig: " + g.model + " does not support MIG");
    }
    // What one GPU's MIG devices may take together (its counter set): as many slices as the
    // model has (7 for models the agent does not know) and its memory.
    const int max_slices = known != nullptr && known->mig_capable ? known->mig_slices : 7;
    if (!g.mig.empty()) {
      int slices = 0;
      int64_t mig_memory = 0;
      for (const auto& profile : g.mig) {
        int s = 0, m = 0;
        ParseMigProfile(profile, &s, &m);
        slices += s;
        mig_memory += int64_t{m} * 1024 * 1024 * 1024;
      }
      if (slices > max_slices) {
        return absl::InvalidArgumentError(path + ".mig: the profiles need " +
                                          std::to_string(slices) + " compute slices, " + g.model +
                                          " has " + std::to_string(max_slices));
      }
      if (mig_memory > memory->Value()) {
        return absl::InvalidArgumentError(path +
                                          ".mig: the profiles need more memory than the "
                                          "GPU's " +
                                          g.memory);
      }
    }
    models.insert(g.model);
    if (first_arch.empty()) {
      first_arch = arch;
      first_cc = cc;
      first_memory_mib = memory->Value() / (1024 * 1024);
    }
    mig_capable = mig_capable && known != nullptr && known->mig_capable;
    for (int n = 0; n < g.count; ++n, ++index) {
      const std::string uuid = "GPU-" + StableUuid(node + "/gpu/" + std::to_string(index));
      char bus[32];
      std::snprintf(bus, sizeof(bus), "0000:%02x:00.0", (0x10 + index) & 0xff);
      // Attributes as NVIDIA's DRA driver publishes them for a full GPU.
      auto common = [&](model::Device& d) {
        d.attributes["productName"] = g.model;
        d.attributes["brand"] = std::string("Nvidia");
        d.attributes["architecture"] = arch;
        d.attributes["cudaComputeCapability"] = model::Version{*cc_version};
        d.attributes["driverVersion"] = model::Version{*driver};
        d.attributes["cudaDriverVersion"] = model::Version{*cuda};
        d.attributes["pcieBusID"] = std::string(bus);
        d.attributes["resource.kubernetes.io/pcieRoot"] = g.pcie_root;
      };
      const std::string gpu_name = "gpu-" + std::to_string(index);
      const std::string dev_node = "/dev/nvidia" + std::to_string(index);
      if (g.mig_dynamic) {
        // Every placement, over a counter set with a counter per memory slice, exactly as NVML
        // discovery publishes them with --mig-strategy=dynamic.
        auto placements = StandardMigPlacements(gpu_name, uuid, index, max_slices, *memory);
        if (placements.empty()) {
          return absl::InvalidArgumentError(path + ".mig: no standard MIG placements for a GPU " +
                                            "with " + std::to_string(max_slices) +
                                            " GPU instance slices");
        }
        any_mig = true;
        int64_t memory_slices = 0;
        for (const auto& p : placements) {
          memory_slices = std::max(memory_slices, p.start + p.size);
        }
        inv.shared_counters.push_back(
            DynamicMigCounterSet(gpu_name, *memory, max_slices, memory_slices));
        for (const auto& p : placements) {
          model::Device d = NewMigPlacementDevice(p);
          common(d);
          LocalDevice local{"", index, uuid, {dev_node}};
          local.mig_placement = LocalDevice::MigPlacement{p.profile_id, p.start, p.size};
          inv.local[d.name] = std::move(local);
          if (!g.unhealthy.empty()) inv.unhealthy[d.name] = g.unhealthy;
          inv.devices.push_back(std::move(d));
        }
        continue;
      }
      if (g.mig.empty()) {
        model::Device d;
        d.name = gpu_name;
        common(d);
        d.attributes["type"] = std::string("gpu");
        d.attributes["uuid"] = uuid;
        d.attributes["index"] = static_cast<int64_t>(index);
        d.attributes["minor"] = static_cast<int64_t>(index);
        d.capacity["memory"] = model::DeviceCapacity{*memory, nullptr};
        inv.local[d.name] = LocalDevice{uuid, index, "", {dev_node}};
        if (!g.unhealthy.empty()) inv.unhealthy[d.name] = g.unhealthy;
        inv.devices.push_back(std::move(d));
        continue;
      }
      any_mig = true;
      // Over a counter set of the GPU, exactly as NVML discovery publishes MIG devices.
      inv.shared_counters.push_back(MigCounterSet(gpu_name, *memory, max_slices));
      std::map<std::string, int64_t> seen;
      for (const auto& profile : g.mig) {
        int slices = 0, memory_gb = 0;
        ParseMigProfile(profile, &slices, &memory_gb);
        MigDeviceSpec spec{gpu_name,
                           uuid,
                           static_cast<int64_t>(index),
                           "",
                           profile,
                           seen[profile]++,
                           *ParseQuantity(std::to_string(memory_gb) + "Gi"),
                           int64_t{slices} * 14,
                           slices};
        // Stable: derived from the node and the device's name.
        spec.uuid = "MIG-" + StableUuid(node + "/mig/" + NewMigDevice(spec).name);
        model::Device d = NewMigDevice(spec);
        common(d);
        inv.local[d.name] = LocalDevice{spec.uuid, index, uuid, {dev_node}};
        if (!g.unhealthy.empty()) inv.unhealthy[d.name] = g.unhealthy;
        inv.devices.push_back(std::move(d));
      }
    }
  }
  // GPU Feature Discovery's labels.
  GpuLabelFacts facts;
  facts.count = index;
  facts.products = std::move(models);
  facts.first_memory_mib = first_memory_mib;
  facts.first_architecture = first_arch;
  std::vector<std::string> cc_parts = absl::StrSplit(first_cc, '.');
  facts.compute_major = cc_parts[0];
  facts.compute_minor = cc_parts.size() > 1 ? cc_parts[1] : "0";
  facts.driver_version = sim.driver_version;
  std::vector<std::string> cv = absl::StrSplit(sim.cuda_driver_version, '.');
  facts.cuda_major = cv[0];
  facts.cuda_minor = cv.size() > 1 ? cv[1] : "0";
  facts.mig_capable = mig_capable;
  facts.any_mig = any_mig;
  SetGpuFeatureLabels(facts, &inv);
  return inv;
}

SimulatedSource::SimulatedSource(std::string path, std::string node)
    : path_(std::move(path)),
      node_(std::move(node)),
      nonce_(std::to_string(std::random_device{}())) {}

absl::StatusOr<MigInstance> SimulatedSource::Create(const LocalDevice& device) {
  if (!device.mig_placement) {
    return absl::FailedPreconditionError("device " + device.uuid + " is no MIG placement");
  }
  const LocalDevice::MigPlacement& want = *device.mig_placement;
  qm::MutexLock lock(&mu_);
  int64_t id = 1;
  for (const MigInstance& m : instances_) {
    if (m.parent_uuid != device.parent_uuid) continue;
    if (m.start < want.start + want.size && want.start < m.start + m.size) {
      return absl::ResourceExhaustedError(
          "the placement overlaps a GPU instance that exists (GPU instance " +
          std::to_string(m.gpu_instance_id) + ")");
    }
  }
  // The lowest GPU instance id the GPU does not use, as the driver hands them out.
  for (bool used = true; used;) {
    used = false;
    for (const MigInstance& m : instances_) {
      used = used || (m.parent_uuid == device.parent_uuid && m.gpu_instance_id == id);
    }
    if (used) ++id;
  }
  MigInstance m{device.parent_uuid, want.profile_id, want.start, want.size, id, 0, "",
                device.device_nodes};
  // A new instance is a new MIG device: its UUID differs from every earlier one, also from
  // those of an agent that ran before (the nonce).
  m.uuid =
      "MIG-" + StableUuid(node_ + "/mig/" + device.parent_uuid + "/" + std::to_string(want.start) +
                          "/" + nonce_ + "/" + std::to_string(++serial_));
  instances_.push_back(m);
  return m;
}

absl::Status SimulatedSource::Destroy(const MigInstance& instance) {
  qm::MutexLock lock(&mu_);
  std::erase_if(instances_, [&](const MigInstance& m) {
    return m.parent_uuid == instance.parent_uuid && m.gpu_instance_id == instance.gpu_instance_id &&
           m.start == instance.start;
  });
  return absl::OkStatus();
}

void SimulatedSource::Hold(const MigInstance& instance) {
  qm::MutexLock lock(&mu_);
  instances_.push_back(instance);
}

absl::StatusOr<Inventory> SimulatedSource::Discover() {
  std::ifstream in(path_);
  if (!in) return absl::NotFoundError("cannot read " + path_);
  std::stringstream ss;
  ss << in.rdbuf();
  auto sim = ParseSimulation(ss.str());
  if (!sim.ok()) {
    return absl::InvalidArgumentError(path_ + ": " + std::string(sim.status().message()));
  }
  return BuildInventory(*sim, node_);
}

}  // namespace qm::agent
