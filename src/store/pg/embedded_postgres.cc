#include "store/pg/embedded_postgres.h"

#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "spdlog/spdlog.h"

namespace qm::store::pg {
namespace {

namespace fs = std::filesystem;

constexpr int kPort = 5432;  // only names the socket file; nothing listens on TCP

std::string FindBinDir() {
  const fs::path root = "/usr/lib/postgresql";
  std::error_code ec;
  int best = -1;
  std::string best_dir;
  if (!fs::is_directory(root, ec)) return "";
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    int version = std::atoi(entry.path().filename().c_str());
    if (version > best && fs::exists(entry.path() / "bin" / "initdb", ec)) {
      best = version;
      best_dir = (entry.path() / "bin").string();
    }
  }
  return best_dir;
}

// Runs argv (optionally as another user) and waits; returns the exit code, or -1 if it could not
// be started. Output goes to `log_path`.
int Run(const std::vector<std::string>& args, const std::string& run_as,
        const std::string& log_path, std::string* output) {
  std::vector<std::string> full;
  if (!run_as.empty()) {
    full = {"/usr/sbin/runuser", "-u", run_as, "--"};
  }
  full.insert(full.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : full) argv.push_back(a.data());
  argv.push_back(nullptr);

  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    FILE* f = std::fopen(log_path.c_str(), "a");
    if (f != nullptr) {
      dup2(fileno(f), STDOUT_FILENO);
      dup2(fileno(f), STDERR_FILENO);
    }
    // Never let PostgreSQL inherit our listening sockets.
    for (int fd = 3; fd < 1024; ++fd) close(fd);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (output != nullptr) {
    std::ifstream in(log_path);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    *output = all.size() > 2000 ? all.substr(all.size() - 2000) : all;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

absl::Status ChownTree(const fs::path& dir, const std::string& user) {
  struct passwd* pw = getpwnam(user.c_str());
  if (pw == nullptr) {
    return absl::FailedPreconditionError(
        "running as root, but there is no '" + user +
        "' system user to run the embedded PostgreSQL as; install postgresql-15 "
        "(scripts/install-deps.sh) or pass --database-url");
  }
  if (chown(dir.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
    return absl::InternalError("cannot chown " + dir.string());
  }
  return absl::OkStatus();
}

}  // namespace

EmbeddedPostgres::EmbeddedPostgres(std::string data_dir, std::string bin_dir)
    : data_dir_(fs::absolute(data_dir).lexically_normal().string()), bin_dir_(std::move(bin_dir)) {
  if (geteuid() == 0) run_as_ = "postgres";
}

EmbeddedPostgres::~EmbeddedPostgres() {
  if (running_) (void)Stop();
}

std::string EmbeddedPostgres::ConnectionUrl() const {
  return "host=" + data_dir_ + " port=" + std::to_string(kPort) +
         " user=quartermaster dbname=postgres";
}

absl::Status EmbeddedPostgres::Start() {
  if (bin_dir_.empty()) bin_dir_ = FindBinDir();
  std::error_code ec;
  if (bin_dir_.empty() || !fs::exists(fs::path(bin_dir_) / "pg_ctl", ec)) {
    return absl::FailedPreconditionError(
        "PostgreSQL server binaries (initdb, pg_ctl) not found under /usr/lib/postgresql/*/bin; "
        "install them with `sudo apt-get install postgresql-15` (scripts/install-deps.sh does) "
        "or point --database-url at an existing server");
  }
  // Unix socket paths are limited to 107 bytes: ".s.PGSQL.5432" plus the directory.
  if (data_dir_.size() > 90) {
    return absl::InvalidArgumentError(
        "--data-dir path too long for a Unix socket (max 90 "
        "characters): " +
        data_dir_);
  }
  fs::create_directories(data_dir_, ec);
  if (ec) return absl::InternalError("cannot create " + data_dir_ + ": " + ec.message());
  if (!run_as_.empty()) {
    if (auto st = ChownTree(data_dir_, run_as_); !st.ok()) return st;
  }
  chmod(data_dir_.c_str(), 0700);
  const std::string log = data_dir_ + "/postgres.log";
  std::string out;

  if (!fs::exists(fs::path(data_dir_) / "PG_VERSION", ec)) {
    spdlog::info("initialising embedded PostgreSQL cluster in {}", data_dir_);
    const std::string init_log = "/tmp/qm-initdb-" + std::to_string(getpid()) + ".log";
    int rc = Run({bin_dir_ + "/initdb", "-D", data_dir_, "--username=quartermaster", "--auth=trust",
                  "--encoding=UTF8", "--no-locale", "--no-instructions"},
                 run_as_, init_log, &out);
    std::remove(init_log.c_str());
    if (rc != 0)
      return absl::InternalError("initdb failed (exit " + std::to_string(rc) + "): " + out);
  }

  // Is a server from an earlier run still up? Reuse it.
  if (Run({bin_dir_ + "/pg_ctl", "-D", data_dir_, "status"}, run_as_, "/dev/null", nullptr) == 0) {
    spdlog::info("reusing running embedded PostgreSQL in {}", data_dir_);
    running_ = true;
    return absl::OkStatus();
  }
  const std::string opts = "-c listen_addresses='' -p " + std::to_string(kPort) +
                           " -c unix_socket_directories='" + data_dir_ +
                           "' -c unix_socket_permissions=0700 -c fsync=on "
                           "-c synchronous_commit=on -c max_connections=200";
  int rc =
      Run({bin_dir_ + "/pg_ctl", "-D", data_dir_, "-o", opts, "-l", log, "-w", "-t", "60", "start"},
          run_as_, "/dev/null", nullptr);
  if (rc != 0) {
    std::ifstream in(log);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return absl::InternalError("pg_ctl start failed (exit " + std::to_string(rc) + "); see " + log +
                               ": " + (all.size() > 1500 ? all.substr(all.size() - 1500) : all));
  }
  spdlog::info("embedded PostgreSQL started in {}", data_dir_);
  running_ = true;
  return absl::OkStatus();
}

absl::Status EmbeddedPostgres::Stop() {
  if (!running_) return absl::OkStatus();
  int rc = Run({bin_dir_ + "/pg_ctl", "-D", data_dir_, "-m", "fast", "-w", "stop"}, run_as_,
               "/dev/null", nullptr);
  running_ = false;
  if (rc != 0) return absl::InternalError("pg_ctl stop failed (exit " + std::to_string(rc) + ")");
  spdlog::info("embedded PostgreSQL stopped");
  return absl::OkStatus();
}

}  // namespace qm::store::pg
