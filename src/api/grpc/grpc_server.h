#pragma once

// The gRPC front door of the node-agent API (service qm.agent.v1.NodeAgent, ARCHITECTURE.md §6):
// TLS with the REST API's serving certificate and client CA, authentication of client
// certificates and bearer tokens (`authorization: Bearer <token>` metadata) by the same
// authenticator as REST, keepalive, message size limits and server reflection. Unary methods run
// on a bounded pool of threads; WatchAssignments streams use gRPC's callback API and hold no
// thread while idle, so thousands of agents can stay connected; so do Heartbeats streams, whose
// beats are noted on gRPC's threads (the rare Node write goes to a thread of its own).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "auth/authenticator.h"

namespace qm::api::nodeapi {

class NodeAgentApi;

struct GrpcServerOptions {
  std::string address = "127.0.0.1:8081";  // port 0 picks a free one
  // TLS: serving certificate and key (PEM files). Both empty: plaintext (the caller allows that
  // only on loopback). `client_ca_file` verifies client certificates when one is presented.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string client_ca_file;
  // Largest request or response message.
  int max_message_bytes = 16 * 1024 * 1024;
  // Pings on idle connections to find dead peers (and keep NATs open); clients may ping this
  // often at most.
  std::chrono::milliseconds keepalive_time{30000};
  std::chrono::milliseconds keepalive_timeout{10000};
  std::chrono::milliseconds min_client_ping_interval{10000};
  // Threads serving unary calls (they wait on the database pool). Past this gRPC answers
  // RESOURCE_EXHAUSTED at once, so it is sized for bursts: a batch of bindings makes every node
  // in it report at the same moment (bench/run_fleet.sh: 200 nodes already exhausted 64). Idle
  // threads cost address space, not memory; the work itself is bounded by the database pool.
  int max_threads = 1024;
  // Threads kept waiting for calls between bursts (gRPC's sync server pollers). A thread that
  // finishes a call while max_pollers others wait ends, so a burst larger than max_pollers made
  // and ended threads call after call (bench/run_fleet.sh at 500 nodes: 2,400 threads in 3.5 s
  // with 16). At max_threads a thread made for a burst stays until the server stops.
  int min_pollers = 2;
  int max_pollers = 1024;
  // A Heartbeats stream checks its caller's credentials and RBAC again this often.
  std::chrono::milliseconds heartbeat_recheck{60000};
};

class GrpcServer {
 public:
  GrpcServer(NodeAgentApi& api, const auth::Authenticator& authenticator,
             GrpcServerOptions options);
  ~GrpcServer();

  // Binds and serves. InvalidArgument for unreadable TLS files, Unavailable when the address
  // cannot be bound.
  absl::Status Start();
  // New calls get UNAVAILABLE; open streams must already have ended (AssignmentRouter::Stop
  // ends them with UNAVAILABLE); in-flight unary calls get up to `grace` to finish.
  void Shutdown(std::chrono::milliseconds grace = std::chrono::milliseconds(5000));
  int port() const;
  // Exceptions caught by the last-resort handlers (each logged; the call failed with INTERNAL).
  uint64_t unexpected_errors() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace qm::api::nodeapi
