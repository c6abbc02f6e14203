#include "backup.h"

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <pqxx/pqxx>

#include "absl/status/status.h"
#include "spdlog/spdlog.h"
#include "store/pg/embedded_postgres.h"

extern char** environ;

namespace qm {
namespace {

namespace fs = std::filesystem;

// Far past any revision the old server can have handed out after the backup (etcd's guidance
// for --bump-revision is the same order: more than the writes the lost interval could hold).
constexpr int64_t kDefaultBump = 1'000'000'000;

struct Flags {
  std::string data_dir = "qm-data";
  bool data_dir_given = false;
  std::string file;
  std::string pg_bin_dir;
  int64_t bump = kDefaultBump;
};

// --flag VALUE or --flag=VALUE; nullopt (after saying why) on anything else.
std::optional<Flags> Parse(const std::vector<std::string>& args, const char* usage,
                           const std::string& file_flag, bool restore) {
  Flags f;
  for (size_t i = 0; i < args.size(); ++i) {
    auto value = [&](const std::string& flag) -> std::optional<std::string> {
      if (args[i] == flag && i + 1 < args.size()) return args[++i];
      if (args[i].rfind(flag + "=", 0) == 0) return args[i].substr(flag.size() + 1);
      return std::nullopt;
    };
    std::optional<std::string> v;
    if ((v = value("--data-dir"))) {
      f.data_dir = *v;
      f.data_dir_given = true;
    } else if ((v = value(file_flag))) {
      f.file = *v;
    } else if ((v = value("--pg-bin-dir"))) {
      f.pg_bin_dir = *v;
    } else if (restore && (v = value("--bump-revision"))) {
      char* end = nullptr;
      errno = 0;
      f.bump = std::strtoll(v->c_str(), &end, 10);
      if (v->empty() || *end != '\0' || errno != 0 || f.bump < 0 || f.bump > (int64_t{1} << 60)) {
        std::fprintf(stderr, "--bump-revision must be a number from 0 to 2^60\n");
        return std::nullopt;
      }
    } else {
      std::fprintf(stderr, "unknown argument %s\n%s", args[i].c_str(), usage);
      return std::nullopt;
    }
  }
  if (f.file.empty() || (restore && !f.data_dir_given)) {
    std::fputs(usage, stderr);
    return std::nullopt;
  }
  return f;
}

int Fail(const char* command, const std::string& message) {
  std::fprintf(stderr, "quartermaster %s: %s\n", command, message.c_str());
  return 1;
}

// Whether `data_dir` already has an embedded cluster, in place or relocated (see
// EmbeddedPostgres).
bool HasCluster(const std::string& data_dir) {
  std::error_code ec;
  return fs::exists(data_dir + "/postgres/PG_VERSION", ec) ||
         fs::exists(data_dir + "/postgres.location", ec);
}

// Runs a PostgreSQL client program and waits for it; its output is ours. The password goes in
// its environment (PGPASSWORD, readable only by this user), never on its command line, which
// every user can read.
absl::Status RunClient(const std::vector<std::string>& argv, const std::string& password) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "PGPASSWORD=", 11) != 0) env.emplace_back(*e);
  }
  env.push_back("PGPASSWORD=" + password);
  std::vector<char*> envp, args;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> owned = argv;
  for (auto& a : owned) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = 0;
  if (int rc = posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), envp.data()); rc != 0) {
    return absl::FailedPreconditionError("cannot run " + argv[0] + ": " + std::strerror(rc));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(
        fs::path(argv[0]).filename().string() + " failed" +
        (WIFEXITED(status) ? " (exit " + std::to_string(WEXITSTATUS(status)) + ")" : ""));
  }
  return absl::OkStatus();
}

}  // namespace

int BackupMain(const std::vector<std::string>& args) {
  static constexpr char kUsage[] =
      "usage: quartermaster backup [--data-dir DIR] --output FILE [--pg-bin-dir DIR]\n";
  auto flags = Parse(args, kUsage, "--output", /*restore=*/false);
  if (!flags) return 2;
  spdlog::set_level(spdlog::level::warn);
  if (!HasCluster(flags->data_dir)) {
    return Fail("backup", flags->data_dir +
                              " has no embedded PostgreSQL cluster (is it the server's "
                              "--data-dir?); with --database-url, run pg_dump against that "
                              "database (docs/reliability.md)");
  }
  // With the server running, its cluster is used as it is; else it runs for the dump only.
  store::pg::EmbeddedPostgres pg(flags->data_dir + "/postgres", flags->pg_bin_dir);
  if (auto st = pg.Start(); !st.ok()) return Fail("backup", std::string(st.message()));
  umask(077);  // the dump holds every object: for its owner only
  // pg_dump reads one repeatable-read snapshot: each group commit is in it whole or not at all,
  // so the objects, the change log, the revision sequence and the device ledger agree.
  absl::Status st = RunClient({pg.bin_dir() + "/pg_dump", "--format=custom",
                               "--file=" + flags->file, "--dbname=" + pg.ClientConnectionUrl()},
                              pg.password());
  const bool was_running = pg.reused();
  if (was_running) {
    pg.Release();
  } else {
    (void)pg.Stop();
  }
  if (!st.ok()) {
    std::error_code ec;
    fs::remove(flags->file, ec);  // never leave half a backup that looks like one
    return Fail("backup", std::string(st.message()));
  }
  std::printf("quartermaster backup: %s written from %s (%s)\n", flags->file.c_str(),
              flags->data_dir.c_str(),
              was_running ? "the running server's database" : "no server was running");
  return 0;
}

