#pragma once

// The web UI's built files (web/, built by scripts/build.sh), served at `/` next to the API.
// They are public (the same files for everyone, no secrets in them): every API call the UI makes
// carries its own credential.

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "api/rest/rest_api.h"

namespace qm::api {

class StaticFiles {
 public:
  // Reads every regular file under `root` into memory (the UI is a few hundred KiB; reading once
  // keeps disk I/O off the I/O threads). InvalidArgument when `root` has no index.html, a file
  // cannot be read, or the files add up to more than 64 MiB.
  static absl::StatusOr<std::unique_ptr<const StaticFiles>> Load(const std::string& root);

  // True for the paths of the Kubernetes API and the server's own endpoints (/api, /apis,
  // /openapi, /version, /healthz, /livez, /readyz, /metrics, ...), which the UI never shadows.
  static bool IsApiPath(const std::string& path);

  // The answer to a GET of a path outside the API: the file, or index.html for any other path
  // (the UI routes on the client, so /inventory/gpu-node-a must load the app), or 404 for a
  // missing file under /assets/. nullopt for other methods and for API paths: those go to the
  // API (and need a credential). Thread-safe.
  std::optional<HttpResponse> Serve(const HttpRequest& req) const;

  const std::string& root() const { return root_; }
  size_t file_count() const { return files_.size(); }

 private:
  struct File {
    std::string content_type;
    std::string body;
  };

  StaticFiles() = default;

  std::string root_;
  std::map<std::string, File> files_;  // by URL path ("/index.html", "/assets/index-x.js")
};

}  // namespace qm::api
