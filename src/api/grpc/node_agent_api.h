#pragma once

// What the NodeAgent gRPC methods do, without the transport: each takes the authenticated caller
// and the request message and returns the response or an absl::Status whose code the transport
// maps one to one onto a gRPC code (proto/qm/agent/v1/agent.proto lists them).
//
// One code path for every write (ARCHITECTURE.md §6): objects are built as hub-version JSON,
// defaulted and validated by the REST codecs and validation (api/rest), admitted by node
// restriction (service/node_restriction.h), authorized by RBAC (service::Authorizer) and written
// through service::ObjectService under a store::AuditScope, so each change commits with its
// audit record. Denials are recorded by the audit log.

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "api/grpc/assignments.h"
#include "auth/user.h"
#include "common/clock.h"
#include "service/authorizer.h"
#include "service/object_service.h"
#include "service/watch_hub.h"
#include "store/store.h"

namespace qm::service {
class AuditLog;
}  // namespace qm::service

namespace qm::api::nodeapi {

// Who is calling, as the transport authenticated it.
struct Caller {
  auth::UserInfo user;
  std::string request_id;
  std::string peer;  // "ipv4:127.0.0.1:53122"
  std::string user_agent;
};

struct NodeAgentApiOptions {
  // What Register and Heartbeat tell agents (HeartbeatResponse.heartbeat_interval_seconds).
  int heartbeat_interval_seconds = 10;
  // A heartbeat writes the Node's Ready condition when it is not True, and otherwise refreshes
  // its lastHeartbeatTime at most this often: heartbeats of thousands of nodes cost memory
  // updates, not database writes.
  std::chrono::seconds heartbeat_write_interval{60};
};

// Node annotation and condition the agent API maintains.
inline constexpr char kAgentLabelsAnnotation[] = "quartermaster.io/agent-labels";
inline constexpr char kAgentVersionAnnotation[] = "quartermaster.io/agent-version";
inline constexpr char kDeviceHealthAnnotation[] = "quartermaster.io/device-health";
inline constexpr char kDevicesHealthyCondition[] = "quartermaster.io/DevicesHealthy";
// The pod condition written from ReportPrepared.
inline constexpr char kDevicesPreparedCondition[] = "quartermaster.io/DevicesPrepared";

// Thread-safe.
class NodeAgentApi {
 public:
  // `audit` (optional) records denials; `authorizer` decides RBAC.
  NodeAgentApi(service::ObjectService& objects, service::WatchHub& hub, AssignmentRouter& router,
               const service::Authorizer& authorizer, const Clock& clock,
               service::AuditLog* audit = nullptr, NodeAgentApiOptions options = {});

  absl::StatusOr<v1::RegisterResponse> Register(const Caller& caller,
                                                const v1::RegisterRequest& request);
  absl::StatusOr<v1::PublishResourcesResponse> PublishResources(
      const Caller& caller, const v1::PublishResourcesRequest& request);
  absl::StatusOr<v1::ReportPreparedResponse> ReportPrepared(
      const Caller& caller, const v1::ReportPreparedRequest& request);
  absl::StatusOr<v1::ReportUnpreparedResponse> ReportUnprepared(
      const Caller& caller, const v1::ReportUnpreparedRequest& request);
  absl::StatusOr<v1::ReportHealthResponse> ReportHealth(const Caller& caller,
                                                        const v1::ReportHealthRequest& request);
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const Caller& caller,
                                                  const v1::HeartbeatRequest& request);
  // Checks the caller and opens its node's assignment feed (AssignmentRouter::Open).
  absl::StatusOr<std::shared_ptr<AssignmentFeed>> WatchAssignments(
      const Caller& caller, const v1::WatchAssignmentsRequest& request);

 private:
  // The node name must be valid and, for a node identity, its own: PermissionDenied otherwise.
  absl::Status CheckNode(const Caller& caller, const std::string& node);
  // RBAC for one verb on one resource (PermissionDenied with Kubernetes' wording; recorded).
  absl::Status Authorize(const Caller& caller, const std::string& verb, const std::string& group,
                         const std::string& resource, const std::string& subresource,
                         const std::string& namespace_, const std::string& name);
  store::AuditRecord Record(const Caller& caller, const std::string& verb, const std::string& group,
                            const std::string& resource, const std::string& subresource,
                            const std::string& namespace_, const std::string& name) const;
  // Writes the condition kDevicesPreparedCondition of the pods that use claim `claim` (in
  // `namespace_`) and are bound to `node`, from the state of all of each pod's claims.
  absl::Status UpdatePodConditions(const Caller& caller, const std::string& node,
                                   const std::string& namespace_,
                                   const std::vector<std::string>& pods);
  // Sets the Node's Ready condition to True with lastHeartbeatTime now.
  absl::Status WriteReady(const Caller& caller, const std::string& node);

  service::ObjectService& objects_;
  service::WatchHub& hub_;
  AssignmentRouter& router_;
  const service::Authorizer& authorizer_;
  const Clock& clock_;
  service::AuditLog* audit_;
  const NodeAgentApiOptions options_;

  std::mutex mu_;
  // When each node's Ready condition was last written by a heartbeat.
  std::map<std::string, std::chrono::steady_clock::time_point> ready_written_ ABSL_GUARDED_BY(mu_);
};

}  // namespace qm::api::nodeapi
