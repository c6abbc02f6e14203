#include "api/rest/discovery.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/resource_types.h"

namespace qm::api {
namespace {

using nlohmann::json;

const std::vector<std::string> kVerbs = {"create", "delete", "deletecollection", "get",
                                         "list",   "patch",  "update",           "watch"};

// Versions of a group in preference order (order of first appearance in the type table, with
// "v1" first).
std::vector<std::string> GroupVersions(const std::string& group) {
  std::vector<std::string> out;
  for (const auto& t : model::AllResourceTypes()) {
    if (t.group != group) continue;
    for (const auto& v : t.versions) {
      if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
    }
  }
  for (const auto& r : ReviewResources()) {
    if (r.group == group && std::find(out.begin(), out.end(), r.version) == out.end()) {
      out.push_back(r.version);
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
    return a == "v1" && b != "v1";
  });
  return out;
}

json AggregatedVersion(const std::string& group, const std::string& version) {
  json resources = json::array();
  for (const auto& t : model::AllResourceTypes()) {
    if (t.group != group || !t.ServesVersion(version)) continue;
    json kind = {{"group", group}, {"version", version}, {"kind", t.kind}};
    json r = {{"resource", t.plural},
              {"responseKind", kind},
              {"scope", t.namespaced ? "Namespaced" : "Cluster"},
              {"singularResource", t.singular},
              {"verbs", kVerbs}};
    if (!t.short_names.empty()) r["shortNames"] = t.short_names;
    if (!t.categories.empty()) r["categories"] = t.categories;
    if (t.has_status) {
      r["subresources"] = json::array({{{"subresource", "status"},
                                        {"responseKind", kind},
                                        {"verbs", {"get", "patch", "update"}}}});
    }
    resources.push_back(r);
  }
  for (const auto& review : ReviewResources()) {
    if (review.group != group || review.version != version) continue;
    resources.push_back(
        {{"resource", review.plural},
         {"responseKind", {{"group", group}, {"version", version}, {"kind", review.kind}}},
         {"scope", "Cluster"},
         {"singularResource", review.singular},
         {"verbs", review.verbs}});
  }
  return json{{"version", version}, {"resources", resources}, {"freshness", "Current"}};
}

// The named API groups (every group but core), in order of first appearance in the type table.
std::vector<std::string> NamedGroups() {
  std::vector<std::string> out;
  for (const auto& t : model::AllResourceTypes()) {
    if (t.group.empty()) continue;
    if (std::find(out.begin(), out.end(), t.group) == out.end()) out.push_back(t.group);
  }
  for (const auto& r : ReviewResources()) {
    if (std::find(out.begin(), out.end(), r.group) == out.end()) out.push_back(r.group);
  }
  return out;
}

json AggregatedList(const std::vector<std::string>& groups) {
  json items = json::array();
  for (const auto& g : groups) {
    json versions = json::array();
    for (const auto& v : GroupVersions(g)) versions.push_back(AggregatedVersion(g, v));
    items.push_back({{"metadata", {{"name", g}}}, {"versions", versions}});
  }
  return json{{"kind", "APIGroupDiscoveryList"},
              {"apiVersion", "apidiscovery.k8s.io/v2"},
              {"metadata", json::object()},
              {"items", items}};
}

}  // namespace

const std::vector<ReviewResource>& ReviewResources() {
  static const auto* reviews = new std::vector<ReviewResource>{
      {"admin.quartermaster.io", "v1alpha1", "devicematchreviews", "devicematchreview",
       "DeviceMatchReview"},
      {"admin.quartermaster.io", "v1alpha1", "utilizationhistoryreviews",
       "utilizationhistoryreview", "UtilizationHistoryReview"},
      {"admin.quartermaster.io", "v1alpha1", "deviceallocationhistoryreviews",
       "deviceallocationhistoryreview", "DeviceAllocationHistoryReview"},
      {"admin.quartermaster.io", "v1alpha1", "deviceholderreviews", "deviceholderreview",
       "DeviceHolderReview"},
      {"admin.quartermaster.io",
       "v1alpha1",
       "clustersummaries",
       "clustersummary",
       "ClusterSummary",
       {"get", "list", "watch"}},
  };
  return *reviews;
}

json VersionInfo() {
  return json{{"major", "1"},
              {"minor", "32"},
              {"gitVersion", "v1.32.0-quartermaster"},
              {"gitCommit", "quartermaster"},
              {"gitTreeState", "clean"},
              {"buildDate", "2026-11-22T00:00:00Z"},
              {"goVersion", "n/a"},
              {"compiler", "g++"},
              {"platform", "linux/amd64"}};
}

json AggregatedCoreDiscovery() { return AggregatedList({""}); }

json AggregatedGroupDiscovery() { return AggregatedList(NamedGroups()); }

json LegacyCoreVersions() {
  return json{{"kind", "APIVersions"},
              {"versions", {"v1"}},
              {"serverAddressByClientCIDRs",
               {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", "127.0.0.1"}}}}};
}

json LegacyGroup(const std::string& group) {
  auto versions = GroupVersions(group);
  if (group.empty() || versions.empty()) return json();
  json vs = json::array();
  for (const auto& v : versions) vs.push_back({{"groupVersion", group + "/" + v}, {"version", v}});
  return json{{"kind", "APIGroup"},
              {"apiVersion", "v1"},
              {"name", group},
              {"versions", vs},
              {"preferredVersion", vs[0]}};
}

json LegacyGroupList() {
  json groups = json::array();
  for (const auto& name : NamedGroups()) {
    json g = LegacyGroup(name);
    g.erase("kind");
    g.erase("apiVersion");
    groups.push_back(std::move(g));
  }
  return json{{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", std::move(groups)}};
}

json LegacyResourceList(const std::string& group, const std::string& version) {
  json resources = json::array();
  for (const auto& t : model::AllResourceTypes()) {
    if (t.group != group || !t.ServesVersion(version)) continue;
    json r = {{"name", t.plural},
              {"singularName", t.singular},
              {"namespaced", t.namespaced},
              {"kind", t.kind},
              {"verbs", kVerbs}};
    if (!t.short_names.empty()) r["shortNames"] = t.short_names;
    if (!t.categories.empty()) r["categories"] = t.categories;
    resources.push_back(r);
    if (t.has_status) {
      resources.push_back({{"name", t.plural + "/status"},
                           {"singularName", ""},
                           {"namespaced", t.namespaced},
                           {"kind", t.kind},
                           {"verbs", {"get", "patch", "update"}}});
    }
  }
  for (const auto& review : ReviewResources()) {
    if (review.group != group || review.version != version) continue;
    resources.push_back({{"name", review.plural},
                         {"singularName", review.singular},
                         {"namespaced", false},
                         {"kind", review.kind},
                         {"verbs", review.verbs}});
  }
  if (resources.empty()) return json();
  return json{{"kind", "APIResourceList"},
              {"apiVersion", "v1"},
              {"groupVersion", group.empty() ? version : group + "/" + version},
              {"resources", resources}};
}

}  // namespace qm::api
