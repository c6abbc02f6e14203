#include "agent/mig.h"

#include <algorithm>

#include "absl/strings/ascii.h"

namespace qm::agent {

absl::StatusOr<MigStrategy> ParseMigStrategy(const std::string& text) {
  if (text == "static") return MigStrategy::kStatic;
  if (text == "dynamic") return MigStrategy::kDynamic;
  return absl::InvalidArgumentError("want static or dynamic, got \"" + text + "\"");
}

std::string MigCounterSetName(const std::string& gpu_name) { return gpu_name + "-counter-set"; }

model::CounterSet MigCounterSet(const std::string& gpu_name, const Quantity& memory,
                                int64_t compute_slices) {
  model::CounterSet set;
  set.name = MigCounterSetName(gpu_name);
  set.counters["memory"] = memory;
  set.counters["compute-slices"] = Quantity::FromInt(compute_slices);
  return set;
}

std::string MemorySliceCounter(int64_t slice) { return "memory-slice-" + std::to_string(slice); }

model::CounterSet DynamicMigCounterSet(const std::string& gpu_name, const Quantity& memory,
                                       int64_t compute_slices, int64_t memory_slices) {
  model::CounterSet set = MigCounterSet(gpu_name, memory, compute_slices);
  for (int64_t k = 0; k < memory_slices; ++k) {
    set.counters[MemorySliceCounter(k)] = Quantity::FromInt(1);
  }
  return set;
}

namespace {

// What every MIG device has, whichever strategy publishes it: type, parent, profile, capacity,
// and the memory and compute slices it takes of its GPU's counter set.
template <typename Spec>
model::Device MigDeviceOf(std::string name, const Spec& spec) {
  model::Device d;
  d.name = std::move(name);
  d.attributes["type"] = std::string("mig");
  d.attributes["parentUUID"] = spec.parent_uuid;
  d.attributes["parentIndex"] = spec.parent_index;
  d.attributes["profile"] = spec.profile;
  d.capacity["memory"] = model::DeviceCapacity{spec.memory, nullptr};
  d.capacity["multiprocessors"] =
      model::DeviceCapacity{Quantity::FromInt(spec.multiprocessors), nullptr};
  model::DeviceCounterConsumption use;
  use.counter_set = MigCounterSetName(spec.gpu_name);
  use.counters["memory"] = spec.memory;
  use.counters["compute-slices"] = Quantity::FromInt(spec.gpu_instance_slices);
  d.consumes_counters.push_back(std::move(use));
  return d;
}

}  // namespace

model::Device NewMigDevice(const MigDeviceSpec& spec) {
  std::string clean = spec.profile;
  std::replace(clean.begin(), clean.end(), '.', '-');
  model::Device d =
      MigDeviceOf(spec.gpu_name + "-mig-" + clean + "-" + std::to_string(spec.nth), spec);
  d.attributes["uuid"] = spec.uuid;
  d.attributes["index"] = spec.nth;
  return d;
}

std::string MigPlacementDeviceName(const std::string& gpu_name, const std::string& profile,
                                   int64_t start) {
  std::string clean = absl::AsciiStrToLower(profile);
  for (char& c : clean) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c))) c = '-';
  }
  return gpu_name + "-mig-" + clean + "-at-" + std::to_string(start);
}

model::Device NewMigPlacementDevice(const MigPlacementSpec& spec) {
  model::Device d =
      MigDeviceOf(MigPlacementDeviceName(spec.gpu_name, spec.profile, spec.start), spec);
  d.attributes["placementStart"] = spec.start;
  d.attributes["placementSize"] = spec.size;
  for (int64_t k = spec.start; k < spec.start + spec.size; ++k) {
    d.consumes_counters.front().counters[MemorySliceCounter(k)] = Quantity::FromInt(1);
  }
  return d;
}

std::vector<MigPlacementSpec> StandardMigPlacements(const std::string& gpu_name,
                                                    const std::string& parent_uuid,
                                                    int64_t parent_index, int64_t compute_slices,
                                                    const Quantity& memory) {
  struct Profile {
    int64_t id;      // NVML_GPU_INSTANCE_PROFILE_<n>_SLICE
    int64_t slices;  // compute (GPU instance) slices
    int64_t size;    // memory slices
    std::vector<int64_t> starts;
  };
  std::vector<Profile> profiles;
  int64_t memory_slices = 0;
  if (compute_slices == 7) {
    memory_slices = 8;
    profiles = {{0, 1, 1, {0, 1, 2, 3, 4, 5, 6}},
                {1, 2, 2, {0, 2, 4}},
                {2, 3, 4, {0, 4}},
                {3, 4, 4, {0}},
                {4, 7, 8, {0}}};
  } else if (compute_slices == 4) {
    memory_slices = 4;
    profiles = {{0, 1, 1, {0, 1, 2, 3}}, {1, 2, 2, {0, 2}}, {3, 4, 4, {0}}};
  }
  std::vector<MigPlacementSpec> out;
  for (const Profile& p : profiles) {
    const int64_t bytes = memory.Value() / memory_slices * p.size;
    const int64_t gb = (bytes + (int64_t{1} << 30) - 1) >> 30;
    const std::string name = std::to_string(p.slices) + "g." + std::to_string(gb) + "gb";
    for (int64_t start : p.starts) {
      out.push_back(MigPlacementSpec{gpu_name, parent_uuid, parent_index, name, p.id, start, p.size,
                                     Quantity::FromInt(bytes, Quantity::Format::kBinarySI),
                                     p.slices * 14, p.slices});
    }
  }
  return out;
}

}  // namespace qm::agent
