#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace qm::config {

// Every setting of the quartermaster server, typed and validated once at start-up.
struct ServerOptions {
  std::string http_addr = "127.0.0.1:8080";
  std::string grpc_addr = "127.0.0.1:8081";
  std::string data_dir = "qm-data";
  std::string database_url;  // empty: embedded PostgreSQL under data_dir
  std::string pg_bin_dir;    // empty: newest /usr/lib/postgresql/*/bin
  std::string log_level = "info";
  std::string log_format = "text";
  bool sample_inventory = false;
  // Run the scheduler and claim controllers in this process (off: an API server only).
  bool scheduler = true;
  int db_pool_size = 16;
  int64_t watch_history = 100000;
  // TLS (on by default). Operator PKI: both cert and key, optionally a client CA; without them
  // the server creates a CA, a serving certificate and an admin kubeconfig under data_dir once.
  std::string tls_cert_file;
  std::string tls_private_key_file;
  std::string client_ca_file;
  // Extra name or IP for the generated serving certificate (and the kubeconfig's server URL).
  std::string advertise_address;
  // Plain HTTP instead of TLS: only with this flag and only on a loopback address.
  bool insecure_http = false;
  // Kubernetes' static token CSV (token,user,uid,"group1,group2").
  std::string token_auth_file;
  // The web UI's built files (scripts/build.sh), served at `/`. Empty: the `web` directory next
  // to the binary's directory (build/web for build/server/quartermaster) when it has an
  // index.html; "none": no UI.
  std::string web_root;
  // How long audit records are kept (0: forever).
  int64_t audit_retention_seconds = 30LL * 24 * 3600;
  // How long the allocation history (utilization charts, per-device history) is kept (0:
  // forever).
  int64_t allocation_history_retention_seconds = 30LL * 24 * 3600;
  int max_requests_inflight = 400;
  int max_connections = 20000;
  // Node lifecycle (Kubernetes' node lifecycle controller and DefaultTolerationSeconds
  // admission): an agent-managed node without a heartbeat for this long becomes Ready=Unknown
  // and gets the unreachable taints.
  int64_t node_monitor_grace_period_ms = 40000;
  // tolerationSeconds of the not-ready/unreachable NoExecute tolerations added to new pods.
  int64_t default_unreachable_toleration_seconds = 300;
  // DRA size limits of validation (api/rest/validation_limits.h): Kubernetes' by default.
  int64_t max_devices_per_slice = 128;
  int64_t max_results_per_claim = 32;
};

// Loads options with the precedence defaults < config file < environment (QM_HTTP_ADDR, ...)
// < command-line flags (--http-addr=..., --http-addr ...). `environ` entries are "NAME=value".
// InvalidArgument naming the setting for unknown flags or bad values. A request for help
// (--help/-h) is NotFound with the help text as its message.
absl::StatusOr<ServerOptions> LoadServerOptions(const std::vector<std::string>& args,
                                                const std::vector<std::string>& environ);

// The --help text.
std::string ServerHelp();

}  // namespace qm::config
