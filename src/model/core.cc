#include "model/core.h"

#include <algorithm>

namespace qm::model {

int64_t Pod::GracePeriodSeconds() const {
  return std::max<int64_t>(0,
                           termination_grace_period_seconds.value_or(kDefaultGracePeriodSeconds));
}

std::optional<std::string> AllocatedNode(const NodeRelations& claim) {
  const auto& nodes = claim.allocated_nodes;
  if (nodes.empty()) return std::nullopt;
  for (const auto& n : nodes) {
    if (n != nodes.front()) return std::nullopt;
  }
  return nodes.front();
}

}  // namespace qm::model