int RestoreMain(const std::vector<std::string>& args) {
  static constexpr char kUsage[] =
      "usage: quartermaster restore --data-dir NEW_DIR --input FILE [--bump-revision N] "
      "[--pg-bin-dir DIR]\n";
  auto flags = Parse(args, kUsage, "--input", /*restore=*/true);
  if (!flags) return 2;
  spdlog::set_level(spdlog::level::warn);
  const std::string& dir = flags->data_dir;
  if (HasCluster(dir)) {
    return Fail("restore", dir +
                               " already has an embedded PostgreSQL cluster; restore into a new "
                               "data directory (move this one away first to reuse its path)");
  }
  std::error_code ec;
  if (!fs::is_regular_file(flags->file, ec)) {
    return Fail("restore", "cannot read " + flags->file);
  }
  store::pg::EmbeddedPostgres pg(dir + "/postgres", flags->pg_bin_dir);
  if (auto st = pg.Start(); !st.ok()) return Fail("restore", std::string(st.message()));
  auto failed = [&](const std::string& why) {
    (void)pg.Stop();
    return Fail("restore", why + "; nothing was restored. Remove " + dir +
                               " (and the cluster its postgres.location names, if any) before "
                               "trying again");
  };
  // One transaction: all of the backup or none of it.
  if (auto st = RunClient({pg.bin_dir() + "/pg_restore", "--exit-on-error", "--single-transaction",
                           "--clean", "--if-exists", "--no-owner", "--no-privileges",
                           "--dbname=" + pg.ClientConnectionUrl(), flags->file},
                          pg.password());
      !st.ok()) {
    return failed(std::string(st.message()));
  }
  int64_t at_backup = 0, next = 0, objects = 0;
  try {
    pqxx::connection c(pg.ConnectionUrl());
    pqxx::work tx(c);
    at_backup = tx.exec1(
                      "SELECT GREATEST(COALESCE(MAX(rv), 0), (SELECT compacted_through FROM "
                      "store_state)) FROM change_log")[0]
                    .as<int64_t>();
    // The sequence may be ahead of the newest change (revisions taken by writes that failed).
    const int64_t sequence =
        tx.exec1("SELECT last_value FROM resource_version_seq")[0].as<int64_t>();
    next = std::max(at_backup, sequence) + flags->bump;
    tx.exec_params("SELECT setval('resource_version_seq', $1)", next);
    // Everything up to `next` counts as compacted: a watch from an older revision gets 410
    // Gone. That history can no longer be read, so it goes; the newest change stays, as
    // compaction leaves it, renumbered to `next`: the current revision is the newest change's,
    // and lists must answer at one a watch can start from. No watch ever reads that entry (it
    // would have to start before `next`).
    tx.exec_params("UPDATE store_state SET compacted_through = $1", next);
    tx.exec("DELETE FROM change_log WHERE rv < (SELECT MAX(rv) FROM change_log)");
    tx.exec_params("UPDATE change_log SET rv = $1", next);
    objects = tx.exec1("SELECT count(*) FROM objects")[0].as<int64_t>();
    tx.commit();
  } catch (const std::exception& e) {
    return failed(std::string("after pg_restore: ") + e.what());
  }
  if (auto st = pg.Stop(); !st.ok()) return Fail("restore", std::string(st.message()));
  std::printf(
      "quartermaster restore: %lld objects restored into %s (resourceVersion %lld at the backup); "
      "new writes get resourceVersions above %lld, and watches from before the restore get 410 "
      "Gone. To keep the old data directory's credentials, copy its pki/, "
      "admin.token and service-account.key into %s before starting quartermaster --data-dir "
      "%s\n",
      static_cast<long long>(objects), dir.c_str(), static_cast<long long>(at_backup),
      static_cast<long long>(next), dir.c_str(), dir.c_str());
  return 0;
}

}  // namespace qm
