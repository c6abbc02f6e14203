#include "api/rest/validation.h"

#include <string_view>

#include <nlohmann/json.hpp>

#include "api/rest/validator.h"
#include "model/field_error.h"
#include "model/resource_types.h"

// Checks mirror Kubernetes' pkg/apis/resource/validation and the core/apimachinery helpers it
// calls, including the order in which errors are reported and their wording, so that clients
// (kubectl, controllers, tests written against a real apiserver) see the same field paths and
// messages. This file checks the metadata and dispatches by kind; validator.h lists the files
// that hold the rules of each kind.
namespace qm::api {
namespace {

using json = nlohmann::json;
using validation::Get;
using validation::ObjectOrEmpty;
using validation::Path;

// What a kind checks beyond its metadata. Kinds not listed (Namespace, ServiceAccount) have
// nothing more to check.
struct KindRules {
  std::string_view group;
  std::string_view kind;
  validation::ObjectRules object;  // on create and update
  validation::StatusRules status;  // through /status; nullptr when only the metadata is checked
};

constexpr KindRules kKindRules[] = {
    {"", "Node", &validation::NodeRules, nullptr},
    {"", "Pod", &validation::PodRules, &validation::PodStatusRules},
    {"", "Event", &validation::EventRules, nullptr},
    {"", "ResourceQuota", &validation::ResourceQuotaRules, &validation::ResourceQuotaStatusRules},
    {model::kResourceGroup, "DeviceClass", &validation::DeviceClassRules, nullptr},
    {model::kResourceGroup, "ResourceSlice", &validation::ResourceSliceRules, nullptr},
    {model::kResourceGroup, "ResourceClaim", &validation::ResourceClaimRules,
     &validation::ResourceClaimStatusRules},
    {model::kResourceGroup, "ResourceClaimTemplate", &validation::ResourceClaimTemplateRules,
     nullptr},
    {model::kResourceGroup, "DeviceTaintRule", &validation::DeviceTaintRuleRules,
     &validation::DeviceTaintRuleStatusRules},
    {model::kRbacGroup, "Role", &validation::RoleRules, nullptr},
    {model::kRbacGroup, "ClusterRole", &validation::ClusterRoleRules, nullptr},
    {model::kRbacGroup, "RoleBinding", &validation::BindingRules, nullptr},
    {model::kRbacGroup, "ClusterRoleBinding", &validation::BindingRules, nullptr},
};

const KindRules* FindRules(const model::ResourceType& type) {
  for (const KindRules& rules : kKindRules) {
    if (rules.group == type.group && rules.kind == type.kind) return &rules;
  }
  return nullptr;
}

// The stored spec on update, nullptr on create.
const json* OldSpec(const json* old) {
  return old == nullptr ? nullptr : &ObjectOrEmpty(Get(*old, "spec"));
}

}  // namespace

model::FieldErrors ValidateObject(const model::ResourceType& type, const nlohmann::json& obj,
                                  const nlohmann::json* old) {
  model::FieldErrors errs;
  validation::Validator v(errs);
  if (!obj.is_object()) {
    v.Add(model::Invalid("", "", "the object must be a JSON object"));
    return errs;
  }
  v.ObjectMeta(obj, type, old);
  const json& spec = v.Object(Get(obj, "spec"), Path("spec"));
  if (const KindRules* rules = FindRules(type)) {
    rules->object({type, obj, old, spec, OldSpec(old)}, errs);
  }
  return errs;
}

model::FieldErrors ValidateStatusUpdate(const model::ResourceType& type, const nlohmann::json& obj,
                                        const nlohmann::json& old) {
  model::FieldErrors errs;
  validation::Validator v(errs);
  if (!obj.is_object()) {
    v.Add(model::Invalid("", "", "the object must be a JSON object"));
    return errs;
  }
  v.ObjectMetaUpdate(v.Object(Get(obj, "metadata"), Path("metadata")), old);
  const json& status = v.Object(Get(obj, "status"), Path("status"));
  if (const KindRules* rules = FindRules(type); rules != nullptr && rules->status != nullptr) {
    rules->status({obj, old, status}, errs);
  }
  return errs;
}

}  // namespace qm::api
