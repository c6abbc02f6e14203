// quartermaster: wiring only. Parses the configuration, builds the objects, starts them and
// stops them on SIGINT/SIGTERM.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>

#include "api/grpc/assignments.h"
#include "api/grpc/grpc_server.h"
#include "api/grpc/node_agent_api.h"
#include "api/rest/auth_endpoints.h"
#include "api/rest/codec.h"
#include "api/rest/http_server.h"
#include "api/rest/metrics.h"
#include "api/rest/request_gate.h"
#include "api/rest/rest_api.h"
#include "api/rest/static_files.h"
#include "api/rest/validation_limits.h"
#include "auth/authenticator.h"
#include "auth/pki.h"
#include "auth/service_account_token.h"
#include "backup.h"
#include "common/clock.h"
#include "common/id_generator.h"
#include "common/logging.h"
#include "common/process.h"
#include "config/options.h"
#include "service/audit_log.h"
#include "service/authorizer.h"
#include "service/history_pruner.h"
#include "service/object_service.h"
#include "service/scheduler.h"
#include "service/watch_hub.h"
#include "spdlog/spdlog.h"
#include "store/pg/embedded_postgres.h"
#include "store/pg/pg_store.h"

extern char** environ;

namespace qm {
extern const char kSampleInventory[];
}

namespace {

int Fail(const std::string& what, const absl::Status& st) {
  spdlog::critical("{}: {}", what, std::string(st.message()));
  return 1;
}

// Idle keep-alive connections and watches hold a descriptor each: allow as many as the hard
// limit does.
void RaiseDescriptorLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

bool LooksLikeIp(const std::string& s) {
  return !s.empty() && (s.find(':') != std::string::npos ||
                        s.find_first_not_of("0123456789.") == std::string::npos);
}

// A secret (the admin's bearer token, the ServiceAccount token key): created once (0600) under
// the data directory, reused after.
absl::StatusOr<std::string> EnsureSecretFile(const std::string& path) {
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    char buf[256] = {};
    size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
    std::fclose(f);
    std::string token(buf, n);
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
    if (!token.empty()) return token;
  }
  std::string token = qm::auth::RandomSecret(32);
  if (auto st = qm::auth::WriteFileAtomically(path, token + "\n", 0600); !st.ok()) return st;
  return token;
}

