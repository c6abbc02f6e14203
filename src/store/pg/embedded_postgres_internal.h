#pragma once

// What the files of EmbeddedPostgres share (embedded_postgres.cc: the cluster's processes and
// connections, initdb, pg_ctl, the switch to passwords; embedded_postgres_files.cc: its files,
// read and written without following symlinks: the password and location files, pg_hba.conf,
// the parent directory). Not for use outside them.

#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace qm::store::pg::embedded_internal {

inline std::string ErrnoText(int err) {
  return std::error_code(err, std::system_category()).message();
}

// Owns a file descriptor.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Reset(); }

  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }

 private:
  void Reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  int fd_;
};

// The owner of the cluster's files: `postgres` when this process is root, else this process.
struct Owner {
  uid_t uid;
  gid_t gid;
  bool is_other_user;  // files this process creates for PostgreSQL must be chowned to uid:gid
};

// Unix socket paths are limited to 107 bytes: ".s.PGSQL.5432" plus the directory.
absl::Status CheckClusterPath(const std::string& cluster_dir, const std::string& bin_dir);

absl::StatusOr<std::string> RandomHex(size_t bytes);

// Opens `name` in `dir_fd` as a directory, never through a symlink.
Fd OpenDirAt(int dir_fd, const std::string& name);

// Reads a regular file `name` in `dir_fd`, never through a symlink (nor blocking on a FIFO).
// NotFound when it does not exist. `st` receives its attributes.
absl::StatusOr<std::string> ReadFileAt(int dir_fd, const std::string& name, const std::string& path,
                                       size_t max_size, struct stat* st);

// Creates a new file (0600, owned by `owner` when given) under a random name in `dir_fd` holding
// `content`, synced. O_EXCL|O_NOFOLLOW: never opens something already there.
absl::StatusOr<std::string> CreateTempFileAt(int dir_fd, const std::string& prefix,
                                             std::string_view content, const Owner* owner);

// The password from `<cluster>.password`: NotFound when missing, FailedPrecondition unless it is
// a private regular file of this process's user.
absl::StatusOr<std::string> ReadPasswordFile(int parent_fd, const std::string& name,
                                             const std::string& path);

// Creates `name` in `parent_fd` holding `content` without replacing an existing file: it is
// written and synced under a temporary name first, so a crash never leaves a partial one.
// AlreadyExists when another process created it first.
absl::Status CreateFileOnce(int parent_fd, const std::string& name, const std::string& path,
                            std::string_view content);

// Writes a new random password to `<cluster>.password` without replacing an existing file.
absl::StatusOr<std::string> CreatePasswordFile(int parent_fd, const std::string& name,
                                               const std::string& path);

// The cluster directory named by `<cluster>.location` (see embedded_postgres.h): NotFound when
// there is no such file. The file directs root's chown and initdb, so it must be this process's
// own and writable by no one else, and name a plain absolute path.
absl::StatusOr<std::string> ReadLocationFile(int parent_fd, const std::string& name,
                                             const std::string& path);

// True when every active pg_hba.conf line requires a SCRAM password (or rejects).
bool HbaRequiresPasswords(std::string_view content);

// Opens the parent of the cluster directory, creating it (0711 for a cluster run by another
// user, who must traverse it, else 0700) when missing. It holds the password file and names the
// cluster directory, so only root or this process's user may be able to change its entries.
absl::StatusOr<Fd> OpenParent(const std::filesystem::path& parent, const Owner& owner);

}  // namespace qm::store::pg::embedded_internal
