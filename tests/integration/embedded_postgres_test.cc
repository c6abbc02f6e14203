// EmbeddedPostgres against the real PostgreSQL binaries: password authentication, the password
// file, and the migration of clusters created with trust auth by earlier versions.
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <pqxx/pqxx>
#include <sstream>
#include <string>
#include <vector>

#include "store/pg/embedded_postgres.h"

namespace qm::store::pg {
namespace {

namespace fs = std::filesystem;

std::string NewestBinDir() {
  std::string best;
  int best_version = -1;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    int v = std::atoi(e.path().filename().c_str());
    if (v > best_version && fs::exists(e.path() / "bin" / "initdb")) {
      best_version = v;
      best = (e.path() / "bin").string();
    }
  }
  return best;
}

// Runs argv as the user PostgreSQL runs as (`postgres` when the tests run as root).
int RunAsClusterOwner(std::vector<std::string> args) {
  if (geteuid() == 0) args.insert(args.begin(), {"/usr/sbin/runuser", "-u", "postgres", "--"});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "" when a connection with `url` works, else libpq's error.
std::string ConnectError(const std::string& url) {
  try {
    pqxx::connection c(url);
    pqxx::nontransaction tx(c);
    tx.exec1("SELECT 1");
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::string WithoutPassword(const std::string& url) {
  size_t at = url.find(" password=");
  return at == std::string::npos ? url : url.substr(0, at);
}

// pg_hba.conf lines that are neither blank nor comments.
std::vector<std::string> ActiveHbaLines(const std::string& cluster_dir) {
  std::vector<std::string> lines;
  std::istringstream in(ReadFile(cluster_dir + "/pg_hba.conf"));
  for (std::string line; std::getline(in, line);) {
    line = line.substr(0, line.find('#'));
    if (line.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(line);
  }
  return lines;
}

void ExpectOnlyScramLines(const std::string& cluster_dir) {
  auto lines = ActiveHbaLines(cluster_dir);
  EXPECT_FALSE(lines.empty());
  for (const auto& line : lines) {
    EXPECT_EQ(line.find("trust"), std::string::npos) << line;
    EXPECT_NE(line.find("scram-sha-256"), std::string::npos) << line;
  }
}

class EmbeddedPostgresTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/qm-epg-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    chmod(dir_.c_str(), 0755);  // the postgres user must reach its cluster directory
    cluster_ = dir_ + "/pg";
    bin_ = NewestBinDir();
    ASSERT_FALSE(bin_.empty()) << "no PostgreSQL under /usr/lib/postgresql";
  }

  void TearDown() override {
    for (const std::string& cluster : {cluster_, relocated_}) {
      if (!cluster.empty() && fs::exists(cluster + "/postmaster.pid")) {
        RunAsClusterOwner({bin_ + "/pg_ctl", "-D", cluster, "-m", "immediate", "-w", "stop"});
      }
    }
    fs::remove_all(dir_);
  }

  // The URL an earlier version handed out: no password.
  std::string TrustUrl() const {
    return "host=" + cluster_ + " port=5432 user=quartermaster dbname=postgres";
  }

  // What earlier versions did: initdb with trust auth, then pg_ctl start.
  void CreateTrustCluster() {
    fs::create_directories(cluster_);
    if (geteuid() == 0) {
      struct passwd* pw = getpwnam("postgres");
      ASSERT_NE(pw, nullptr);
      ASSERT_EQ(chown(cluster_.c_str(), pw->pw_uid, pw->pw_gid), 0);
    }
    chmod(cluster_.c_str(), 0700);
    ASSERT_EQ(
        RunAsClusterOwner({bin_ + "/initdb", "-D", cluster_, "--username=quartermaster",
                           "--auth=trust", "--encoding=UTF8", "--no-locale", "--no-instructions"}),
        0);
    ASSERT_FALSE(ActiveHbaLines(cluster_).empty());
    ASSERT_NE(ReadFile(cluster_ + "/pg_hba.conf").find("trust"), std::string::npos);
  }

  void StartTrustCluster() {
    ASSERT_EQ(RunAsClusterOwner({bin_ + "/pg_ctl", "-D", cluster_, "-o",
                                 "-c listen_addresses='' -p 5432 -c unix_socket_directories='" +
                                     cluster_ + "' -c unix_socket_permissions=0700",
                                 "-l", cluster_ + "/postgres.log", "-w", "start"}),
              0);
  }

  void StopTrustCluster() {
    ASSERT_EQ(RunAsClusterOwner({bin_ + "/pg_ctl", "-D", cluster_, "-m", "fast", "-w", "stop"}), 0);
  }

  std::string PasswordFile() const { return cluster_ + ".password"; }

  std::string dir_;
  std::string cluster_;
  std::string relocated_;  // a cluster a test had kept outside dir_/pg, stopped in TearDown
  std::string bin_;
};

TEST_F(EmbeddedPostgresTest, FreshClusterRequiresThePasswordFromAPrivateFile) {
  EmbeddedPostgres pg(cluster_, "");
  ASSERT_TRUE(pg.Start().ok());
  ASSERT_TRUE(pg.running());

  EXPECT_EQ(pg.password_file(), dir_ + "/pg.password");
  struct stat st {};
  ASSERT_EQ(lstat(PasswordFile().c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, geteuid());
  std::string password = ReadFile(PasswordFile());
  ASSERT_EQ(password.size(), 65u);  // 32 random bytes, hex, and a newline
  password.pop_back();
  EXPECT_EQ(password.find_first_not_of("0123456789abcdef"), std::string::npos);

  const std::string url = pg.ConnectionUrl();
  EXPECT_NE(url.find(password), std::string::npos);
  EXPECT_EQ(ConnectError(url), "");
  EXPECT_NE(ConnectError(WithoutPassword(url)).find("no password supplied"), std::string::npos);
  EXPECT_NE(
      ConnectError(WithoutPassword(url) + " password=wrong").find("password authentication failed"),
      std::string::npos);
  ExpectOnlyScramLines(cluster_);

  // initdb's copy of the password and its private directory are gone.
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(dir_)) entries.push_back(e.path().filename());
  std::sort(entries.begin(), entries.end());
  EXPECT_EQ(entries, (std::vector<std::string>{"pg", "pg.password"}));
  EXPECT_TRUE(pg.Stop().ok());
}

TEST_F(EmbeddedPostgresTest, RestartReusesThePassword) {
  std::string url;
  {
    EmbeddedPostgres pg(cluster_, "");
    ASSERT_TRUE(pg.Start().ok());
    url = pg.ConnectionUrl();
    pqxx::connection c(url);
    pqxx::work tx(c);
    tx.exec0("CREATE TABLE kept (v int)");
    tx.exec0("INSERT INTO kept VALUES (7)");
    tx.commit();
    ASSERT_TRUE(pg.Stop().ok());
  }
  const std::string password = ReadFile(PasswordFile());
  EmbeddedPostgres again(cluster_, "");
  absl::Status st = again.Start();
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(ReadFile(PasswordFile()), password);
  EXPECT_EQ(again.ConnectionUrl(), url);
  pqxx::connection c(again.ConnectionUrl());
  pqxx::nontransaction tx(c);
  EXPECT_EQ(tx.exec1("SELECT v FROM kept")[0].as<int>(), 7);
  EXPECT_NE(ConnectError(WithoutPassword(url)), "");
}

TEST_F(EmbeddedPostgresTest, MigratesAStoppedTrustCluster) {
  CreateTrustCluster();
  StartTrustCluster();
  {
    pqxx::connection c(TrustUrl());
    pqxx::work tx(c);
    tx.exec0("CREATE TABLE kept (v int)");
    tx.exec0("INSERT INTO kept VALUES (42)");
    tx.commit();
  }
  StopTrustCluster();
  ASSERT_FALSE(fs::exists(PasswordFile()));

  EmbeddedPostgres pg(cluster_, "");
  absl::Status st = pg.Start();
  ASSERT_TRUE(st.ok()) << st;
  struct stat file {};
  ASSERT_EQ(lstat(PasswordFile().c_str(), &file), 0);
  EXPECT_EQ(file.st_mode & 07777, 0600u);
  ExpectOnlyScramLines(cluster_);
  EXPECT_NE(ConnectError(TrustUrl()).find("no password supplied"), std::string::npos);
  pqxx::connection c(pg.ConnectionUrl());
  pqxx::nontransaction tx(c);
  EXPECT_EQ(tx.exec1("SELECT v FROM kept")[0].as<int>(), 42);
  // The server hashed the password: the catalogue holds a SCRAM verifier.
  EXPECT_EQ(tx.exec1("SELECT left(rolpassword, 14) FROM pg_authid WHERE rolname = "
                     "'quartermaster'")[0]
                .as<std::string>(),
            "SCRAM-SHA-256$");
}

// A trust cluster still running (left by a crashed earlier version): Start() reuses it, and the
// reloaded pg_hba.conf is in force when Start() returns.
TEST_F(EmbeddedPostgresTest, MigratesATrustClusterLeftRunning) {
  CreateTrustCluster();
  StartTrustCluster();
  ASSERT_EQ(ConnectError(TrustUrl()), "");

  EmbeddedPostgres pg(cluster_, "");
  absl::Status st = pg.Start();
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_NE(ConnectError(TrustUrl()).find("no password supplied"), std::string::npos);
  EXPECT_EQ(ConnectError(pg.ConnectionUrl()), "");
  ExpectOnlyScramLines(cluster_);

  // Later starts have nothing left to migrate.
  ASSERT_TRUE(pg.Stop().ok());
  const std::string hba = ReadFile(cluster_ + "/pg_hba.conf");
  ASSERT_TRUE(pg.Start().ok());
  EXPECT_EQ(ReadFile(cluster_ + "/pg_hba.conf"), hba);
  EXPECT_EQ(ConnectError(pg.ConnectionUrl()), "");
}

// Losing the password file of a cluster that already requires one must not silently produce a
// new password that the cluster does not know.
TEST_F(EmbeddedPostgresTest, LostPasswordFileIsAnError) {
  {
    EmbeddedPostgres pg(cluster_, "");
    ASSERT_TRUE(pg.Start().ok());
    ASSERT_TRUE(pg.Stop().ok());
  }
  ASSERT_TRUE(fs::remove(PasswordFile()));
  EmbeddedPostgres pg(cluster_, "");
  absl::Status st = pg.Start();
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_NE(st.message().find("already requires a password"), absl::string_view::npos) << st;
  EXPECT_FALSE(pg.running());
  EXPECT_FALSE(fs::exists(PasswordFile()));
  EXPECT_FALSE(fs::exists(cluster_ + "/postmaster.pid"));  // stopped again
}

TEST_F(EmbeddedPostgresTest, RefusesAPasswordFileOthersCanRead) {
  {
    std::ofstream out(PasswordFile());
    out << "0123456789abcdef\n";
  }
  chmod(PasswordFile().c_str(), 0644);
  EmbeddedPostgres pg(cluster_, "");
  absl::Status st = pg.Start();
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_NE(st.message().find("chmod 600"), absl::string_view::npos) << st;
  EXPECT_FALSE(fs::exists(cluster_ + "/PG_VERSION"));
}

TEST_F(EmbeddedPostgresTest, RefusesASymlinkedPasswordFile) {
  const std::string target = dir_ + "/elsewhere";
  {
    std::ofstream out(target);
    out << "0123456789abcdef\n";
  }
  chmod(target.c_str(), 0600);
  fs::create_symlink(target, PasswordFile());
  EmbeddedPostgres pg(cluster_, "");
  absl::Status st = pg.Start();
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_NE(st.message().find("symlink"), absl::string_view::npos) << st;
  EXPECT_FALSE(fs::exists(cluster_ + "/PG_VERSION"));
}

TEST_F(EmbeddedPostgresTest, RefusesAParentEveryoneCanWrite) {
  chmod(dir_.c_str(), 0777);
  EmbeddedPostgres pg(cluster_, "");
  absl::Status st = pg.Start();
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_FALSE(fs::exists(PasswordFile()));
  EXPECT_FALSE(fs::exists(cluster_));
}

TEST_F(EmbeddedPostgresTest, RefusesAClusterDirectoryThatIsASymlink) {
  fs::create_directory(dir_ + "/real");
  fs::create_directory_symlink(dir_ + "/real", cluster_);
  EmbeddedPostgres pg(cluster_, "");
  absl::Status st = pg.Start();
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_TRUE(fs::is_empty(dir_ + "/real"));
}

// pg_ctl passes the data directory through /bin/sh.
TEST_F(EmbeddedPostgresTest, RejectsShellCharactersInThePath) {
  for (const std::string name : {"pg$(touch x)", "pg\"q", "pg'q", "pg`x`", "p g", "pg,x"}) {
    EmbeddedPostgres pg(dir_ + "/" + name, "");
    absl::Status st = pg.Start();
    EXPECT_TRUE(absl::IsInvalidArgument(st)) << name << ": " << st;
  }
  EXPECT_TRUE(fs::is_empty(dir_));
}

// A checkout under /root (mode 0700) as root: `postgres` cannot enter the data directory, so the
// cluster is kept under the relocation root, recorded in the data directory, and found again by
// the next start with its data. As another user PostgreSQL runs as that user, in place.
TEST_F(EmbeddedPostgresTest, DataDirUnderAPrivateDirectoryWorks) {
  const std::string private_dir = dir_ + "/private";
  ASSERT_EQ(mkdir(private_dir.c_str(), 0700), 0);
  const std::string root = dir_ + "/relocated";  // created by Start()
  const std::string named = private_dir + "/data/postgres";
  {
    EmbeddedPostgres pg(named, "", root);
    absl::Status st = pg.Start();
    ASSERT_TRUE(st.ok()) << st;
    relocated_ = pg.cluster_dir();
    pqxx::connection c(pg.ConnectionUrl());
    pqxx::work tx(c);
    tx.exec0("CREATE TABLE kept (v int)");
    tx.exec0("INSERT INTO kept VALUES (11)");
    tx.commit();
    EXPECT_EQ(pg.password_file(), named + ".password");
    ASSERT_TRUE(pg.Stop().ok());
  }
  struct stat st {};
  if (geteuid() == 0) {
    EXPECT_EQ(fs::path(relocated_).parent_path().string(), root);
    ASSERT_EQ(lstat(relocated_.c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_uid, getpwnam("postgres")->pw_uid);
    EXPECT_EQ(st.st_mode & 07777, 0700u);
    ASSERT_EQ(lstat(root.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 0u);
    EXPECT_EQ(st.st_mode & 07777, 0711u);
    EXPECT_EQ(ReadFile(named + ".location"), relocated_ + "\n");
    ASSERT_EQ(lstat((named + ".location").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
    EXPECT_FALSE(fs::exists(named));  // nothing half-made where postgres could not go
  } else {
    EXPECT_EQ(relocated_, named);
    EXPECT_FALSE(fs::exists(named + ".location"));
  }
  ASSERT_EQ(lstat((named + ".password").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, geteuid());

  EmbeddedPostgres again(named, "", root);
  absl::Status started = again.Start();
  ASSERT_TRUE(started.ok()) << started;
  EXPECT_EQ(again.cluster_dir(), relocated_);
  pqxx::connection c(again.ConnectionUrl());
  pqxx::nontransaction tx(c);
  EXPECT_EQ(tx.exec1("SELECT v FROM kept")[0].as<int>(), 11);
  ASSERT_TRUE(again.Stop().ok());
  // Only the one cluster was made.
  if (geteuid() == 0) {
    EXPECT_EQ(std::distance(fs::directory_iterator(root), {}), 1);
  }
}

// With no relocation root, a data directory `postgres` cannot reach is an error that says what
// to do, before anything is created.
TEST_F(EmbeddedPostgresTest, UnreachableDataDirWithoutRelocationSaysWhatToDo) {
  if (geteuid() != 0) GTEST_SKIP() << "only root runs PostgreSQL as another user";
  const std::string private_dir = dir_ + "/private";
  ASSERT_EQ(mkdir(private_dir.c_str(), 0700), 0);
  EmbeddedPostgres pg(private_dir + "/postgres", "", "");
  absl::Status st = pg.Start();
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_NE(st.message().find("cannot enter " + private_dir), absl::string_view::npos) << st;
  EXPECT_NE(st.message().find("chmod o+x " + private_dir), absl::string_view::npos) << st;
  EXPECT_TRUE(fs::is_empty(private_dir));
}

// A cluster initialised in place is never moved behind the operator's back: when `postgres`
// loses its way in, Start() names the directory to open.
TEST_F(EmbeddedPostgresTest, ClusterInPlaceThatBecameUnreachableSaysWhatToDo) {
  if (geteuid() != 0) GTEST_SKIP() << "only root runs PostgreSQL as another user";
  const std::string box = dir_ + "/box";
  ASSERT_EQ(mkdir(box.c_str(), 0755), 0);
  const std::string cluster = box + "/pg";
  {
    EmbeddedPostgres pg(cluster, "", dir_ + "/relocated");
    ASSERT_TRUE(pg.Start().ok());
    EXPECT_EQ(pg.cluster_dir(), cluster);
    ASSERT_TRUE(pg.Stop().ok());
  }
  ASSERT_EQ(chmod(box.c_str(), 0700), 0);
  EmbeddedPostgres pg(cluster, "", dir_ + "/relocated");
  absl::Status st = pg.Start();
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_NE(st.message().find("chmod o+x " + box), absl::string_view::npos) << st;
  EXPECT_FALSE(fs::exists(cluster + ".location"));
  EXPECT_FALSE(fs::exists(dir_ + "/relocated"));
}

// The location file steers root's chown and initdb: only a private file naming a directory of
// the form Start() creates is taken.
TEST_F(EmbeddedPostgresTest, RefusesALocationFileThatNamesSomethingElse) {
  const std::string target = dir_ + "/target";
  ASSERT_EQ(mkdir(target.c_str(), 0755), 0);
  for (const std::string& content : {target + "\n", std::string("relative/0123456789abcdef\n"),
                                     dir_ + "/../0123456789abcdef\n"}) {
    {
      std::ofstream out(cluster_ + ".location", std::ios::trunc);
      out << content;
    }
    chmod((cluster_ + ".location").c_str(), 0600);
    EmbeddedPostgres pg(cluster_, "", dir_ + "/relocated");
    absl::Status st = pg.Start();
    EXPECT_TRUE(absl::IsFailedPrecondition(st)) << content << ": " << st;
    EXPECT_NE(st.message().find("does not name a cluster directory"), absl::string_view::npos)
        << st;
  }
  fs::remove(cluster_ + ".location");
  fs::create_symlink(dir_ + "/elsewhere", cluster_ + ".location");
  EmbeddedPostgres pg(cluster_, "", dir_ + "/relocated");
  absl::Status st = pg.Start();
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_NE(st.message().find("symlink"), absl::string_view::npos) << st;
  struct stat t {};
  ASSERT_EQ(lstat(target.c_str(), &t), 0);
  EXPECT_EQ(t.st_uid, geteuid());  // never chowned
  EXPECT_TRUE(fs::is_empty(target));
  EXPECT_FALSE(fs::exists(cluster_));
}

}  // namespace
}  // namespace qm::store::pg
