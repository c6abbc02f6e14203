#include "service/ledger.h"

#include "model/json/dra_json.h"
#include "nlohmann/json.hpp"

namespace qm::service {

std::vector<store::DeviceClaim> LedgerRows(const model::AllocationResult& allocation,
                                           const std::string& claim_uid) {
  std::vector<store::DeviceClaim> rows;
  for (const auto& r : allocation.results) {
    nlohmann::json consumed = nlohmann::json::object();
    for (const auto& [name, q] : r.consumed_capacity) consumed[name] = q.String();
    rows.push_back(
        {r.driver, r.pool, r.device, r.share_id, claim_uid, r.admin_access, consumed.dump()});
  }
  return rows;
}

std::optional<model::AllocationResult> ClaimAllocation(const std::string& body) {
  const nlohmann::json parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object() || !parsed.contains("status") || !parsed["status"].is_object()) {
    return std::nullopt;
  }
  const nlohmann::json& status = parsed["status"];
  if (!status.contains("allocation") || !status["allocation"].is_object()) return std::nullopt;
  auto decoded = model::json::DecodeAllocationResult(status["allocation"], "status.allocation");
  if (!decoded.ok()) return std::nullopt;
  return std::move(*decoded);
}

}  // namespace qm::service
