// The embedded cluster's files (embedded_postgres.h): opened relative to a directory descriptor
// and never through a symlink, created under a random name and linked or renamed into place.

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include "store/pg/embedded_postgres_internal.h"

namespace qm::store::pg {

using namespace embedded_internal;  // NOLINT(google-build-using-namespace)

namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxPasswordFile = 4096;  // bytes

// pg_ctl hands -D, -l and -o to /bin/sh -c (inside double quotes, -o unquoted), postgres splits
// unix_socket_directories at commas, and the directory goes into a libpq connection string: a
// path made of these characters means nothing to any of them.
bool IsPlainPath(std::string_view path) {
  constexpr std::string_view kAllowed = "/._-+@:~";
  if (path.empty()) return false;
  for (char c : path) {
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && kAllowed.find(c) == std::string_view::npos) return false;
  }
  return true;
}

absl::Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError("cannot write " + path + ": " + ErrnoText(errno));
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status embedded_internal::CheckClusterPath(const std::string& cluster_dir,
                                                 const std::string& bin_dir) {
  if (cluster_dir.size() > 90) {
    return absl::InvalidArgumentError(
        "--data-dir path too long for a Unix socket (max 90 characters): " + cluster_dir);
  }
  if (!IsPlainPath(cluster_dir) || !IsPlainPath(bin_dir) || cluster_dir == "/") {
    return absl::InvalidArgumentError(
        "the embedded PostgreSQL's directories may only contain letters, digits and /._-+@:~ "
        "(pg_ctl passes them through a shell): " +
        cluster_dir + ", " + bin_dir);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> embedded_internal::RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = getrandom(raw.data() + got, bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError("getrandom: " + ErrnoText(errno));
    }
    got += static_cast<size_t>(n);
  }
  constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char b : raw) {
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  return hex;
}

Fd embedded_internal::OpenDirAt(int dir_fd, const std::string& name) {
  return Fd(openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

absl::StatusOr<std::string> embedded_internal::ReadFileAt(int dir_fd, const std::string& name,
                                                          const std::string& path, size_t max_size,
                                                          struct stat* st) {
  Fd fd(openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.ok()) {
    if (errno == ENOENT) return absl::NotFoundError(path + " does not exist");
    if (errno == ELOOP) return absl::FailedPreconditionError(path + " is a symlink; refusing it");
    return absl::InternalError("cannot open " + path + ": " + ErrnoText(errno));
  }
  if (fstat(fd.get(), st) != 0) return absl::InternalError("cannot stat " + path);
  if (!S_ISREG(st->st_mode)) {
    return absl::FailedPreconditionError(path + " is not a regular file; refusing it");
  }
  if (static_cast<size_t>(st->st_size) > max_size) {
    return absl::FailedPreconditionError(path + " is unexpectedly large");
  }
  std::string content;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError("cannot read " + path + ": " + ErrnoText(errno));
    if (n == 0) break;
    content.append(buf, static_cast<size_t>(n));
    if (content.size() > max_size) {
      return absl::FailedPreconditionError(path + " is unexpectedly large");
    }
  }
  return content;
}

absl::StatusOr<std::string> embedded_internal::CreateTempFileAt(int dir_fd,
                                                                const std::string& prefix,
                                                                std::string_view content,
                                                                const Owner* owner) {
  auto suffix = RandomHex(8);
  if (!suffix.ok()) return suffix.status();
  std::string name = prefix + *suffix;
  Fd fd(openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.ok()) return absl::InternalError("cannot create " + name + ": " + ErrnoText(errno));
  absl::Status st = WriteAll(fd.get(), content, name);
  if (st.ok() && owner != nullptr && owner->is_other_user &&
      fchown(fd.get(), owner->uid, owner->gid) != 0) {
    st = absl::InternalError("cannot chown " + name + ": " + ErrnoText(errno));
  }
  if (st.ok() && fsync(fd.get()) != 0) {
    st = absl::InternalError("cannot sync " + name + ": " + ErrnoText(errno));
  }
  if (!st.ok()) {
    unlinkat(dir_fd, name.c_str(), 0);
    return st;
  }
  return name;
}

absl::StatusOr<std::string> embedded_internal::ReadPasswordFile(int parent_fd,
                                                                const std::string& name,
                                                                const std::string& path) {
  struct stat st {};
  auto content = ReadFileAt(parent_fd, name, path, kMaxPasswordFile, &st);
  if (!content.ok()) return content.status();
  if (st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    return absl::FailedPreconditionError(
        path + " must be owned by the user running quartermaster (uid " +
        std::to_string(geteuid()) + ") and readable by no one else (chmod 600)");
  }
  std::string password = *content;
  while (!password.empty() && (password.back() == '\n' || password.back() == '\r')) {
    password.pop_back();
  }
  for (char c : password) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return absl::FailedPreconditionError(path + " holds control characters");
    }
  }
  if (password.empty()) return absl::FailedPreconditionError(path + " is empty");
  return password;
}

