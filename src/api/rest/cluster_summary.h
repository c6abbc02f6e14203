#pragma once

// The ClusterSummary of our API group (admin.quartermaster.io/v1alpha1): one computed,
// read-only object named "cluster" that says, without listing them, how many Nodes there are and
// in which state, and when the kinds the admin views count last changed, so that a view (the web
// UI's Overview) watches one object instead of every Node, ResourceSlice and ResourceClaim:
//   GET /apis/admin.quartermaster.io/v1alpha1/clustersummaries            a ClusterSummaryList
//   GET /apis/admin.quartermaster.io/v1alpha1/clustersummaries/cluster    the ClusterSummary
//   GET .../clustersummaries?watch=1[&resourceVersion=R]                  its changes
// The object:
//   metadata: name "cluster", resourceVersion (the newest change it counts), creationTimestamp
//     (when this server started serving it: kubectl's AGE is the server's uptime)
//   status.nodes: total, ready, notReady, unknown (no Ready condition, or one neither True nor
//     False), unschedulable (spec.unschedulable: cordoned)
//   status.lastChanges: per resource ("nodes", "resourceslices", "resourceclaims",
//     "devicetaintrules", "deviceclasses"), the resourceVersion of the newest create, update or
//     delete of one of its objects: equal values mean nothing of that kind changed in between.
// A watch sends the current object first (ADDED without a resourceVersion or with "0";
// MODIFIED when it changed after the resourceVersion given), then MODIFIED whenever it changes,
// at most every 100 ms between the hub's ticks (a change held back goes out with the next tick,
// which the hub gives as soon as it has nothing more to dispatch). The counts are kept from the
// watch hub's change feed by one in-process watcher, started by the first request (its one list of
// the Nodes) and kept afterwards, so a request costs no list. A request waits (at most a second)
// until the hub shows every write this process has committed, so it reads its own writes.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/rest/rest_api.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "service/object_service.h"
#include "service/watch_hub.h"

namespace qm::api {

inline constexpr char kClusterSummaryResource[] = "clustersummaries";
inline constexpr char kClusterSummaryKind[] = "ClusterSummary";
inline constexpr char kClusterSummaryName[] = "cluster";

// What the summary counts, at one resourceVersion.
struct ClusterSummaryState {
  int64_t resource_version = 0;
  int64_t nodes = 0, ready = 0, not_ready = 0, unknown = 0, unschedulable = 0;
  std::map<std::string, int64_t> last_changes;  // plural -> resourceVersion
};

class NodeTally;

// Thread-safe.
class ClusterSummary {
 public:
  // The object's creationTimestamp is `clock`'s time now (the server's start); a Table's Age is
  // from it.
  ClusterSummary(service::ObjectService& objects, service::WatchHub& hub, const Clock& clock)
      : objects_(objects), hub_(hub), clock_(clock), created_(clock.Now()) {}
  ~ClusterSummary();

  // GET of the collection or of "cluster" (`name` empty: the list); 404 for other names. With
  // `table` (Accept: ...;as=Table, as kubectl get asks) a Table: Name, Nodes, Ready, Not Ready,
  // Unknown, Cordoned, Age.
  HttpResponse Get(const std::string& name, bool table = false);
  // A watch of the collection (or of "cluster"); an error response when it cannot start. With
  // as=Table in the request's Accept (kubectl get -w), each event's object is a Table (the first
  // with its column definitions).
  std::optional<HttpResponse> StartWatch(const HttpRequest& req, std::shared_ptr<WatchSink> sink);

  // The current counts (starting the tally on first use), once they include every write this
  // process has committed (a client reads its own writes, as with a list).
  absl::StatusOr<ClusterSummaryState> State();

  // The object as the API shows it.
  static nlohmann::json Encode(const ClusterSummaryState& s,
                               std::chrono::system_clock::time_point created);

 private:
  // The tally, once the hub shows every write this process has committed.
  absl::StatusOr<std::shared_ptr<NodeTally>> Tally();

  service::ObjectService& objects_;
  service::WatchHub& hub_;
  const Clock& clock_;
  const std::chrono::system_clock::time_point created_;
  qm::Mutex mu_;
  std::shared_ptr<NodeTally> tally_ ABSL_GUARDED_BY(mu_);
};

}  // namespace qm::api
