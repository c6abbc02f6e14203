#pragma once

#include <string>
#include <vector>

namespace qm::model {

// Static description of one API resource this service serves. The table is the single source
// for routing, discovery, OpenAPI and the store's resource names.
struct ResourceType {
  std::string group;     // "" for the core group
  std::string kind;      // "ResourceClaim"
  std::string plural;    // "resourceclaims"
  std::string singular;  // "resourceclaim"
  bool namespaced = false;
  bool has_status = false;  // serves the /status subresource
  // Served versions, preferred first. The storage (hub) version is always "v1".
  std::vector<std::string> versions;
  // Versions that answer with a deprecation Warning header.
  std::vector<std::string> deprecated_versions;
  // Field selectors beyond metadata.name and metadata.namespace.
  std::vector<std::string> field_selectors;
  std::vector<std::string> short_names;
  // Discovery categories ("all" makes `kubectl get all` list the kind).
  std::vector<std::string> categories;

  // "resourceclaims.resource.k8s.io", or "nodes" for the core group: the key used in storage
  // and in Status messages.
  std::string GroupResource() const;
  // "resource.k8s.io/v1" or "v1".
  std::string ApiVersion(const std::string& version) const;
  bool ServesVersion(const std::string& version) const;
  bool IsDeprecated(const std::string& version) const;
};

// Every resource type, in a stable order (core first, then resource.k8s.io by kind, then
// rbac.authorization.k8s.io by kind).
const std::vector<ResourceType>& AllResourceTypes();

// Finds a type by API group and plural name; nullptr when not served.
const ResourceType* FindResourceType(const std::string& group, const std::string& plural);
// Finds a type by its GroupResource() key.
const ResourceType* FindResourceTypeByKey(const std::string& group_resource);
// Finds a type by API group and kind.
const ResourceType* FindResourceTypeByKind(const std::string& group, const std::string& kind);

inline constexpr char kResourceGroup[] = "resource.k8s.io";
inline constexpr char kRbacGroup[] = "rbac.authorization.k8s.io";

}  // namespace qm::model
