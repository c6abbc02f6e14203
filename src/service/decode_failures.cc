#include "service/decode_failures.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "model/json/access.h"
#include "model/json/fields.h"
#include "model/resource_types.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace qm::service {
namespace {

using model::json::At;
using model::json::Str;
using nlohmann::json;

constexpr size_t kMaxNameLength = 253;  // a DNS subdomain, as Event names are

}  // namespace

bool DecodeFailures::Note(const model::Object& obj, const std::string& reason) {
  {
    qm::MutexLock lock(&mu_);
    auto [it, inserted] = seen_.try_emplace(obj.Key());
    const std::pair<std::string, int64_t> version{obj.meta.uid, obj.meta.resource_version};
    if (!inserted && it->second == version) return false;
    it->second = version;
    ++counts_[obj.resource];
  }
  spdlog::warn("{} {}{}{} (resourceVersion {}) cannot be decoded: {}", obj.resource,
               obj.meta.namespace_, obj.meta.namespace_.empty() ? "" : "/", obj.meta.name,
               obj.meta.resource_version, reason);
  return true;
}

std::map<std::string, uint64_t> DecodeFailures::Counts() const {
  qm::MutexLock lock(&mu_);
  return counts_;
}

model::Object DecodeFailedEvent(const model::Object& obj, const std::string& message,
                                std::chrono::system_clock::time_point now,
                                const std::string& component, const std::string& uid) {
  const model::ResourceType* type = model::FindResourceTypeByKey(obj.resource);
  const std::string kind = type != nullptr ? type->kind : obj.resource;
  const std::string api_version = type != nullptr ? type->ApiVersion("v1") : "v1";
  const std::string suffix = absl::StrCat(".decode-failed.", obj.meta.resource_version);
  std::string name = obj.meta.name.substr(0, kMaxNameLength - suffix.size());
  while (!name.empty() && (name.back() == '.' || name.back() == '-')) name.pop_back();
  name += suffix;
  const std::string stamp = FormatRfc3339(now);

  model::Object event;
  event.resource = "events";
  event.meta.namespace_ = obj.meta.namespace_.empty() ? "default" : obj.meta.namespace_;
  event.meta.name = name;
  event.meta.uid = uid;
  event.meta.generation = 1;
  event.meta.creation_timestamp = std::chrono::time_point_cast<std::chrono::seconds>(now);
  json involved = {{"kind", kind},
                   {"name", obj.meta.name},
                   {"uid", obj.meta.uid},
                   {"apiVersion", api_version},
                   {"resourceVersion", std::to_string(obj.meta.resource_version)}};
  if (!obj.meta.namespace_.empty()) involved["namespace"] = obj.meta.namespace_;
  json body = {{"involvedObject", involved},
               {"reason", kDecodeFailedReason},
               {"message", message},
               {"type", "Warning"},
               {"count", 1},
               {"firstTimestamp", stamp},
               {"lastTimestamp", stamp},
               {"source", {{"component", component}}},
               {"reportingComponent", component}};
  event.body = body.dump();
  json whole = body;
  whole["metadata"] = {{"name", event.meta.name}, {"namespace", event.meta.namespace_}};
  const model::ResourceType* events = model::FindResourceTypeByKey("events");
  if (events != nullptr) event.fields = model::json::SelectableFields(*events, whole);
  event.fields["metadata.name"] = event.meta.name;
  event.fields["metadata.namespace"] = event.meta.namespace_;
  return event;
}

std::vector<allocator::AllocatedDevice> DevicesPossiblyHeld(const std::string& body,
                                                            const allocator::Inventory& inventory) {
  const json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  const json& allocation = At(At(parsed, "status"), "allocation");
  const json& devices = At(allocation, "devices");
  const json& results = At(devices, "results");

  std::vector<allocator::AllocatedDevice> held;
  std::vector<std::pair<std::string, std::string>> pools;  // (driver, pool) held whole
  // No results at all is an allocation of no devices; results that cannot be read at all could
  // be anything.
  bool everything = !allocation.is_object() || !(devices.is_null() || devices.is_object()) ||
                    !(results.is_null() || results.is_array());
  for (size_t i = 0; !everything && results.is_array() && i < results.size(); ++i) {
    const json& r = results[i];
    const std::string driver = Str(r, "driver");
    const std::string pool = Str(r, "pool");
    const std::string device = Str(r, "device");
    if (driver.empty() || pool.empty()) {
      everything = true;
    } else if (device.empty()) {
      pools.emplace_back(driver, pool);
    } else {
      held.push_back({driver, pool, device, "", {}, false});
    }
  }
  if (!everything && pools.empty()) return held;
  for (const auto& d : inventory.devices()) {
    const auto& slice = *inventory.slices()[d.slice].slice;
    const bool in_pool = std::find(pools.begin(), pools.end(),
                                   std::make_pair(slice.driver, slice.pool)) != pools.end();
    if (everything || in_pool)
      held.push_back({slice.driver, slice.pool, d.device->name, "", {}, false});
  }
  return held;
}

model::DeviceTaintRule FailSafeTaintRule(const model::Object& o) {
  const json body = json::parse(o.body, nullptr, /*allow_exceptions=*/false);
  const json& selector = At(At(body, "spec"), "deviceSelector");
  auto field = [&](const char* name) {
    const json& v = At(selector, name);
    return v.is_string() ? v.get<std::string>() : std::string();
  };
  model::DeviceTaintRule rule;
  rule.name = o.meta.name;
  rule.driver = field("driver");
  rule.pool = field("pool");
  rule.device = field("device");
  rule.taint.key = kUndecodableRuleTaint;
  rule.taint.value = o.meta.name.substr(0, 63);
  rule.taint.effect = "NoSchedule";
  return rule;
}

}  // namespace qm::service
