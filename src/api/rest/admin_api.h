#pragma once

// Endpoints of our own API group, admin.quartermaster.io/v1alpha1, for the web UI and for
// automation; Kubernetes conventions (a create-only review object, like SubjectAccessReview):
//   POST /apis/admin.quartermaster.io/v1alpha1/devicematchreviews
//     spec.className and/or spec.selectors[].cel.expression (and spec.limit, devices listed at
//     most: default 500, at most 5000) in; 201 with status.devices (nodeName, driver, pool,
//     device, attributes, capacity, taints, allocatedTo), status.matchedDevices,
//     status.allocatedDevices, status.nodes, status.truncated, status.errors (field, message,
//     line, column, offset per problem) and status.evaluationErrors out. Nothing is stored.
//   POST /apis/admin.quartermaster.io/v1alpha1/utilizationhistoryreviews
//     spec.range ("1h", "24h", "7d": up to now) or spec.start/spec.end (RFC 3339), spec.step
//     (buckets, default a sixtieth of the range, at most 1000 buckets) and spec.groupBy ("",
//     "class", "model", "node" or "namespace") in; 201 with status.start, status.end,
//     status.stepSeconds, status.times (each bucket's start, Unix seconds) and status.groups
//     (name, devices and tainted now, per bucket allocated, peakAllocated, unhealthy, free) out,
//     from the allocation history the store records with every binding and release. Nothing is
//     stored.
//   POST /apis/admin.quartermaster.io/v1alpha1/deviceallocationhistoryreviews
//     spec.driver, spec.pool, spec.device (required), spec.range ("24h", "7d": up to now, default
//     7d) or spec.start (RFC 3339), spec.limit (events, default 200, at most 5000) in; 201 with
//     status.holders (who holds the device now: claim {namespace, name, uid}, shareID,
//     adminAccess), status.events (newest first: time as MicroTime, type Allocated or Released,
//     claim, shareID, adminAccess), status.truncated, status.start and status.end out. Claim
//     names come from the claims that still exist; a deleted claim has namespace and uid only.
//   POST /apis/admin.quartermaster.io/v1alpha1/deviceholderreviews
//     spec.pools[] {driver, pool} and/or spec.deviceClassName in; who holds each device of those
//     pools now (and with a class, every claim naming it) out (device_holders.h).
//   GET /apis/admin.quartermaster.io/v1alpha1/clustersummaries (and /cluster, and ?watch=1): node
//     counts and the last change of the kinds the admin views count (cluster_summary.h).
//   GET /apis/admin.quartermaster.io and /apis/admin.quartermaster.io/v1alpha1: the group and
//     its resources (discovery.h's ReviewResources(), also in /apis and OpenAPI v3).
// Unknown fields (the schema table's admin.* definitions) follow fieldValidation: Strict 400,
// Warn (the default) a warning each, Ignore nothing.
// Callers have been authenticated and authorized (create on the review's resource in the group)
// before Handle runs.

#include <memory>
#include <optional>
#include <string>

#include "api/rest/cluster_summary.h"
#include "api/rest/device_holders.h"
#include "api/rest/rest_api.h"
#include "common/clock.h"
#include "service/inventory_cache.h"
#include "service/object_service.h"

namespace qm::api {

inline constexpr char kAdminGroup[] = "admin.quartermaster.io";
inline constexpr char kAdminVersion[] = "v1alpha1";

// True for /apis/admin.quartermaster.io and every path below it.
bool IsAdminApiPath(const std::string& path);

// Thread-safe. Keeps the inventory the reviews read between requests (service::InventoryCache).
class AdminApi {
 public:
  // Without a hub, clustersummaries and deviceholderreviews are 404.
  AdminApi(service::ObjectService& objects, const Clock& clock, service::WatchHub* hub = nullptr)
      : objects_(objects),
        clock_(clock),
        inventories_(objects),
        summary_(hub == nullptr ? nullptr : std::make_unique<ClusterSummary>(objects, *hub, clock)),
        holders_(hub == nullptr ? nullptr : std::make_unique<DeviceHolders>(objects, *hub)) {}

  // 201 with the review; 400 for a body that is not JSON, 422 with field paths for a malformed
  // review, 404 for unknown paths of the group, 405 for other methods; 501 for a utilization
  // review on a store that keeps no allocation history.
  HttpResponse Handle(const HttpRequest& req);

  // A watch of a path of the group (only clustersummaries can be watched): as
  // RestApi::StartWatch.
  std::optional<HttpResponse> StartWatch(const HttpRequest& req, std::shared_ptr<WatchSink> sink);

  service::InventoryCache& inventories() { return inventories_; }

 private:
  // Each takes the request body, parsed (a JSON object) and checked for unknown fields.
  HttpResponse DeviceMatchReview(const nlohmann::json& body);
  HttpResponse UtilizationHistoryReview(const nlohmann::json& body);
  HttpResponse DeviceAllocationHistoryReview(const nlohmann::json& body);

  service::ObjectService& objects_;
  const Clock& clock_;
  service::InventoryCache inventories_;
  std::unique_ptr<ClusterSummary> summary_;
  std::unique_ptr<DeviceHolders> holders_;
};

}  // namespace qm::api