absl::Status embedded_internal::CreateFileOnce(int parent_fd, const std::string& name,
                                               const std::string& path, std::string_view content) {
  auto tmp = CreateTempFileAt(parent_fd, "." + name + ".tmp-", content, nullptr);
  if (!tmp.ok()) return tmp.status();
  int rc = linkat(parent_fd, tmp->c_str(), parent_fd, name.c_str(), 0);
  int link_errno = errno;
  unlinkat(parent_fd, tmp->c_str(), 0);
  if (rc != 0) {
    if (link_errno == EEXIST) return absl::AlreadyExistsError(path + " exists");
    return absl::InternalError("cannot create " + path + ": " + ErrnoText(link_errno));
  }
  fsync(parent_fd);
  return absl::OkStatus();
}

absl::StatusOr<std::string> embedded_internal::CreatePasswordFile(int parent_fd,
                                                                  const std::string& name,
                                                                  const std::string& path) {
  auto password = RandomHex(32);
  if (!password.ok()) return password.status();
  absl::Status st = CreateFileOnce(parent_fd, name, path, *password + "\n");
  // Another process created it first: use that one.
  if (absl::IsAlreadyExists(st)) return ReadPasswordFile(parent_fd, name, path);
  if (!st.ok()) return st;
  return *password;
}

absl::StatusOr<std::string> embedded_internal::ReadLocationFile(int parent_fd,
                                                                const std::string& name,
                                                                const std::string& path) {
  struct stat st {};
  auto content = ReadFileAt(parent_fd, name, path, kMaxPasswordFile, &st);
  if (!content.ok()) return content.status();
  if (st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
    return absl::FailedPreconditionError(
        path + " must be owned by the user running quartermaster (uid " +
        std::to_string(geteuid()) + ") and writable by no one else (chmod 644)");
  }
  std::string location = *content;
  while (!location.empty() && (location.back() == '\n' || location.back() == '\r')) {
    location.pop_back();
  }
  // Only what LocateCluster writes: `<root>/<16 hex digits>`, so that not even a stale or
  // hand-edited record can make root chown a directory that is not a cluster's.
  const std::string id = fs::path(location).filename().string();
  if (location.empty() || location.front() != '/' || !IsPlainPath(location) ||
      fs::path(location).lexically_normal().string() != location || id.size() != 16 ||
      id.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return absl::FailedPreconditionError(
        path + " does not name a cluster directory (<directory>/<16 hex digits> expected)");
  }
  return location;
}

bool embedded_internal::HbaRequiresPasswords(std::string_view content) {
  size_t pos = 0;
  while (pos < content.size()) {
    size_t end = content.find('\n', pos);
    if (end == std::string_view::npos) end = content.size();
    std::string_view line = content.substr(pos, end - pos);
    pos = end + 1;
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    bool active = false;
    bool ok = false;
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
      size_t start = i;
      while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
      if (i == start) continue;
      active = true;
      std::string_view token = line.substr(start, i - start);
      if (token == "scram-sha-256" || token == "reject") ok = true;
    }
    if (active && !ok) return false;
  }
  return true;
}

absl::StatusOr<Fd> embedded_internal::OpenParent(const fs::path& parent, const Owner& owner) {
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) {
    fs::create_directories(parent.parent_path(), ec);
    if (mkdir(parent.c_str(), owner.is_other_user ? 0711 : 0700) != 0 && errno != EEXIST) {
      return absl::InternalError("cannot create " + parent.string() + ": " + ErrnoText(errno));
    }
  }
  Fd fd(open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.ok()) {
    return absl::InternalError("cannot open " + parent.string() + ": " + ErrnoText(errno));
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return absl::InternalError("cannot stat " + parent.string());
  if (st.st_uid != 0 && st.st_uid != geteuid()) {
    return absl::FailedPreconditionError(parent.string() +
                                         " must be owned by root or by the user running "
                                         "quartermaster: it holds the database password");
  }
  if ((st.st_mode & S_IWOTH) != 0) {
    return absl::FailedPreconditionError(parent.string() +
                                         " is writable by every user; it holds the database "
                                         "password (chmod o-w it, or choose another --data-dir)");
  }
  return fd;
}

}  // namespace qm::store::pg
