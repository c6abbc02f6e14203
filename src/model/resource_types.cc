#include "model/resource_types.h"

#include <algorithm>

namespace qm::model {

std::string ResourceType::GroupResource() const {
  return group.empty() ? plural : plural + "." + group;
}

std::string ResourceType::ApiVersion(const std::string& version) const {
  return group.empty() ? version : group + "/" + version;
}

bool ResourceType::ServesVersion(const std::string& version) const {
  return std::find(versions.begin(), versions.end(), version) != versions.end();
}

bool ResourceType::IsDeprecated(const std::string& version) const {
  return std::find(deprecated_versions.begin(), deprecated_versions.end(), version) !=
         deprecated_versions.end();
}

const std::vector<ResourceType>& AllResourceTypes() {
  static const auto* types = new std::vector<ResourceType>{
      {"",
       "Namespace",
       "namespaces",
       "namespace",
       false,
       true,
       {"v1"},
       {},
       {"status.phase"},
       {"ns"},
       {}},
      {"", "Node", "nodes", "node", false, true, {"v1"}, {}, {"spec.unschedulable"}, {"no"}, {}},
      {"",
       "Pod",
       "pods",
       "pod",
       true,
       true,
       {"v1"},
       {},
       {"spec.nodeName", "spec.schedulerName", "spec.restartPolicy", "spec.serviceAccountName",
        "status.phase", "status.podIP", "status.nominatedNodeName"},
       {"po"},
       {"all"}},
      {"",
       "Event",
       "events",
       "event",
       true,
       false,
       {"v1"},
       {},
       {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
        "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
        "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"},
       {"ev"},
       {}},
      {"",
       "ResourceQuota",
       "resourcequotas",
       "resourcequota",
       true,
       true,
       {"v1"},
       {},
       {},
       {"quota"},
       {}},
      {"",
       "ServiceAccount",
       "serviceaccounts",
       "serviceaccount",
       true,
       false,
       {"v1"},
       {},
       {},
       {"sa"},
       {}},
      {kResourceGroup,
       "DeviceClass",
       "deviceclasses",
       "deviceclass",
       false,
       false,
       {"v1", "v1beta2", "v1beta1"},
       {"v1beta2", "v1beta1"},
       {},
       {},
       {}},
      {kResourceGroup,
       "DeviceTaintRule",
       "devicetaintrules",
       "devicetaintrule",
       false,
       true,
       {"v1", "v1beta2"},
       {"v1beta2"},
       {},
       {},
       {}},
      {kResourceGroup,
       "ResourceClaim",
       "resourceclaims",
       "resourceclaim",
       true,
       true,
       {"v1", "v1beta2", "v1beta1"},
       {"v1beta2", "v1beta1"},
       {},
       {},
       {}},
      {kResourceGroup,
       "ResourceClaimTemplate",
       "resourceclaimtemplates",
       "resourceclaimtemplate",
       true,
       false,
       {"v1", "v1beta2", "v1beta1"},
       {"v1beta2", "v1beta1"},
       {},
       {},
       {}},
      {kResourceGroup,
       "ResourceSlice",
       "resourceslices",
       "resourceslice",
       false,
       false,
       {"v1", "v1beta2", "v1beta1"},
       {"v1beta2", "v1beta1"},
       {"spec.nodeName", "spec.driver", "spec.pool.name"},
       {},
       {}},
      // rbac.authorization.k8s.io: no short names, as in Kubernetes.
      {kRbacGroup,
       "ClusterRole",
       "clusterroles",
       "clusterrole",
       false,
       false,
       {"v1"},
       {},
       {},
       {},
       {}},
      {kRbacGroup,
       "ClusterRoleBinding",
       "clusterrolebindings",
       "clusterrolebinding",
       false,
       false,
       {"v1"},
       {},
       {},
       {},
       {}},
      {kRbacGroup, "Role", "roles", "role", true, false, {"v1"}, {}, {}, {}, {}},
      {kRbacGroup,
       "RoleBinding",
       "rolebindings",
       "rolebinding",
       true,
       false,
       {"v1"},
       {},
       {},
       {},
       {}},
  };
  return *types;
}

const ResourceType* FindResourceType(const std::string& group, const std::string& plural) {
  for (const auto& t : AllResourceTypes()) {
    if (t.group == group && t.plural == plural) return &t;
  }
  return nullptr;
}

const ResourceType* FindResourceTypeByKey(const std::string& group_resource) {
  for (const auto& t : AllResourceTypes()) {
    if (t.GroupResource() == group_resource) return &t;
  }
  return nullptr;
}

const ResourceType* FindResourceTypeByKind(const std::string& group, const std::string& kind) {
  for (const auto& t : AllResourceTypes()) {
    if (t.group == group && t.kind == kind) return &t;
  }
  return nullptr;
}

}  // namespace qm::model
