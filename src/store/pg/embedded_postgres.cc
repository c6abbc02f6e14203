#include "store/pg/embedded_postgres.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <pqxx/pqxx>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/statusor.h"
#include "spdlog/spdlog.h"
#include "store/pg/embedded_postgres_internal.h"

namespace qm::store::pg {

using namespace embedded_internal;  // NOLINT(google-build-using-namespace)

namespace {

namespace fs = std::filesystem;

constexpr int kPort = 5432;  // only names the socket file; nothing listens on TCP
constexpr char kUser[] = "quartermaster";
constexpr size_t kMaxOutput = 2000;      // bytes of a failed command's output kept for errors
constexpr size_t kMaxHbaFile = 1 << 20;  // bytes
constexpr auto kReloadTimeout = std::chrono::seconds(30);

// Written over a trust-era pg_hba.conf. Nothing listens on TCP (listen_addresses=''); the host
// lines only keep passwords required should someone enable it.
constexpr char kScramHba[] =
    "# Written by Quartermaster: every connection to the embedded cluster needs the password\n"
    "# (SCRAM-SHA-256).\n"
    "# TYPE  DATABASE     USER  ADDRESS       METHOD\n"
    "local   all          all                 scram-sha-256\n"
    "host    all          all   127.0.0.1/32  scram-sha-256\n"
    "host    all          all   ::1/128       scram-sha-256\n"
    "local   replication  all                 scram-sha-256\n"
    "host    replication  all   127.0.0.1/32  scram-sha-256\n"
    "host    replication  all   ::1/128       scram-sha-256\n";

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

// A libpq connection-string value, quoted.
std::string ConnInfoValue(std::string_view v) {
  std::string out = "'";
  for (char c : v) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

struct RunResult {
  int exit_code = -1;  // -1: could not be started, or killed by a signal
  std::string output;  // stdout and stderr, last kMaxOutput bytes (when captured)
};

// Runs argv directly (fork/exec, no shell), through runuser as `run_as` when set, with stdin
// from /dev/null, and waits for it. stdout and stderr are captured through a pipe, or discarded
// when `capture` is false (pg_ctl start: the server it leaves behind must not hold our pipe).
RunResult Run(std::vector<std::string> args, const std::string& run_as, bool capture) {
  if (!run_as.empty()) args.insert(args.begin(), {"/usr/sbin/runuser", "-u", run_as, "--"});
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int pipe_fds[2] = {-1, -1};
  if (capture && pipe2(pipe_fds, O_CLOEXEC) != 0) return {};

  pid_t pid = fork();
  if (pid < 0) {
    if (capture) {
      close(pipe_fds[0]);
      close(pipe_fds[1]);
    }
    return {};
  }
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDWR);
    if (devnull < 0) _exit(127);
    int out = capture ? pipe_fds[1] : devnull;
    dup2(devnull, STDIN_FILENO);
    dup2(out, STDOUT_FILENO);
    dup2(out, STDERR_FILENO);
    // Never let PostgreSQL inherit our listening sockets or files.
    for (int fd = 3; fd < 1024; ++fd) close(fd);
    execv(argv[0], argv.data());
    _exit(127);
  }
  RunResult result;
  if (capture) {
    close(pipe_fds[1]);
    char buf[4096];
    for (;;) {
      ssize_t n = read(pipe_fds[0], buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      result.output.append(buf, static_cast<size_t>(n));
      if (result.output.size() > 2 * kMaxOutput) {
        result.output.erase(0, result.output.size() - kMaxOutput);
      }
    }
    close(pipe_fds[0]);
    if (result.output.size() > kMaxOutput) {
      result.output.erase(0, result.output.size() - kMaxOutput);
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

// Whether `user` can enter `dir` (search permission on it and every directory above it), asked
// of the system as that user so that groups and ACLs count.
bool CanEnter(const std::string& user, const std::string& dir) {
  return Run({"/usr/bin/test", "-x", dir}, user, /*capture=*/true).exit_code == 0;
}

// The outermost directory on the way to `dir` that `user` cannot enter, for an error message.
std::string FirstBlockedDirectory(const std::string& user, const fs::path& dir) {
  fs::path prefix;
  for (const auto& part : dir) {
    prefix /= part;
    if (!CanEnter(user, prefix.string())) return prefix.string();
  }
  return dir.string();
}

bool IsPasswordRejection(std::string_view message) {
  return message.find("password authentication failed") != std::string_view::npos ||
         message.find("no password supplied") != std::string_view::npos;
}

// Runs initdb with password authentication. initdb reads the password from a file: a copy goes
// into a private directory with a random name next to the cluster (created with mkdirat, which
// fails rather than reuse anything already there), owned by the user initdb runs as, and is
// removed as soon as initdb exits.
absl::Status InitCluster(const std::string& bin_dir, const std::string& data_dir,
                         const std::string& run_as, const Owner& owner, int parent_fd,
                         const std::string& parent, const std::string& name,
                         const std::string& password) {
  auto suffix = RandomHex(8);
  if (!suffix.ok()) return suffix.status();
  const std::string tmp_dir_name = "." + name + ".initdb-" + *suffix;
  if (mkdirat(parent_fd, tmp_dir_name.c_str(), 0700) != 0) {
    return absl::InternalError("cannot create " + parent + "/" + tmp_dir_name + ": " +
                               ErrnoText(errno));
  }
  absl::Cleanup remove_dir = [&] { unlinkat(parent_fd, tmp_dir_name.c_str(), AT_REMOVEDIR); };
  Fd tmp_dir = OpenDirAt(parent_fd, tmp_dir_name);
  if (!tmp_dir.ok()) return absl::InternalError("cannot open " + tmp_dir_name);
  auto pwfile = CreateTempFileAt(tmp_dir.get(), "pwfile-", password + "\n", &owner);
  if (!pwfile.ok()) return pwfile.status();
  absl::Cleanup remove_file = [&] { unlinkat(tmp_dir.get(), pwfile->c_str(), 0); };
  if (owner.is_other_user && fchown(tmp_dir.get(), owner.uid, owner.gid) != 0) {
    return absl::InternalError("cannot chown " + tmp_dir_name + ": " + ErrnoText(errno));
  }
  RunResult r =
      Run({bin_dir + "/initdb", "-D", data_dir, std::string("--username=") + kUser,
           "--pwfile=" + parent + "/" + tmp_dir_name + "/" + *pwfile, "--auth-local=scram-sha-256",
           "--auth-host=scram-sha-256", "--encoding=UTF8", "--no-locale", "--no-instructions"},
          run_as, /*capture=*/true);
  if (r.exit_code != 0) {
    return absl::InternalError("initdb failed (exit " + std::to_string(r.exit_code) +
                               "): " + r.output);
  }
  return absl::OkStatus();
}

// The last part of the server log, for an error message. Read without following a symlink and
// only when owned by the cluster's owner: as root this reads in a directory `postgres` controls.
std::string ServerLogTail(int cluster_fd, const Owner& owner) {
  constexpr off_t kTail = 1500;
  Fd fd(openat(cluster_fd, "postgres.log", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (!fd.ok() || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != owner.uid) {
    return "";
  }
  std::string tail(static_cast<size_t>(kTail), '\0');
  ssize_t n =
      pread(fd.get(), tail.data(), tail.size(), st.st_size > kTail ? st.st_size - kTail : 0);
  tail.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return tail;
}

// Sets the role's password over a connection the cluster still trusts, then requires passwords
// in pg_hba.conf and waits until the server has reloaded it (see the header).
absl::Status MigrateToScram(const std::string& url, const std::string& password, int cluster_fd,
                            const std::string& data_dir, const Owner& owner, bool rewrite_hba) {
  try {
    pqxx::connection c(url);
    pqxx::nontransaction tx(c);
    // The server hashes the password (SCRAM); keep the statement out of its log whatever the
    // cluster's logging settings say.
    tx.exec("SET log_statement = 'none'");
    tx.exec("SET log_min_error_statement = 'panic'");
    tx.exec("SET log_min_duration_statement = -1");
    tx.exec("SET password_encryption = 'scram-sha-256'");
    // A utility statement: it takes no bind parameters, hence the quoting.
    tx.exec("ALTER ROLE " + tx.quote_name(kUser) + " PASSWORD " + tx.quote(password));
    if (!rewrite_hba) return absl::OkStatus();
    const std::string loaded = tx.exec1("SELECT pg_conf_load_time()")[0].as<std::string>();

    auto tmp = CreateTempFileAt(cluster_fd, ".pg_hba.conf.qm-", kScramHba, &owner);
    if (!tmp.ok()) return tmp.status();
    if (renameat(cluster_fd, tmp->c_str(), cluster_fd, "pg_hba.conf") != 0) {
      int err = errno;
      unlinkat(cluster_fd, tmp->c_str(), 0);
      return absl::InternalError("cannot replace " + data_dir + "/pg_hba.conf: " + ErrnoText(err));
    }
    fsync(cluster_fd);
    tx.exec("SELECT pg_reload_conf()");

    // The postmaster reloads asynchronously; a backend started after the reload reports the
    // new load time, and one started after that is authenticated with the new pg_hba.conf.
    const auto deadline = std::chrono::steady_clock::now() + kReloadTimeout;
    for (;;) {
      pqxx::connection check(url);
      pqxx::nontransaction ctx(check);
      if (ctx.exec_params1("SELECT pg_conf_load_time() > $1::timestamptz", loaded)[0].as<bool>()) {
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        return absl::DeadlineExceededError("PostgreSQL in " + data_dir +
                                           " did not reload pg_hba.conf");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return absl::OkStatus();
  } catch (const pqxx::broken_connection& e) {
    if (IsPasswordRejection(e.what())) {
      return absl::FailedPreconditionError(
          "the embedded PostgreSQL in " + data_dir +
          " already requires a password, and its password file was missing; restore the "
          "password file from a backup (or set a new password for role quartermaster and put "
          "it in the file)");
    }
    return absl::UnavailableError(std::string("cannot connect to the embedded PostgreSQL: ") +
                                  e.what());
  } catch (const std::exception& e) {
    return absl::InternalError(std::string("cannot set the embedded PostgreSQL password: ") +
                               e.what());
  }
}

absl::Status CheckConnection(const std::string& url, const std::string& data_dir,
                             const std::string& password_file) {
  try {
    pqxx::connection c(url);
    pqxx::nontransaction tx(c);
    tx.exec1("SELECT 1");
    return absl::OkStatus();
  } catch (const pqxx::broken_connection& e) {
    if (IsPasswordRejection(e.what())) {
      return absl::FailedPreconditionError("the embedded PostgreSQL in " + data_dir +
                                           " rejects the password in " + password_file);
    }
    return absl::UnavailableError(std::string("cannot connect to the embedded PostgreSQL: ") +
                                  e.what());
  } catch (const std::exception& e) {
    return absl::InternalError(std::string("embedded PostgreSQL: ") + e.what());
  }
}

}  // namespace

EmbeddedPostgres::EmbeddedPostgres(std::string data_dir, std::string bin_dir,
                                   std::string relocation_root)
    : data_dir_(fs::absolute(data_dir).lexically_normal().string()),
      bin_dir_(std::move(bin_dir)),
      relocation_root_(std::move(relocation_root)) {
  // "<dir>/" would put the password file inside the cluster directory.
  while (data_dir_.size() > 1 && data_dir_.back() == '/') data_dir_.pop_back();
  cluster_dir_ = data_dir_;
  if (geteuid() == 0) run_as_ = "postgres";
}

EmbeddedPostgres::~EmbeddedPostgres() {
  if (running_) (void)Stop();
}

std::string EmbeddedPostgres::ConnectionUrl() const {
  return ClientConnectionUrl() + " password=" + ConnInfoValue(password_);
}

std::string EmbeddedPostgres::ClientConnectionUrl() const {
  return "host=" + ConnInfoValue(cluster_dir_) + " port=" + std::to_string(kPort) +
         " user=" + kUser + " dbname=postgres";
}

absl::Status EmbeddedPostgres::LocateCluster(int home_fd) {
  cluster_dir_ = data_dir_;
  const std::string record_name = fs::path(data_dir_).filename().string() + ".location";
  auto recorded = ReadLocationFile(home_fd, record_name, location_file());
  if (recorded.ok()) {
    cluster_dir_ = *recorded;
    return absl::OkStatus();
  }
  if (!absl::IsNotFound(recorded.status())) return recorded.status();
  // Only a cluster run by another user can be out of its reach.
  if (run_as_.empty()) return absl::OkStatus();
  const std::string home = fs::path(data_dir_).parent_path().string();
  if (CanEnter(run_as_, home)) return absl::OkStatus();

  const std::string blocked = FirstBlockedDirectory(run_as_, home);
  std::error_code ec;
  if (fs::exists(fs::path(data_dir_) / "PG_VERSION", ec)) {
    // Its data cannot be moved behind the operator's back; say how to let PostgreSQL in.
    return absl::FailedPreconditionError(
        "the embedded PostgreSQL cluster in " + data_dir_ + " runs as the '" + run_as_ +
        "' user, which cannot enter " + blocked + "; let it through (chmod o+x " + blocked +
        "), move the data directory where it can, or pass --database-url");
  }
  if (relocation_root_.empty()) {
    return absl::FailedPreconditionError(
        "the embedded PostgreSQL runs as the '" + run_as_ + "' user, which cannot enter " +
        blocked + "; choose a --data-dir it can reach, let it through (chmod o+x " + blocked +
        "), or pass --database-url");
  }
  auto id = RandomHex(8);
  if (!id.ok()) return id.status();
  const std::string location = relocation_root_ + "/" + *id;
  absl::Status st = CreateFileOnce(home_fd, record_name, location_file(), location + "\n");
  if (absl::IsAlreadyExists(st)) {  // another process got there first: use its cluster
    recorded = ReadLocationFile(home_fd, record_name, location_file());
    if (!recorded.ok()) return recorded.status();
    cluster_dir_ = *recorded;
    return absl::OkStatus();
  }
  if (!st.ok()) return st;
  spdlog::info(
      "the '{}' user cannot enter {}: the embedded PostgreSQL cluster goes to {} (recorded in {})",
      run_as_, blocked, location, location_file());
  cluster_dir_ = location;
  return absl::OkStatus();
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
  if (auto st = CheckClusterPath(data_dir_, bin_dir_); !st.ok()) return st;

  Owner owner{geteuid(), getegid(), false};
  if (!run_as_.empty()) {
    struct passwd* pw = getpwnam(run_as_.c_str());
    if (pw == nullptr) {
      return absl::FailedPreconditionError(
          "running as root, but there is no '" + run_as_ +
          "' system user to run the embedded PostgreSQL as; install postgresql-15 "
          "(scripts/install-deps.sh) or pass --database-url");
    }
    owner = Owner{pw->pw_uid, pw->pw_gid, true};
  }

  // The directory that names the cluster holds the password and location files, whether the
  // cluster itself is there or elsewhere.
  const fs::path named_path(data_dir_);
  const std::string name = named_path.filename().string();
  auto home_fd = OpenParent(named_path.parent_path(), owner);
  if (!home_fd.ok()) return home_fd.status();
  if (auto st = LocateCluster(home_fd->get()); !st.ok()) return st;
  if (auto st = CheckClusterPath(cluster_dir_, bin_dir_); !st.ok()) return st;

  const fs::path cluster_path(cluster_dir_);
  const std::string parent = cluster_path.parent_path().string();
  const std::string cluster_name = cluster_path.filename().string();
  Fd relocated_parent_fd;
  int parent_fd = home_fd->get();
  if (cluster_dir_ != data_dir_) {
    auto fd = OpenParent(cluster_path.parent_path(), owner);
    if (!fd.ok()) return fd.status();
    relocated_parent_fd = std::move(*fd);
    parent_fd = relocated_parent_fd.get();
  }

  if (mkdirat(parent_fd, cluster_name.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::InternalError("cannot create " + cluster_dir_ + ": " + ErrnoText(errno));
  }
  Fd cluster_fd = OpenDirAt(parent_fd, cluster_name);
  if (!cluster_fd.ok()) {
    return absl::FailedPreconditionError(
        cluster_dir_ + " is not a directory (or is a symlink): " + ErrnoText(errno));
  }
  if (owner.is_other_user && fchown(cluster_fd.get(), owner.uid, owner.gid) != 0) {
    return absl::InternalError("cannot chown " + cluster_dir_ + ": " + ErrnoText(errno));
  }
  fchmod(cluster_fd.get(), 0700);

  bool password_is_new = false;
  auto password = ReadPasswordFile(home_fd->get(), name + ".password", password_file());
  if (absl::IsNotFound(password.status())) {
    password = CreatePasswordFile(home_fd->get(), name + ".password", password_file());
    password_is_new = password.ok();
    if (password_is_new) spdlog::info("created {}", password_file());
  }
  if (!password.ok()) return password.status();
  password_ = *password;

  const bool fresh = !fs::exists(cluster_path / "PG_VERSION", ec);
  if (fresh) {
    spdlog::info("initialising embedded PostgreSQL cluster in {}", cluster_dir_);
    if (auto st = InitCluster(bin_dir_, cluster_dir_, run_as_, owner, parent_fd, parent,
                              cluster_name, password_);
        !st.ok()) {
      return st;
    }
  }

  if (auto st = StartServer(); !st.ok()) {
    std::string tail = ServerLogTail(cluster_fd.get(), owner);
    return tail.empty() ? st : absl::Status(st.code(), std::string(st.message()) + ": " + tail);
  }

  // From here on a failure stops the server again, so that nothing runs with a half-done setup.
  absl::Status st;
  {
    struct stat hba_stat {};
    auto hba = ReadFileAt(cluster_fd.get(), "pg_hba.conf", cluster_dir_ + "/pg_hba.conf",
                          kMaxHbaFile, &hba_stat);
    st = hba.status();
    if (st.ok()) {
      const bool rewrite_hba = !HbaRequiresPasswords(*hba);
      if (rewrite_hba || (password_is_new && !fresh)) {
        spdlog::info("switching the embedded PostgreSQL in {} to password authentication",
                     cluster_dir_);
        st = MigrateToScram(ConnectionUrl(), password_, cluster_fd.get(), cluster_dir_, owner,
                            rewrite_hba);
      }
    }
  }
  if (st.ok()) st = CheckConnection(ConnectionUrl(), cluster_dir_, password_file());
  if (!st.ok()) {
    (void)Stop();
    // A password nobody could use must not stay behind to be taken for the real one.
    if (password_is_new && !fresh) unlinkat(home_fd->get(), (name + ".password").c_str(), 0);
    password_.clear();
    return st;
  }
  spdlog::info("embedded PostgreSQL ready in {}", cluster_dir_);
  return absl::OkStatus();
}

absl::Status EmbeddedPostgres::StartServer() {
  // Is a server from an earlier run still up? Reuse it.
  if (Run({bin_dir_ + "/pg_ctl", "-D", cluster_dir_, "status"}, run_as_, true).exit_code == 0) {
    spdlog::info("reusing running embedded PostgreSQL in {}", cluster_dir_);
    running_ = true;
    reused_ = true;
    // A process that crashed between rewriting pg_hba.conf and reloading it left the server on
    // its old rules; let it catch up.
    Run({bin_dir_ + "/pg_ctl", "-D", cluster_dir_, "reload"}, run_as_, true);
    return absl::OkStatus();
  }
  // pg_ctl runs the server through /bin/sh -c with these options unquoted: every value here is
  // a constant or a path IsPlainPath accepted.
  const std::string opts = "-c listen_addresses='' -p " + std::to_string(kPort) +
                           " -c unix_socket_directories='" + cluster_dir_ +
                           "' -c unix_socket_permissions=0700 -c fsync=on "
                           "-c synchronous_commit=on -c max_connections=200";
  const std::string log = cluster_dir_ + "/postgres.log";
  RunResult r = Run(
      {bin_dir_ + "/pg_ctl", "-D", cluster_dir_, "-o", opts, "-l", log, "-w", "-t", "60", "start"},
      run_as_, /*capture=*/false);
  if (r.exit_code != 0) {
    return absl::InternalError("pg_ctl start failed (exit " + std::to_string(r.exit_code) +
                               "); see " + log);
  }
  spdlog::info("embedded PostgreSQL started in {}", cluster_dir_);
  running_ = true;
  return absl::OkStatus();
}

absl::Status EmbeddedPostgres::Stop() {
  if (!running_) return absl::OkStatus();
  RunResult r =
      Run({bin_dir_ + "/pg_ctl", "-D", cluster_dir_, "-m", "fast", "-w", "stop"}, run_as_, true);
  running_ = false;
  if (r.exit_code != 0) {
    return absl::InternalError("pg_ctl stop failed (exit " + std::to_string(r.exit_code) +
                               "): " + r.output);
  }
  spdlog::info("embedded PostgreSQL stopped");
  return absl::OkStatus();
}

}  // namespace qm::store::pg
