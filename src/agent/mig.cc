#include "agent/mig.h"

#include <algorithm>

namespace qm::agent {

std::string MigCounterSetName(const std::string& gpu_name) { return gpu_name + "-counter-set"; }

model::CounterSet MigCounterSet(const std::string& gpu_name, const Quantity& memory,
                                int64_t compute_slices) {
  model::CounterSet set;
  set.name = MigCounterSetName(gpu_name);
  set.counters["memory"] = memory;
  set.counters["compute-slices"] = Quantity::FromInt(compute_slices);
  return set;
}

model::Device NewMigDevice(const MigDeviceSpec& spec) {
  std::string clean = spec.profile;
  std::replace(clean.begin(), clean.end(), '.', '-');
  model::Device d;
  d.name = spec.gpu_name + "-mig-" + clean + "-" + std::to_string(spec.nth);
  d.attributes["type"] = std::string("mig");
  d.attributes["uuid"] = spec.uuid;
  d.attributes["parentUUID"] = spec.parent_uuid;
  d.attributes["parentIndex"] = spec.parent_index;
  d.attributes["profile"] = spec.profile;
  d.attributes["index"] = spec.nth;
  d.capacity["memory"] = model::DeviceCapacity{spec.memory, std::nullopt};
  d.capacity["multiprocessors"] =
      model::DeviceCapacity{Quantity::FromInt(spec.multiprocessors), std::nullopt};
  model::DeviceCounterConsumption use;
  use.counter_set = MigCounterSetName(spec.gpu_name);
  use.counters["memory"] = spec.memory;
  use.counters["compute-slices"] = Quantity::FromInt(spec.gpu_instance_slices);
  d.consumes_counters.push_back(std::move(use));
  return d;
}

}  // namespace qm::agent
