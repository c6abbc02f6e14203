// quartermaster: wiring only. Parses the configuration, builds the objects, starts them and
// stops them on SIGINT/SIGTERM.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "api/rest/http_server.h"
#include "api/rest/metrics.h"
#include "api/rest/rest_api.h"
#include "common/clock.h"
#include "common/id_generator.h"
#include "common/logging.h"
#include "config/options.h"
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

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
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

  // Handle SIGINT/SIGTERM synchronously in main; every other thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

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
  if (auto st = api.EnsureDefaultNamespace(); !st.ok()) return Fail("default namespace", st);
  if (options->sample_inventory) {
    if (auto st = api.ApplyManifests(qm::kSampleInventory); !st.ok()) {
      return Fail("sample inventory", st);
    }
    spdlog::info("sample inventory loaded");
  }
  // Scheduler and claim controllers: every replica runs them; the store's device ledger keeps
  // concurrent decisions consistent.
  qm::service::Scheduler scheduler(**store, hub, clock, ids);
  if (options->scheduler) scheduler.Start();
  auto& pool = (*store)->pool();
  qm::api::Metrics metrics([&pool] { return static_cast<double>(pool.InUse()); },
                           [&pool] { return static_cast<double>(pool.size()); },
                           [&hub] { return static_cast<double>(hub.watcher_count()); });
  qm::api::HttpServer server(api, **store, metrics, qm::api::HttpServerOptions{options->http_addr});
  if (auto st = server.Start(); !st.ok()) return Fail("http", st);
  auto host = options->http_addr.substr(0, options->http_addr.rfind(':'));
  spdlog::info("quartermaster listening on http://{}:{}", host, server.port());
  // Machine-readable line for tests and scripts that start the server on port 0.
  std::printf("LISTENING http://%s:%d\n", host.c_str(), server.port());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("received signal {}, shutting down", sig);
  scheduler.Stop();
  hub.Stop();
  server.Shutdown();
  store->reset();
  if (embedded) {
    if (auto st = embedded->Stop(); !st.ok()) spdlog::warn("{}", std::string(st.message()));
  }
  spdlog::info("stopped");
  return 0;
}
