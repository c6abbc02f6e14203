#include "service/device_match.h"

#include <memory>
#include <set>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "allocator/inventory.h"
#include "cel/checker.h"
#include "cel/dra_env.h"
#include "cel/parser.h"
#include "cel/source.h"
#include "model/json/stored.h"

namespace qm::service {
namespace {

constexpr char kClaims[] = "resourceclaims.resource.k8s.io";
// Kubernetes' limit on a selector's length (validation.cc applies the same one on writes).
constexpr size_t kMaxExpressionBytes = 10 * 1024;
constexpr uint64_t kCostLimit = 1'000'000;
constexpr size_t kMaxEvaluationErrors = 20;

absl::StatusOr<std::vector<model::ObjectPtr>> ListAll(ObjectService& objects,
                                                      const char* resource) {
  ListRequest request;
  request.store.resource = resource;
  auto listed = objects.ListCached(request);
  if (!listed.ok()) return listed.status();
  return std::move(listed->items);
}

// The problems of one selector, positioned; empty when it compiles as CompileSelector would.
std::vector<DeviceMatchIssue> CheckSelector(const std::string& expression,
                                            const std::string& field) {
  std::vector<DeviceMatchIssue> out;
  if (expression.empty()) {
    out.push_back({field, "Required value"});
    return out;
  }
  if (expression.size() > kMaxExpressionBytes) {
    out.push_back(
        {field, absl::StrCat("Too long: may not be more than ", kMaxExpressionBytes, " bytes")});
    return out;
  }
  cel::Source source(expression);
  auto positioned = [&](const std::vector<cel::Issue>& issues) {
    for (const auto& issue : issues) {
      cel::SourceLocation at = source.GetLocation(issue.offset);
      out.push_back({field, issue.message, at.line, at.column, issue.offset});
    }
  };
  cel::ParseResult parsed = cel::Parse(source);
  if (parsed.ast == nullptr) {
    positioned(parsed.issues);
    return out;
  }
  cel::CheckResult checked = cel::Check(*parsed.ast);
  if (!checked.issues.empty()) {
    positioned(checked.issues);
  } else if (checked.result_type.kind != cel::TypeKind::kBool &&
             checked.result_type.kind != cel::TypeKind::kDyn) {
    out.push_back({field, "must evaluate to bool or the unknown type, not " +
                              cel::FormatType(checked.result_type)});
  } else if (checked.estimated_cost > cel::kMaxSelectorCost) {
    out.push_back(
        {field, absl::StrCat(std::string(cel::kCostLimitMessage), " (estimated cost ",
                             checked.estimated_cost, ", limit ", cel::kMaxSelectorCost, ")")});
  }
  return out;
}

// driver/pool/device -> "namespace/name" of each claim whose allocation holds it.
std::unordered_map<std::string, std::vector<std::string>> AllocatedDevices(
    const std::vector<model::ObjectPtr>& claims) {
  std::unordered_map<std::string, std::vector<std::string>> out;
  for (const auto& claim : claims) {
    for (const auto& r : model::json::ReadAllocatedRefs(claim->body).results) {
      if (r.admin_access) continue;  // blocks nothing
      out[absl::StrCat(r.driver, "/", r.pool, "/", r.device)].push_back(claim->meta.namespace_ +
                                                                        "/" + claim->meta.name);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<DeviceMatchResult> PreviewDeviceMatches(ObjectService& objects,
                                                       InventoryCache& inventories,
                                                       const DeviceMatchRequest& request) {
  DeviceMatchResult out;
  for (size_t i = 0; i < request.selectors.size(); ++i) {
    auto issues =
        CheckSelector(request.selectors[i], absl::StrCat("spec.selectors[", i, "].cel.expression"));
    out.issues.insert(out.issues.end(), issues.begin(), issues.end());
  }

  auto snapshot = inventories.Get();
  if (!snapshot.ok()) return snapshot.status();
  const std::shared_ptr<const allocator::Inventory> inventory = (*snapshot)->inventory;
  auto claims = ListAll(objects, kClaims);
  if (!claims.ok()) return claims.status();

  const allocator::Inventory::ClassEntry* cls = nullptr;
  if (!request.class_name.empty()) {
    cls = inventory->FindClass(request.class_name);
    if (cls == nullptr) {
      out.issues.push_back({"spec.className", absl::StrCat("deviceclasses.resource.k8s.io \"",
                                                           request.class_name, "\" not found")});
    } else {
      for (size_t i = 0; i < cls->selectors.size(); ++i) {
        if (cls->selectors[i]->ast != nullptr) continue;
        out.issues.push_back(
            {"spec.className", absl::StrCat("selector ", i, " of the class does not compile: ",
                                            cls->selectors[i]->error)});
      }
    }
  }
  if (!out.issues.empty()) return out;

  std::vector<std::shared_ptr<const cel::CompileResult>> programs;
  for (const auto& expression : request.selectors)
    programs.push_back(inventory->Compile(expression));
  const auto allocated = AllocatedDevices(*claims);
  std::set<std::string> nodes;
  auto evaluation_error = [&](const std::string& id, const std::string& message) {
    if (out.evaluation_errors.size() < kMaxEvaluationErrors) {
      out.evaluation_errors.push_back(id + ": " + message);
    }
  };
  for (uint32_t d = 0; d < inventory->devices().size(); ++d) {
    const auto& entry = inventory->devices()[d];
    const auto& group = inventory->groups()[entry.group];
    if (group.generation < inventory->pools()[group.pool].max_generation) continue;  // obsolete
    if (cls != nullptr) {
      std::string error;
      auto m = inventory->ClassMatches(*cls, d, &error);
      if (m == allocator::Inventory::Match::kError)
        evaluation_error(inventory->DeviceId(entry), error);
      if (m != allocator::Inventory::Match::kYes) continue;
    }
    bool match = true;
    for (size_t i = 0; match && i < programs.size(); ++i) {
      if (!entry.value.has_value()) {
        evaluation_error(inventory->DeviceId(entry), entry.value_error);
        match = false;
        break;
      }
      auto m = cel::MatchesValue(*programs[i]->ast, *entry.value, kCostLimit,
                                 inventory->regex_cache(), programs[i]->constants.get());
      if (!m.ok())
        evaluation_error(inventory->DeviceId(entry),
                         absl::StrCat("selector ", i, ": ", m.status().message()));
      match = m.ok() && *m;
    }
    if (!match) continue;

    const model::ResourceSlice& slice = *inventory->slices()[entry.slice].slice;
    MatchedDevice device;
    device.driver = slice.driver;
    device.pool = slice.pool;
    device.name = entry.device->name;
    if (slice.per_device_node_selection) {
      device.node_name = entry.device->Binding().node_name;
      device.all_nodes = entry.device->Binding().all_nodes;
    } else {
      device.node_name = slice.node_name;
      device.all_nodes = slice.all_nodes;
    }
    if (auto it = allocated.find(inventory->DeviceId(entry)); it != allocated.end()) {
      device.allocated_to = it->second;
    }
    ++out.matched;
    if (!device.allocated_to.empty()) ++out.allocated;
    if (!device.node_name.empty()) nodes.insert(device.node_name);
    if (out.devices.size() < request.limit) {
      device.attributes = {entry.device->attributes.begin(), entry.device->attributes.end()};
      device.capacity = {entry.device->capacity.begin(), entry.device->capacity.end()};
      device.taints = entry.taints;
      out.devices.push_back(std::move(device));
    }
  }
  out.nodes = nodes.size();
  return out;
}

}  // namespace qm::service
