#include "agent/inventory.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"

namespace qm::agent {

void SetGpuFeatureLabels(const GpuLabelFacts& facts, Inventory* inv) {
  auto& l = inv->node_labels;
  if (facts.count > 0) {
    std::string product = facts.products.size() == 1 ? *facts.products.begin() : "mixed";
    std::replace(product.begin(), product.end(), ' ', '-');
    l["nvidia.com/gpu.present"] = "true";
    l["nvidia.com/gpu.product"] = product;
    l["nvidia.com/gpu.count"] = std::to_string(facts.count);
    l["nvidia.com/gpu.memory"] = std::to_string(facts.first_memory_mib);
    std::string family = absl::AsciiStrToLower(facts.first_architecture);
    std::replace(family.begin(), family.end(), ' ', '-');
    l["nvidia.com/gpu.family"] = family;
    l["nvidia.com/gpu.compute.major"] = facts.compute_major;
    l["nvidia.com/gpu.compute.minor"] = facts.compute_minor;
  }
  std::vector<std::string> dv = absl::StrSplit(facts.driver_version, '.');
  l["nvidia.com/cuda.driver.major"] = dv[0];
  l["nvidia.com/cuda.driver.minor"] = dv.size() > 1 ? dv[1] : "0";
  l["nvidia.com/cuda.driver.rev"] = dv.size() > 2 ? dv[2] : "0";
  l["nvidia.com/cuda.runtime.major"] = facts.cuda_major;
  l["nvidia.com/cuda.runtime.minor"] = facts.cuda_minor;
  l["nvidia.com/mig.capable"] = facts.mig_capable ? "true" : "false";
  if (facts.any_mig) l["nvidia.com/mig.strategy"] = "mixed";
  inv->node_capacity["nvidia.com/gpu"] = std::to_string(facts.count);
}

}  // namespace qm::agent
