#include "model/json/quota_usage.h"

#include <algorithm>

#include "model/json/access.h"
#include "model/json/read.h"
#include "nlohmann/json.hpp"

namespace qm::model::json {
namespace {

using nlohmann::json;

// The devices one ExactCount request asks for (All: unknown until allocation, counts nothing).
int64_t RequestedDevices(const json& request) {
  const std::string mode = Str(request, "allocationMode");
  if (!mode.empty() && mode != "ExactCount") return 0;
  const json& count = At(request, "count");
  return count.is_number_integer() ? count.get<int64_t>() : 1;
}

}  // namespace

std::map<std::string, int64_t> QuotaUsage(const Object& obj) {
  std::map<std::string, int64_t> out;
  if (obj.resource != "pods" && obj.resource != "resourceclaims.resource.k8s.io") return out;
  if (obj.resource == "pods" && obj.body.find("Succeeded") == std::string::npos &&
      obj.body.find("Failed") == std::string::npos && obj.body.find("\\u") == std::string::npos) {
    // No terminal phase can be spelled in this body (not even with escapes): no need to parse it.
    out["pods"] = 1;
    out["count/pods"] = 1;
    return out;
  }
  json body = Read(obj.body);
  if (!body.is_object()) body = json::object();
  if (obj.resource == "pods") {
    const std::string phase = Str(At(body, "status"), "phase");
    if (phase == "Succeeded" || phase == "Failed") return out;
    out["pods"] = 1;
    out["count/pods"] = 1;
    return out;
  }
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

}  // namespace qm::model::json
