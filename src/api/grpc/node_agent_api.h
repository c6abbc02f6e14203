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
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "api/grpc/assignments.h"
#include "auth/user.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "model/dra.h"
#include "nlohmann/json.hpp"
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
  // What Register and Heartbeat(s) tell agents (HeartbeatResponse.heartbeat_interval_seconds).
  int heartbeat_interval_seconds = 10;
  // A heartbeat writes the Node's Ready condition when it is not True, and otherwise refreshes
  // its lastHeartbeatTime at most this often (Kubernetes' nodeStatusReportFrequency, 5 minutes):
  // liveness travels in node leases (store::Store::RenewNodeLeases), written for all nodes at
  // once, so heartbeats of thousands of nodes cost memory updates, not a write per Node.
  std::chrono::seconds heartbeat_write_interval{300};
  // The node monitor (StartNodeMonitor): an agent's node without a heartbeat for this long
  // becomes Ready=Unknown with the node.kubernetes.io/unreachable taints (--node-monitor-grace-
  // period).
  std::chrono::milliseconds node_monitor_grace_period{40000};
};

// The taint key of a node whose agent stopped heartbeating (Kubernetes' node lifecycle
// controller uses the same key, effects NoSchedule and NoExecute).
inline constexpr char kUnreachableTaint[] = "node.kubernetes.io/unreachable";
// The Ready condition's reasons: posted by an agent (which makes the node monitored), and set
// by the node monitor when the agent went quiet.
inline constexpr char kAgentReadyReason[] = "AgentReady";
inline constexpr char kNodeStatusUnknownReason[] = "NodeStatusUnknown";
// Device health (ReportHealth): an unhealthy device gets a DeviceTaintRule named
// unhealthy.<driver>.<pool>.<device>, labelled with its node, tainting it with
// model::kUnhealthyTaintKey, the reason as the value, NoExecute for reasons that make it
// unusable and NoSchedule otherwise; the rule goes when the device reports healthy (or unknown)
// again.
inline constexpr char kHealthNodeLabel[] = "quartermaster.io/unhealthy-node";

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
  // The unary heartbeat: CheckHeartbeat, NoteHeartbeat and, when due, WriteHeartbeat.
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const Caller& caller,
                                                  const v1::HeartbeatRequest& request);
  int heartbeat_interval_seconds() const { return options_.heartbeat_interval_seconds; }
  // The parts of a heartbeat, for the Heartbeats stream, which checks the caller when it opens
  // (and every minute), notes each beat on the transport's thread and writes elsewhere.
  // CheckHeartbeat: may `caller` heartbeat for `node` (node restriction, RBAC)?
  absl::Status CheckHeartbeat(const Caller& caller, const std::string& node);
  // Notes a beat (memory only; the node monitor writes leases) and says whether the Node's
  // Ready condition must be written: when the cache shows it not True, or it was last written
  // heartbeat_write_interval ago. Cheap: decodes the Node only when its resourceVersion moved.
  bool NoteHeartbeat(const std::string& node);
  // Sets the Node's Ready condition to True with lastHeartbeatTime now. FailedPrecondition when
  // the node does not exist (the agent must Register).
  absl::Status WriteHeartbeat(const Caller& caller, const std::string& node);
  // Checks the caller and opens its node's assignment feed (AssignmentRouter::Open).
  absl::StatusOr<std::shared_ptr<AssignmentFeed>> WatchAssignments(
      const Caller& caller, const v1::WatchAssignmentsRequest& request);

  // Node lifecycle, as Kubernetes' node lifecycle controller: a node is monitored once an agent
  // posted its Ready condition (reason AgentReady; nodes made by hand through REST never are).
  // One without a heartbeat (or Register) for node_monitor_grace_period, heard by this server or
  // by another replica (node leases), counted from when this server first saw it if nobody has
  // heard from it since, gets Ready=Unknown
  // (NodeStatusUnknown) and the taints node.kubernetes.io/unreachable NoSchedule and NoExecute
  // (timeAdded now; the scheduler evicts pods that do not tolerate it). Once it heartbeats again
  // the taints go (Heartbeat sets Ready=True). Each pass first writes the heartbeats heard since
  // the last one as node leases (FlushHeartbeats). Returns how many nodes it changed.
  absl::StatusOr<int> MonitorNodesOnce();
  // Writes the heartbeats heard since the last flush as node leases, in one statement. What
  // cannot be written is kept for the next flush.
  absl::Status FlushHeartbeats();
  // Runs MonitorNodesOnce every grace period / 4 (between 100 ms and 5 s) until
  // StopNodeMonitor or destruction.
  void StartNodeMonitor();
  // Stops the monitor and waits for a pass in progress to end; after it returns the monitor
  // touches the object service no more (call it before the store goes away). Idempotent.
  void StopNodeMonitor();
  ~NodeAgentApi();

 private:
  // The node name must be valid and, for a node identity, its own: PermissionDenied otherwise.
  absl::Status CheckNode(const Caller& caller, const std::string& node);
  // What ReportPrepared and ReportUnprepared check first: the node (CheckNode), the claim
  // reference, a driver, and RBAC to update the claim's status.
  absl::Status CheckClaimReport(const Caller& caller, const std::string& node,
                                const v1::ClaimRef& claim, const std::string& driver);
  // RBAC for one verb on one resource (PermissionDenied with Kubernetes' wording; recorded).
  absl::Status Authorize(const Caller& caller, const std::string& verb, const std::string& group,
                         const std::string& resource, const std::string& subresource,
                         const std::string& namespace_, const std::string& name);
  store::AuditRecord Record(const Caller& caller, const std::string& verb, const std::string& group,
                            const std::string& resource, const std::string& subresource,
                            const std::string& namespace_, const std::string& name) const;
  // The change that sets the condition kDevicesPreparedCondition (and the devices-prepared
  // finalizer) of a pod bound to `node` in `namespace_` from the state of all the pod's claims,
  // taking `reported` (which must outlive the change) for the claim of that name.
  std::function<absl::StatusOr<bool>(nlohmann::json&)> PodConditionChange(
      const std::string& node, const std::string& namespace_, const model::Object& reported);
  // Makes this node's health DeviceTaintRules for `driver` match `unhealthy` (pool/device ->
  // {pool, device}) with `reasons` (pool/device -> reason): creates, updates and deletes rules.
  absl::Status SyncHealthTaints(
      const std::string& node, const std::string& driver,
      const std::map<std::string, std::pair<std::string, std::string>>& unhealthy,
      const std::map<std::string, std::string>& reasons);

  service::ObjectService& objects_;
  service::WatchHub& hub_;
  AssignmentRouter& router_;
  const service::Authorizer& authorizer_;
  const Clock& clock_;
  service::AuditLog* audit_;
  const NodeAgentApiOptions options_;

  qm::Mutex mu_;
  // What this server knows of each node's heartbeats, in one entry per node so that a beat
  // costs one lookup.
  struct NodeBeats {
    // When the node was last heard from (Register, Heartbeat), or first seen by the monitor;
    // unset before either.
    std::optional<std::chrono::system_clock::time_point> last_heard;
    // Heard since the last FlushHeartbeats (the name is then in unflushed_).
    bool unflushed = false;
    // When a heartbeat or Register last wrote the Node's Ready condition.
    std::optional<std::chrono::steady_clock::time_point> ready_written;
    // The Ready status the cached Node had at ready_seen_rv (0: not read yet), so that a
    // heartbeat decodes a Node only when it changed.
    int64_t ready_seen_rv = 0;
    bool ready_seen = false;
  };
  std::unordered_map<std::string, NodeBeats> beats_ ABSL_GUARDED_BY(mu_);
  // The nodes heard since the last FlushHeartbeats: the node leases to renew.
  std::vector<std::string> unflushed_ ABSL_GUARDED_BY(mu_);
  // Whether the store keeps node leases (false after it answered Unimplemented).
  bool leases_kept_ ABSL_GUARDED_BY(mu_) = true;
  // What the node monitor read of each node at a resourceVersion (its Ready condition and how
  // many unreachable taints it has), so that a pass decodes only the nodes that changed.
  struct MonitoredNode {
    int64_t resource_version = 0;
    std::string ready_status, ready_reason;
    int tainted = 0;
  };
  std::map<std::string, MonitoredNode> monitored_ ABSL_GUARDED_BY(mu_);
  // Records that `node` was heard from at `at`; returns its entry.
  NodeBeats& NoteHeardLocked(const std::string& node, std::chrono::system_clock::time_point at)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NoteRegistered(const std::string& node);

  qm::CondVar monitor_wake_;
  bool monitor_stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread monitor_;
};

}  // namespace qm::api::nodeapi
