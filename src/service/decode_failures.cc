#include "service/decode_failures.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "model/json/stored.h"
#include "model/resource_types.h"
#include "spdlog/spdlog.h"

namespace qm::service {
namespace {

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

  model::Object event;
  event.resource = "events";
  event.meta.namespace_ = obj.meta.namespace_.empty() ? "default" : obj.meta.namespace_;
  event.meta.name = name;
  event.meta.uid = uid;
  event.meta.generation = 1;
  event.meta.creation_timestamp = std::chrono::time_point_cast<std::chrono::seconds>(now);
  model::Event body;
  body.involved = {kind,         obj.meta.namespace_, obj.meta.name,
                   obj.meta.uid, api_version,         std::to_string(obj.meta.resource_version)};
  body.reason = kDecodeFailedReason;
  body.message = message;
  body.type = "Warning";
  body.component = component;
  body.timestamp = FormatRfc3339(now);
  return model::json::EncodeEvent(body, std::move(event));
}

std::vector<allocator::AllocatedDevice> DevicesPossiblyHeld(const std::string& body,
                                                            const allocator::Inventory& inventory) {
  const model::AllocatedRefs refs = model::json::ReadAllocatedRefs(body);
  std::vector<allocator::AllocatedDevice> held;
  std::vector<std::pair<std::string, std::string>> pools;  // (driver, pool) held whole
  bool everything = refs.unreadable;
  for (size_t i = 0; !everything && i < refs.results.size(); ++i) {
    const auto& r = refs.results[i];
    if (r.driver.empty() || r.pool.empty()) {
      everything = true;
    } else if (r.device.empty()) {
      pools.emplace_back(r.driver, r.pool);
    } else {
      held.push_back({r.driver, r.pool, r.device, "", {}, false});
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
  model::DeviceTaintRule rule = model::json::DecodeDeviceTaintRuleSelector(o);
  rule.taint.key = kUndecodableRuleTaint;
  rule.taint.value = o.meta.name.substr(0, 63);
  rule.taint.effect = "NoSchedule";
  return rule;
}

}  // namespace qm::service
