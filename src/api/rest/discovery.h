#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qm::api {

// A create-only review resource of one of our own API groups (like SubjectAccessReview): not
// stored, so not in model::AllResourceTypes(); cluster-scoped, verb "create" only.
struct ReviewResource {
  std::string group, version, plural, singular, kind;
  // Reviews are create-only; a computed read-only object (clustersummaries) is get, list, watch.
  std::vector<std::string> verbs = {"create"};
};
// admin.quartermaster.io/v1alpha1: devicematchreviews, utilizationhistoryreviews,
// deviceallocationhistoryreviews, deviceholderreviews, clustersummaries (api/rest/admin_api.h
// serves them).
const std::vector<ReviewResource>& ReviewResources();

// Discovery documents, all derived from model::AllResourceTypes() and ReviewResources().

inline constexpr char kAggregatedDiscoveryContentType[] =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

// GET /version: major "1", minor "32" (the kubectl dispatcher picks its binary by these).
nlohmann::json VersionInfo();

// GET /api and /apis in the aggregated format (APIGroupDiscoveryList).
nlohmann::json AggregatedCoreDiscovery();
nlohmann::json AggregatedGroupDiscovery();

// Legacy formats: /api (APIVersions), /apis (APIGroupList), /api/v1 and
// /apis/<group>/<version> (APIResourceList; null json when not served), /apis/<group>
// (APIGroup; null json when not served).
nlohmann::json LegacyCoreVersions();
nlohmann::json LegacyGroupList();
nlohmann::json LegacyGroup(const std::string& group);
nlohmann::json LegacyResourceList(const std::string& group, const std::string& version);

}  // namespace qm::api