// `quartermaster credential`: mints a client certificate signed by the generated CA and prints
// (or writes, 0600) a kubeconfig that uses it. For node agents: --node NAME gives
// system:node:NAME in group system:nodes.
int MintCredential(const std::vector<std::string>& args) {
  std::string data_dir = "qm-data", user, out, server;
  std::vector<std::string> groups;
  int days = 365;
  for (size_t i = 0; i < args.size(); ++i) {
    auto value = [&](const std::string& flag) -> std::optional<std::string> {
      if (args[i] == flag && i + 1 < args.size()) return args[++i];
      if (args[i].rfind(flag + "=", 0) == 0) return args[i].substr(flag.size() + 1);
      return std::nullopt;
    };
    if (auto v = value("--data-dir")) {
      data_dir = *v;
    } else if (auto v = value("--user")) {
      user = *v;
    } else if (auto v = value("--node")) {
      user = std::string(qm::auth::kNodeUserPrefix) + *v;
      groups.push_back(qm::auth::kGroupNodes);
    } else if (auto v = value("--group")) {
      groups.push_back(*v);
    } else if (auto v = value("--server")) {
      server = *v;
    } else if (auto v = value("--out")) {
      out = *v;
    } else if (auto v = value("--days")) {
      days = std::atoi(v->c_str());
    } else {
      std::fprintf(stderr,
                   "usage: quartermaster credential (--node NAME | --user NAME [--group G]...)\n"
                   "         [--data-dir DIR] [--server https://HOST:PORT] [--days N] "
                   "[--out FILE]\n");
      return 2;
    }
  }
  if (user.empty() || days <= 0) {
    std::fprintf(stderr, "quartermaster credential: --node or --user is required\n");
    return 2;
  }
  auto pki = qm::auth::LoadServerPki(data_dir + "/pki");
  if (!pki.ok()) {
    std::fprintf(stderr, "quartermaster credential: %s (start the server once first)\n",
                 std::string(pki.status().message()).c_str());
    return 1;
  }
  auto cert = qm::auth::IssueClientCertificate(*pki, user, groups, days);
  if (!cert.ok()) {
    std::fprintf(stderr, "quartermaster credential: %s\n",
                 std::string(cert.status().message()).c_str());
    return 1;
  }
  if (server.empty()) server = "https://127.0.0.1:8080";
  std::string kubeconfig = qm::auth::RenderKubeconfig(
      server, pki->ca_cert_pem, qm::auth::KubeconfigUser{user, "", cert->cert_pem, cert->key_pem});
  if (out.empty()) {
    std::fputs(kubeconfig.c_str(), stdout);
    return 0;
  }
  if (auto st = qm::auth::WriteFileAtomically(out, kubeconfig, 0600); !st.ok()) {
    std::fprintf(stderr, "quartermaster credential: %s\n", std::string(st.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "credential") {
    return MintCredential(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  if (!args.empty() && args[0] == "backup") {
    return qm::BackupMain(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  if (!args.empty() && args[0] == "restore") {
    return qm::RestoreMain(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  auto options = qm::config::LoadServerOptions(args, env);
  if (absl::IsNotFound(options.status())) {
    std::fputs(std::string(options.status().message()).c_str(), stdout);
    return 0;
  }
  if (!options.ok()) {
    std::fprintf(stderr, "quartermaster: %s\n", std::string(options.status().message()).c_str());
    return 2;
  }
  qm::ConfigureLogging(options->log_level, options->log_format);
  // DRA size limits of REST and gRPC validation, before any request is served.
  qm::api::SetValidationLimits({static_cast<size_t>(options->max_devices_per_slice),
                                static_cast<size_t>(options->max_results_per_claim)});
  RaiseDescriptorLimit();
  qm::api::SetDefaultTolerationSeconds(options->default_unreachable_toleration_seconds);

  // SIGINT/SIGTERM are handled synchronously in main (sigwait below); every other thread
  // inherits the mask.
  sigset_t signals = qm::PrepareProcess();

  std::unique_ptr<qm::store::pg::EmbeddedPostgres> embedded;
  std::string url = options->database_url;
  if (url.empty()) {
    embedded = std::make_unique<qm::store::pg::EmbeddedPostgres>(options->data_dir + "/postgres",
                                                                 options->pg_bin_dir);
    if (auto st = embedded->Start(); !st.ok()) return Fail("embedded PostgreSQL", st);
    url = embedded->ConnectionUrl();
  }
  if (auto st = qm::store::pg::Migrate(url); !st.ok()) return Fail("migrations", st);
  auto store = qm::store::pg::PgStore::Open(url, options->db_pool_size);
  if (!store.ok()) return Fail("database", store.status());

  qm::SystemClock clock;
  qm::RandomIdGenerator ids;
  qm::service::WatchHub hub(**store, qm::service::WatchHubOptions{options->watch_history});
  hub.Start();
  qm::service::ObjectService objects(**store, clock, ids, &hub);
  qm::api::RestApi api(objects, hub, clock);
  api.PrewarmAdminViews();
  if (auto st = api.EnsureDefaultNamespace(); !st.ok()) return Fail("default namespace", st);
  if (auto st = api.ApplyManifests(qm::api::BootstrapRbacManifests()); !st.ok()) {
    return Fail("default RBAC roles", st);
  }
  if (options->sample_inventory) {
    if (auto st = api.ApplyManifests(qm::kSampleInventory); !st.ok()) {
      return Fail("sample inventory", st);
    }
    spdlog::info("sample inventory loaded");
  }
  // Scheduler and claim controllers: every replica runs them; the store's device ledger keeps
  // concurrent decisions consistent.
  qm::service::SchedulerOptions scheduler_options;
  scheduler_options.default_toleration_seconds = options->default_unreachable_toleration_seconds;
  scheduler_options.max_results_per_claim = options->max_results_per_claim;
  qm::service::Scheduler scheduler(**store, hub, clock, ids, scheduler_options);
  if (options->scheduler) scheduler.Start();
  auto& pool = (*store)->pool();
  qm::api::Metrics metrics([&pool] { return static_cast<double>(pool.InUse()); },
                           [&pool] { return static_cast<double>(pool.size()); },
                           [&hub] { return static_cast<double>(hub.watcher_count()); });
  metrics.AddCounters("quartermaster_decode_failures_total",
                      "Stored object versions whose body could not be decoded, by resource; each "
                      "is logged and gets a DecodeFailed Event.",
                      "resource", [&scheduler] { return scheduler.decode_failures().Counts(); });
  // TLS material and credentials: the operator's PKI, or one created under the data directory
  // at first start (k3s-style) with an admin token and kubeconfig.
  if (mkdir(options->data_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Fail("data directory", absl::InternalError("cannot create " + options->data_dir));
  }
  qm::api::HttpServerOptions http_options;
  http_options.address = options->http_addr;
  http_options.max_requests_inflight = options->max_requests_inflight;
  http_options.max_connections = options->max_connections;
  std::string ca_pem;
  if (!options->insecure_http) {
    if (options->tls_cert_file.empty()) {
      std::vector<std::string> dns, ips;
      char host[256] = {};
      if (gethostname(host, sizeof(host) - 1) == 0 && host[0] != 0) dns.emplace_back(host);
      if (!options->advertise_address.empty()) {
        (LooksLikeIp(options->advertise_address) ? ips : dns).push_back(options->advertise_address);
      }
      // Agents reach the gRPC port by its address too: both bind addresses go into the SANs.
      for (const std::string* addr : {&options->http_addr, &options->grpc_addr}) {
        std::string bind_host = addr->substr(0, addr->rfind(':'));
        if (bind_host.size() > 2 && bind_host.front() == '[') {
          bind_host = bind_host.substr(1, bind_host.size() - 2);
        }
        if (LooksLikeIp(bind_host) && bind_host != "0.0.0.0" && bind_host != "::") {
          ips.push_back(bind_host);
        }
      }
      auto pki = qm::auth::EnsureServerPki(options->data_dir + "/pki", dns, ips);
      if (!pki.ok()) return Fail("certificates", pki.status());
      if (pki->created) spdlog::info("created a CA and a serving certificate in {}", pki->dir);
      http_options.tls_cert_file = pki->server_cert_file;
      http_options.tls_key_file = pki->server_key_file;
      http_options.client_ca_file =
          options->client_ca_file.empty() ? pki->ca_cert_file : options->client_ca_file;
      ca_pem = pki->ca_cert_pem;
    } else {
      http_options.tls_cert_file = options->tls_cert_file;
      http_options.tls_key_file = options->tls_private_key_file;
      http_options.client_ca_file = options->client_ca_file;
    }
  }
  std::map<std::string, qm::auth::UserInfo> tokens;
  if (!options->token_auth_file.empty()) {
    auto loaded = qm::auth::LoadTokenFile(options->token_auth_file);
    if (!loaded.ok()) return Fail("token file", loaded.status());
    tokens = std::move(*loaded);
  }
  auto admin_token = EnsureSecretFile(options->data_dir + "/admin.token");
  if (!admin_token.ok()) return Fail("admin token", admin_token.status());
  tokens[*admin_token] = qm::auth::WithAuthenticatedGroup(
      qm::auth::UserInfo{"admin", "admin", {qm::auth::kGroupMasters}});
  auto sa_key = EnsureSecretFile(options->data_dir + "/service-account.key");
  if (!sa_key.ok()) return Fail("service account key", sa_key.status());
  auto sa_verifier = qm::auth::MakeServiceAccountVerifier(
      *sa_key, [&clock] { return clock.Now(); },
      [&hub](const std::string& ns, const std::string& name) -> std::optional<std::string> {
        auto sa = hub.Find(qm::model::ResourceKey{"serviceaccounts", ns, name});
        if (sa == nullptr) return std::nullopt;
        return sa->meta.uid;
      });
  qm::auth::UnionAuthenticator authenticator(std::move(tokens), {std::move(sa_verifier)});

  // RBAC over the cached Role/ClusterRole/bindings plus the built-in roles.
  qm::service::Authorizer authorizer;
  if (auto st = authorizer.Follow(hub); !st.ok()) return Fail("authorizer", st);
  qm::api::AuthEndpoints auth_endpoints(objects, authorizer, clock,
                                        qm::api::AuthEndpointsOptions{*sa_key});
  api.SetAuthEndpoints(&auth_endpoints);
  api.SetAuthorizer(&authorizer);
  qm::api::RequestGate gate(authorizer);

  // Audit: changes commit with their records; denials are written by this log's thread.
  qm::service::AuditLog audit(**store, std::chrono::seconds(options->audit_retention_seconds));
  audit.Start();
  qm::service::HistoryPruner history_pruner(
      **store, clock, std::chrono::seconds(options->allocation_history_retention_seconds));
  history_pruner.Start();

  // The web UI: an explicit --web-root must load; the default is used when it was built.
  std::unique_ptr<const qm::api::StaticFiles> web_files;
  if (options->web_root != "none") {
    const bool explicit_root = !options->web_root.empty();
    std::string root = options->web_root;
    if (!explicit_root) {
      std::error_code ec;
      auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
      if (!ec) root = (exe.parent_path().parent_path() / "web").string();
    }
    auto loaded = qm::api::StaticFiles::Load(root);
    if (loaded.ok()) {
      web_files = std::move(*loaded);
      spdlog::info("serving the web UI from {} ({} files)", root, web_files->file_count());
    } else if (explicit_root) {
      return Fail("web UI", loaded.status());
    } else {
      spdlog::info("no web UI: {} (build it with scripts/build.sh)", root);
    }
  }
  qm::api::HttpServer server(api, **store, metrics, authenticator, &gate, http_options);
  if (web_files != nullptr) server.SetStaticFiles(web_files.get());
  server.SetAuditLog(&audit);
  qm::store::pg::PgStore& pg_store = **store;
  qm::api::nodeapi::GrpcServer* grpc_server_ptr = nullptr;
  auto grpc_errors = [&grpc_server_ptr]() -> uint64_t {
    return grpc_server_ptr != nullptr ? grpc_server_ptr->unexpected_errors() : 0;
  };
  metrics.AddCounters(
      "quartermaster_unexpected_exceptions_total",
      "Exceptions caught by a last-resort handler, by component; each is logged and the component "
      "carries on (a request fails with 500, a background loop starts over).",
      "component", [&] {
        return std::map<std::string, uint64_t>{{"scheduler", scheduler.unexpected_errors()},
                                               {"watch_hub", hub.unexpected_errors()},
                                               {"audit_log", audit.unexpected_errors()},
                                               {"store_writer", pg_store.writer_errors()},
                                               {"http", server.unexpected_errors()},
                                               {"grpc", grpc_errors()}};
      });
  if (auto st = server.Start(); !st.ok()) return Fail("http", st);

  // The node-agent API (gRPC) on its own port, with the same TLS material and authenticator.
  qm::api::nodeapi::AssignmentRouter assignments(objects, hub);
  if (auto st = assignments.Start(); !st.ok()) return Fail("node-agent assignments", st);
  qm::api::nodeapi::NodeAgentApiOptions agent_api_options;
  agent_api_options.node_monitor_grace_period =
      std::chrono::milliseconds(options->node_monitor_grace_period_ms);
  // Kubernetes' kubelet posts every 10 s against a 40 s grace period: keep that ratio when the
  // grace period is shorter (tests), so a live node is never declared unreachable.
  agent_api_options.heartbeat_interval_seconds =
      static_cast<int>(std::clamp<int64_t>(options->node_monitor_grace_period_ms / 4000, 1, 10));
  qm::api::nodeapi::NodeAgentApi agent_api(objects, hub, assignments, authorizer, clock, &audit,
                                           agent_api_options);
  agent_api.StartNodeMonitor();
  qm::api::nodeapi::GrpcServerOptions grpc_options;
  grpc_options.address = options->grpc_addr;
  grpc_options.tls_cert_file = http_options.tls_cert_file;
  grpc_options.tls_key_file = http_options.tls_key_file;
  grpc_options.client_ca_file = http_options.client_ca_file;
  qm::api::nodeapi::GrpcServer grpc_server(agent_api, authenticator, grpc_options);
  grpc_server_ptr = &grpc_server;
  if (auto st = grpc_server.Start(); !st.ok()) return Fail("grpc", st);
  std::string grpc_host = options->grpc_addr.substr(0, options->grpc_addr.rfind(':'));
  if (grpc_host == "0.0.0.0" || grpc_host == "::" || grpc_host == "[::]" || grpc_host.empty()) {
    grpc_host = options->advertise_address.empty() ? "127.0.0.1" : options->advertise_address;
  }
  const std::string grpc_endpoint = grpc_host + ":" + std::to_string(grpc_server.port());
  auto host = options->http_addr.substr(0, options->http_addr.rfind(':'));
  if (host == "0.0.0.0" || host == "::" || host == "[::]" || host.empty()) {
    host = options->advertise_address.empty() ? "127.0.0.1" : options->advertise_address;
  }
  std::string scheme = options->insecure_http ? "http" : "https";
  std::string server_url = scheme + "://" + host + ":" + std::to_string(server.port());
  std::string kubeconfig = options->data_dir + "/admin.kubeconfig";
  if (auto st = qm::auth::WriteFileAtomically(
          kubeconfig,
          qm::auth::RenderKubeconfig(server_url, ca_pem,
                                     qm::auth::KubeconfigUser{"admin", *admin_token}),
          0600);
      !st.ok()) {
    return Fail("admin kubeconfig", st);
  }
  spdlog::info("quartermaster listening on {}, node agents (gRPC) on {}", server_url,
               grpc_endpoint);
  spdlog::info("admin credentials: KUBECONFIG={} kubectl get resourceslices", kubeconfig);
  // Machine-readable lines for tests and scripts that start the server on port 0 (the gRPC
  // line first: once LISTENING is there, both are).
  std::printf("GRPC_LISTENING %s\n", grpc_endpoint.c_str());
  std::printf("LISTENING %s\n", server_url.c_str());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("received signal {}, shutting down", sig);
  // Agents' streams end with UNAVAILABLE first, so they reconnect elsewhere or retry.
  assignments.Stop();
  grpc_server.Shutdown();
  grpc_server_ptr = nullptr;
  // The node monitor reads and writes through the store: stopped before the store goes.
  agent_api.StopNodeMonitor();
  scheduler.Stop();
  hub.Stop();
  server.Shutdown();
  audit.Stop();
  history_pruner.Stop();
  store->reset();
  if (embedded) {
    if (auto st = embedded->Stop(); !st.ok()) spdlog::warn("{}", std::string(st.message()));
  }
  spdlog::info("stopped");
  return 0;
}
