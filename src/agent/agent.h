#pragma once

// qm-agent's connection to the server (proto/qm/agent/v1/agent.proto): one session at a time,
// started again with exponential backoff whenever it ends (the server restarted, the network
// broke, a call failed). Each session discovers the devices, registers the node, publishes its
// ResourceSlices, reports health and what is left unreported from earlier sessions, heartbeats,
// and follows its assignments: unprepares and prepares claims (preparer.h) and reports each
// outcome. A malformed or unexpected message fails the claim it concerns (reported as an error),
// never the agent.

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "agent/checkpoint.h"
#include "agent/health.h"
#include "agent/inventory.h"
#include "agent/mps.h"
#include "agent/preparer.h"
#include "agent/timeslice.h"
#include "common/mutex.h"

namespace qm::agent {

struct AgentOptions {
  std::string server;  // gRPC target, host:port
  std::string node_name;
  std::string cdi_dir = "/var/run/cdi";
  std::string state_dir = "/var/lib/qm-agent";
  // Credentials: TLS verified against `ca_pem` (empty: the system roots), a client certificate
  // when `cert_pem` is set, a bearer token when `token` is set. `insecure`: plaintext (only
  // against a server started with --insecure-http, on loopback).
  std::string ca_pem;
  std::string cert_pem;
  std::string key_pem;
  std::string token;
  bool insecure = false;
  std::string version = "0.1.0";
  // Reconnection backoff: doubles from min to max (with jitter); reset after a session that
  // lasted longer than max.
  std::chrono::milliseconds min_backoff{500};
  std::chrono::milliseconds max_backoff{30000};
  // Deadline of each unary call.
  std::chrono::milliseconds call_timeout{15000};
  // XIDs that do not make a device unhealthy (health.h; NVIDIA's application errors by default).
  std::set<uint64_t> ignored_xids = DefaultIgnoredXids();
  // MPS control daemons (mps.h): the nvidia-cuda-mps-control binary, a path or a name on PATH.
  std::string mps_control_binary = kDefaultMpsControlBinary;
  // nvidia-smi, which sets the GPU time slice of TimeSlicing claims (timeslice.h); empty: only
  // the env (what --simulate runs with unless --nvidia-smi is given).
  std::string nvidia_smi;
};

class Agent {
 public:
  Agent(AgentOptions options, std::unique_ptr<DeviceSource> source);
  ~Agent();

  // Creates the state and CDI directories, loads the checkpoint and reconciles it with the CDI
  // directory (Preparer::Recover). FailedPrecondition when the directories cannot be used or the
  // checkpoint belongs to another node.
  absl::Status Init();

  // Runs sessions until Stop(), and watches the source's device events (XID errors) on a thread
  // of its own: a device an event makes unhealthy (health.h) is reported unhealthy at once and in
  // every later session, until the agent restarts. Returns after the current session has ended.
  void Run();
  // Ends the current session and Run. Callable from any thread (a signal handler's thread).
  void Stop();

  // Sessions started so far, and whether one is registered and watching now (for tests).
  int sessions() const { return sessions_.load(); }

  class Session;

 private:
  // Sessions, one after the other, with backoff, until Stop().
  void RunSessions();
  // One connection: returns why it ended.
  absl::Status RunSession();
  // Waits `d` or until Stop().
  void Sleep(std::chrono::milliseconds d);
  // The health thread: WatchEvents until Stop (again after a failure).
  void WatchHealth();
  void OnDeviceEvent(const DeviceEvent& event);

  struct EventHealth {
    std::string reason;
    std::string message;
  };

  const AgentOptions options_;
  std::unique_ptr<DeviceSource> source_;
  Checkpoint checkpoint_;
  CheckpointData data_;
  std::unique_ptr<MpsControl> mps_;
  std::unique_ptr<TimeSlicer> timeslicer_;
  std::unique_ptr<Preparer> preparer_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> sessions_{0};
  qm::Mutex mu_;
  qm::CondVar cv_;
  Session* current_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Devices device events made unhealthy, by name; the inventory they are mapped against
  // (the last one discovered).
  std::map<std::string, EventHealth> event_unhealthy_ ABSL_GUARDED_BY(mu_);
  Inventory inventory_ ABSL_GUARDED_BY(mu_);
};

}  // namespace qm::agent
