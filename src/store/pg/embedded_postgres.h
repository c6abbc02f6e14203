#pragma once

#include <string>

#include "absl/status/status.h"

namespace qm::store::pg {

// A private PostgreSQL cluster under a data directory, for running without --database-url.
//
// Start() runs initdb on first use (user "quartermaster"), then starts the server with pg_ctl
// listening on a Unix socket inside the cluster directory only (no TCP; the directory and the
// socket are 0700). A cluster left running by a crashed process is reused. PostgreSQL refuses
// to run as root: when this process is root, the cluster belongs to and runs as the `postgres`
// system user. Stop() shuts it down (fast mode: in-flight transactions are rolled back,
// committed ones are durable).
//
// Where the cluster lives. `data_dir` names it; normally the cluster is that directory. When the
// cluster runs as `postgres` and that user cannot enter the directory above it (a checkout under
// /root, mode 0700, say), Start() keeps the cluster in `<relocation root>/<16 random hex digits>`
// (default root /var/lib/quartermaster, created 0711 and owned by root) instead, and records the
// choice in `<data_dir>.location` (0600, written once, never replaced); later starts read it and
// use that directory, so the data stays with its data directory. The password file stays next
// to `data_dir` either way. A cluster already initialised in `data_dir` is never moved: if
// `postgres` can no longer enter it, Start() fails with FailedPrecondition naming the directory
// to open up. A location file that is a symlink, not this user's, writable by others or not of
// the form `<directory>/<16 hex digits>` is refused.
//
// Authentication is scram-sha-256 for every pg_hba.conf line. At first initdb a random password
// (32 bytes from getrandom(2), hex) is written to `<data_dir>.password`, a sibling of
// `data_dir` (for `<data-dir>/postgres` that is `<data-dir>/postgres.password`): mode
// 0600, owned by this process's user (root, not `postgres`, when running as root), outside the
// directory the `postgres` user owns. initdb reads it from a copy in a private, randomly named
// directory next to the cluster, removed as soon as initdb exits; the password never appears on
// a command line. Start() refuses a password file that is a symlink, not a regular file, owned
// by another user or readable by group or others, and a parent directory that is writable by
// every user or owned by someone other than root or this process's user.
//
// Clusters created by earlier versions with `trust` auth are migrated by Start(): when the
// password file is missing it is generated, the server is started (or reused) while still
// trusting local connections, the role's password is set over the Unix socket (hashed by the
// server as SCRAM; the statement is kept out of the server log), pg_hba.conf is replaced by
// scram-sha-256 lines and the server reloads its configuration before Start() returns. Every
// step can be repeated, so an interrupted migration finishes at the next Start(). A cluster that
// already requires a password but has lost its password file is not reset: Start() fails with
// FailedPrecondition and leaves no new password file behind.
//
// Not thread-safe: call Start() and Stop() from one thread.
class EmbeddedPostgres {
 public:
  // `data_dir` is the cluster directory (created if missing); `bin_dir` holds initdb/pg_ctl,
  // empty to search /usr/lib/postgresql/<newest>/bin; `relocation_root` is where clusters that
  // `postgres` could not reach in `data_dir` are kept (empty: fail instead, see above).
  EmbeddedPostgres(std::string data_dir, std::string bin_dir,
                   std::string relocation_root = kDefaultRelocationRoot);
  ~EmbeddedPostgres();

  EmbeddedPostgres(const EmbeddedPostgres&) = delete;
  EmbeddedPostgres& operator=(const EmbeddedPostgres&) = delete;

  // FailedPrecondition with an install hint when the PostgreSQL binaries are missing, and for an
  // unsafe password file or parent directory (see above). InvalidArgument for a directory path
  // that is too long for a Unix socket or holds characters other than letters, digits and
  // `/._-+@:~` (pg_ctl passes paths through /bin/sh). When Start() fails after starting the
  // server, it stops it again.
  absl::Status Start();
  absl::Status Stop();
  bool running() const { return running_; }
  // Whether Start() found the cluster already running (another quartermaster serves it).
  bool reused() const { return reused_; }
  // Leaves the cluster running and forgets it: the destructor no longer stops it. For a tool
  // that reused the cluster of a running server.
  void Release() { running_ = false; }

  // libpq connection string for the running cluster (valid after a successful Start()). It
  // contains the password: pass it to libpq only, never log it or put it in an error message.
  std::string ConnectionUrl() const;
  // The same without the password, for PostgreSQL's client programs (pg_dump, pg_restore), which
  // are given the password in their environment (PGPASSWORD), never on their command line.
  std::string ClientConnectionUrl() const;
  std::string password() const { return password_; }
  // Where initdb, pg_ctl and the client programs of the cluster's version are (after Start()).
  const std::string& bin_dir() const { return bin_dir_; }

  // Where the password is kept: `<data_dir>.password`.
  std::string password_file() const { return data_dir_ + ".password"; }
  // Where a relocated cluster is recorded: `<data_dir>.location`.
  std::string location_file() const { return data_dir_ + ".location"; }
  // The directory the cluster lives in: `data_dir`, or where it was relocated (after Start()).
  const std::string& cluster_dir() const { return cluster_dir_; }

  static constexpr char kDefaultRelocationRoot[] = "/var/lib/quartermaster";

 private:
  // Sets cluster_dir_: the recorded location, `data_dir` when `postgres` can reach it, else a
  // new directory under the relocation root (recorded first). `home_fd` is data_dir's parent.
  absl::Status LocateCluster(int home_fd);
  absl::Status StartServer();

  std::string data_dir_;
  std::string cluster_dir_;
  std::string bin_dir_;
  std::string relocation_root_;
  std::string run_as_;  // system user to run PostgreSQL as, empty for this process's user
  std::string password_;
  bool running_ = false;
  bool reused_ = false;
};

}  // namespace qm::store::pg
