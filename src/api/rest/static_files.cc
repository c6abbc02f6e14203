#include "api/rest/static_files.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <system_error>

#include "absl/strings/match.h"
#include "api/rest/status.h"

namespace qm::api {
namespace {

constexpr size_t kMaxTotalBytes = 64 * 1024 * 1024;

std::string ContentType(const std::string& path) {
  static const std::pair<const char*, const char*> kTypes[] = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},
      {".map", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".woff2", "font/woff2"},
      {".woff", "font/woff"},
      {".txt", "text/plain; charset=utf-8"},
  };
  for (const auto& [ext, type] : kTypes) {
    if (absl::EndsWith(path, ext)) return type;
  }
  return "application/octet-stream";
}

}  // namespace

absl::StatusOr<std::unique_ptr<const StaticFiles>> StaticFiles::Load(const std::string& root) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_regular_file(fs::path(root) / "index.html", ec)) {
    return absl::InvalidArgumentError("--web-root: " + root + " has no index.html");
  }
  auto out = std::unique_ptr<StaticFiles>(new StaticFiles());
  out->root_ = root;
  size_t total = 0;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    std::ifstream in(it->path(), std::ios::binary);
    std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      return absl::InvalidArgumentError("--web-root: cannot read " + it->path().string());
    }
    total += body.size();
    if (total > kMaxTotalBytes) {
      return absl::InvalidArgumentError("--web-root: " + root + " holds more than 64 MiB");
    }
    std::string url = "/" + fs::relative(it->path(), root, ec).generic_string();
    out->files_[url] = File{ContentType(url), std::move(body)};
  }
  if (ec) return absl::InvalidArgumentError("--web-root: " + root + ": " + ec.message());
  return std::unique_ptr<const StaticFiles>(std::move(out));
}

bool StaticFiles::IsApiPath(const std::string& path) {
  static const char* const kReserved[] = {
      "api",     "apis", "openapi", "version",      "healthz",    "livez",       "readyz",
      "metrics", "logs", "debug",   "swagger.json", "swaggerapi", ".well-known",
  };
  const size_t start = path.find_first_not_of('/');
  if (start == std::string::npos) return false;  // "/" is the UI
  const size_t end = path.find('/', start);
  const std::string first = path.substr(start, end == std::string::npos ? end : end - start);
  for (const char* r : kReserved) {
    if (first == r) return true;
  }
  return false;
}

std::optional<HttpResponse> StaticFiles::Serve(const HttpRequest& req) const {
  if (req.method != "GET" || IsApiPath(req.path)) return std::nullopt;
  auto it = files_.find(req.path);
  if (it == files_.end() || req.path == "/") {
    if (absl::StartsWith(req.path, "/assets/")) {
      HttpError e = MakeError(404, "NotFound", "the server could not find the requested resource");
      return HttpResponse{404, "application/json", ResponseText(e.status), {}};
    }
    it = files_.find("/index.html");
  }
  return HttpResponse{200, it->second.content_type, it->second.body, {}};
}

}  // namespace qm::api
