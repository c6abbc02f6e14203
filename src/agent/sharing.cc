#include "agent/sharing.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace qm::agent {
namespace {

using nlohmann::json;

absl::Status FieldError(const std::string& path, const std::string& message) {
  return absl::InvalidArgumentError(path + ": " + message);
}

// Unknown fields are errors: a misspelt field silently ignored would share a GPU in a way
// nobody asked for.
absl::Status OnlyFields(const json& obj, const std::string& path,
                        const std::vector<std::string>& known) {
  for (const auto& [key, value] : obj.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      return FieldError(path.empty() ? key : path + "." + key, "unknown field (want " + list + ")");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Quantity> PositiveQuantity(const json& v, const std::string& path) {
  std::string text;
  if (v.is_string()) {
    text = v.get<std::string>();
  } else if (v.is_number_integer()) {
    text = std::to_string(v.get<int64_t>());
  } else {
    return FieldError(path, "want a quantity such as 10Gi");
  }
  auto q = ParseQuantity(text);
  if (!q.ok() || q->Sign() <= 0) {
    return FieldError(path, "want a positive quantity such as 10Gi, got \"" + text + "\"");
  }
  return *q;
}

absl::Status ParseMps(const json& m, SharingConfig* out) {
  const std::string path = "sharing.mpsConfig";
  if (!m.is_object()) return FieldError(path, "want an object");
  if (auto st = OnlyFields(m, path,
                           {"defaultActiveThreadPercentage", "defaultPinnedDeviceMemoryLimit",
                            "defaultPerDevicePinnedMemoryLimit"});
      !st.ok()) {
    return st;
  }
  if (m.contains("defaultActiveThreadPercentage")) {
    const json& p = m["defaultActiveThreadPercentage"];
    if (!p.is_number_integer() || p.get<int64_t>() < 1 || p.get<int64_t>() > 100) {
      return FieldError(path + ".defaultActiveThreadPercentage",
                        "want a whole number from 1 to 100, got " + p.dump());
    }
    out->active_thread_percentage = static_cast<int>(p.get<int64_t>());
  }
  if (m.contains("defaultPinnedDeviceMemoryLimit")) {
    auto q = PositiveQuantity(m["defaultPinnedDeviceMemoryLimit"],
                              path + ".defaultPinnedDeviceMemoryLimit");
    if (!q.ok()) return q.status();
    out->pinned_memory_limit = *q;
  }
  if (m.contains("defaultPerDevicePinnedMemoryLimit")) {
    const json& per = m["defaultPerDevicePinnedMemoryLimit"];
    const std::string ppath = path + ".defaultPerDevicePinnedMemoryLimit";
    if (!per.is_object())
      return FieldError(ppath, "want a map from GPU index or UUID to a quantity");
    for (const auto& [key, value] : per.items()) {
      auto q = PositiveQuantity(value, ppath + "[" + key + "]");
      if (!q.ok()) return q.status();
      out->per_device_pinned_memory_limit.emplace(key, *q);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DeviceConfig> ParseDeviceConfig(const std::string& parameters_json) {
  json root;
  try {
    root = json::parse(parameters_json);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(std::string("parameters are not JSON: ") + e.what());
  }
  if (!root.is_object()) return absl::InvalidArgumentError("parameters must be an object");
  DeviceConfig out;
  const std::string api_version = root.value("apiVersion", "");
  if (api_version != kNvidiaConfigApiVersion) {
    return FieldError("apiVersion", std::string("want ") + kNvidiaConfigApiVersion + ", got \"" +
                                        api_version + "\"");
  }
  out.kind = root.value("kind", "");
  if (out.kind != "GpuConfig" && out.kind != "MigDeviceConfig") {
    return FieldError("kind", "want GpuConfig or MigDeviceConfig, got \"" + out.kind + "\"");
  }
  if (auto st = OnlyFields(root, "", {"apiVersion", "kind", "sharing"}); !st.ok()) return st;
  if (!root.contains("sharing")) return out;
  const json& s = root["sharing"];
  if (!s.is_object()) return FieldError("sharing", "want an object");
  if (auto st = OnlyFields(s, "sharing", {"strategy", "timeSlicingConfig", "mpsConfig"});
      !st.ok()) {
    return st;
  }
  const std::string strategy = s.value("strategy", "");
  if (strategy == "TimeSlicing") {
    out.sharing.strategy = SharingConfig::Strategy::kTimeSlicing;
  } else if (strategy == "MPS") {
    out.sharing.strategy = SharingConfig::Strategy::kMps;
  } else {
    return FieldError("sharing.strategy", "want TimeSlicing or MPS, got \"" + strategy + "\"");
  }
  if (s.contains("timeSlicingConfig")) {
    if (out.sharing.strategy != SharingConfig::Strategy::kTimeSlicing) {
      return FieldError("sharing.timeSlicingConfig", "only with strategy TimeSlicing");
    }
    const json& t = s["timeSlicingConfig"];
    if (!t.is_object()) return FieldError("sharing.timeSlicingConfig", "want an object");
    if (auto st = OnlyFields(t, "sharing.timeSlicingConfig", {"interval"}); !st.ok()) return st;
    if (t.contains("interval")) {
      const std::string interval =
          t["interval"].is_string() ? t["interval"].get<std::string>() : "";
      if (interval != "Default" && interval != "Short" && interval != "Medium" &&
          interval != "Long") {
        return FieldError("sharing.timeSlicingConfig.interval",
                          "want Default, Short, Medium or Long, got " + t["interval"].dump());
      }
      out.sharing.interval = interval;
    }
  }
  if (s.contains("mpsConfig")) {
    if (out.sharing.strategy != SharingConfig::Strategy::kMps) {
      return FieldError("sharing.mpsConfig", "only with strategy MPS");
    }
    if (auto st = ParseMps(s["mpsConfig"], &out.sharing); !st.ok()) return st;
  }
  return out;
}

const OpaqueConfig* ConfigForRequest(const std::vector<OpaqueConfig>& configs,
                                     const std::string& driver, const std::string& request) {
  // "gpu/a100" is a subrequest of "gpu": a config naming either applies.
  const std::string parent = request.substr(0, request.find('/'));
  const OpaqueConfig* found = nullptr;
  for (const char* source : {"FromClass", "FromClaim"}) {
    for (const auto& c : configs) {
      if (c.driver != driver) continue;
      const bool from_class = c.source == "FromClass";
      if (from_class != (std::string(source) == "FromClass")) continue;
      bool applies = c.requests.empty();
      for (const auto& r : c.requests) applies = applies || r == request || r == parent;
      if (applies) found = &c;
    }
  }
  return found;
}

}  // namespace qm::agent
