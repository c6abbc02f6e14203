#include "service/quota.h"

#include <algorithm>

#include "absl/strings/str_join.h"
#include "common/quantity.h"
#include "model/json/access.h"
#include "nlohmann/json.hpp"

namespace qm::service {
namespace {

using model::json::At;
using model::json::Str;
using nlohmann::json;

constexpr char kPods[] = "pods";
constexpr char kClaims[] = "resourceclaims.resource.k8s.io";

json ParseObjectBody(const model::Object& obj) {
  json body = json::parse(obj.body, nullptr, /*allow_exceptions=*/false);
  return body.is_object() ? body : json::object();
}

// The devices one ExactCount request asks for (All: unknown until allocation, counts nothing).
int64_t RequestedDevices(const json& request) {
  const std::string mode = Str(request, "allocationMode");
  if (!mode.empty() && mode != "ExactCount") return 0;
  const json& count = At(request, "count");
  return count.is_number_integer() ? count.get<int64_t>() : 1;
}

// A quota's hard limit of `key` as a quantity, if it has one.
std::optional<Quantity> HardLimit(const json& hard, const std::string& key) {
  const json& v = At(hard, key.c_str());
  if (v.is_null()) return std::nullopt;
  auto q = ParseQuantity(v.is_string() ? v.get<std::string>() : v.dump());
  if (!q.ok()) return std::nullopt;
  return *q;
}

}  // namespace

QuotaAmounts QuotaUsage(const model::Object& obj) {
  QuotaAmounts out;
  const json body = ParseObjectBody(obj);
  if (obj.resource == kPods) {
    const std::string phase = Str(At(body, "status"), "phase");
    if (phase == "Succeeded" || phase == "Failed") return out;
    out["pods"] = 1;
    out["count/pods"] = 1;
    return out;
  }
  if (obj.resource != kClaims) return out;
  out["count/resourceclaims.resource.k8s.io"] = 1;
  const json& requests = At(At(At(body, "spec"), "devices"), "requests");
  for (size_t i = 0; requests.is_array() && i < requests.size(); ++i) {
    std::map<std::string, int64_t> per_class;
    const json& exactly = At(requests[i], "exactly");
    if (exactly.is_object()) per_class[Str(exactly, "deviceClassName")] = RequestedDevices(exactly);
    const json& subs = At(requests[i], "firstAvailable");
    for (size_t j = 0; subs.is_array() && j < subs.size(); ++j) {
      auto& n = per_class[Str(subs[j], "deviceClassName")];
      n = std::max(n, RequestedDevices(subs[j]));
    }
    for (const auto& [cls, n] : per_class) out[cls + ".deviceclass.resource.k8s.io/devices"] += n;
  }
  return out;
}

QuotaAmounts QuotaHard(const model::Object& quota) {
  QuotaAmounts out;
  const json hard = At(At(ParseObjectBody(quota), "spec"), "hard");
  if (!hard.is_object()) return out;
  for (const auto& [key, v] : hard.items()) {
    auto q = HardLimit(hard, key);
    if (q.has_value()) out[key] = q->Value();
  }
  return out;
}

absl::Status CheckQuota(const model::Object& obj, const std::vector<model::Object>& quotas,
                        const QuotaAmounts& used) {
  const QuotaAmounts requested = QuotaUsage(obj);
  for (const auto& quota : quotas) {
    const json hard = At(At(ParseObjectBody(quota), "spec"), "hard");
    std::vector<std::string> requested_s, used_s, limited_s;
    bool exceeded = false;
    for (const auto& [key, amount] : requested) {
      if (amount == 0) continue;
      auto limit = HardLimit(hard, key);
      if (!limit.has_value()) continue;
      auto u = used.find(key);
      const int64_t in_use = u == used.end() ? 0 : u->second;
      requested_s.push_back(key + "=" + std::to_string(amount));
      used_s.push_back(key + "=" + std::to_string(in_use));
      limited_s.push_back(key + "=" + limit->String());
      if (Quantity::FromInt(in_use + amount) > *limit) exceeded = true;
    }
    if (exceeded) {
      return absl::PermissionDeniedError(obj.resource + " \"" + obj.meta.name +
                                         "\" is forbidden: exceeded quota: " + quota.meta.name +
                                         ", requested: " + absl::StrJoin(requested_s, ",") +
                                         ", used: " + absl::StrJoin(used_s, ",") +
                                         ", limited: " + absl::StrJoin(limited_s, ","));
    }
  }
  return absl::OkStatus();
}

std::string QuotaStatusBody(const model::Object& quota, const QuotaAmounts& used) {
  json body = ParseObjectBody(quota);
  const json& hard = At(At(body, "spec"), "hard");
  json status = {{"hard", hard.is_object() ? hard : json::object()}, {"used", json::object()}};
  for (const auto& [key, v] : status["hard"].items()) {
    auto u = used.find(key);
    status["used"][key] = std::to_string(u == used.end() ? 0 : u->second);
  }
  if (At(body, "status") == status) return "";
  body["status"] = std::move(status);
  return body.dump();
}

}  // namespace qm::service
