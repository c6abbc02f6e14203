#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "api/rest/rest_api.h"
#include "auth/authenticator.h"
#include "store/store.h"

namespace qm::service {
class AuditLog;
}  // namespace qm::service

namespace qm::api {

class Metrics;
class RequestGate;
class StaticFiles;

struct HttpServerOptions {
  std::string address = "127.0.0.1:8080";  // port 0 picks a free one
  // TLS: the serving certificate and key (PEM files). Both empty: plain HTTP, which the caller
  // allows only on loopback. `client_ca_file` (PEM) verifies client certificates when given.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string client_ca_file;
  // Threads that run the sockets (asynchronous I/O; connections and watches need no thread of
  // their own) and threads that run request handlers (which may wait on the database).
  int io_threads = 2;
  int handler_threads = 64;
  // Requests being handled at once (watches excluded, as kube-apiserver's
  // --max-requests-inflight); more get 429 with Retry-After.
  int max_requests_inflight = 400;
  // Open connections; more get 503 and are closed.
  int max_connections = 20000;
  // A request's headers must arrive within `header_timeout` of its first byte (slow clients are
  // cut), its body within `body_timeout`; a keep-alive connection may idle `idle_timeout`
  // between requests.
  std::chrono::milliseconds header_timeout = std::chrono::seconds(10);
  std::chrono::milliseconds body_timeout = std::chrono::seconds(60);
  std::chrono::milliseconds idle_timeout = std::chrono::seconds(120);
  size_t max_header_bytes = 64 * 1024;
  size_t max_body_bytes = 16 * 1024 * 1024;
};

// The HTTP/1.1 front door on Boost.Beast: TLS, authentication (client certificates and bearer
// tokens through `authenticator`), limits, and routing of health, metrics and everything else
// to RestApi; watches stream with chunked encoding. Anonymous callers reach only /healthz,
// /livez, /readyz, /version and the web UI's files (SetStaticFiles); everything else answers 401
// without credentials. A 500 never
// carries internal error text: the body names the request id under which the error was logged.
// Malformed framing (conflicting or duplicate Content-Length, Transfer-Encoding with
// Content-Length, bad chunk sizes, chunk trailers) is a 400 and closes the connection.
// Thread-safe.
class HttpServer {
 public:
  // `gate` (optional: null serves every authenticated request) applies impersonation and
  // authorization to each authenticated request before it is routed.
  HttpServer(RestApi& api, store::Store& store, Metrics& metrics,
             const auth::Authenticator& authenticator, const RequestGate* gate,
             HttpServerOptions options);
  ~HttpServer();

  // Records denied requests (401/403) through `log` and commits each change with its audit
  // record; serves the audit trail's read API (audit_api.h). Call before Start; not owned.
  void SetAuditLog(service::AuditLog* log);
  // Serves the web UI's files at `/` (static_files.h) without a credential; API paths are
  // unaffected. Call before Start; not owned.
  void SetStaticFiles(const StaticFiles* files);

  // Binds and starts serving. InvalidArgument for a bad address or unreadable TLS files,
  // Unavailable when the port cannot be bound.
  absl::Status Start();
  // Stops accepting, lets in-flight requests finish, ends open watches, closes connections.
  void Shutdown();
  // The bound port (after Start).
  int port() const;
  // Connections open now (for tests and metrics).
  size_t connection_count() const;
  // Exceptions caught by the transport's last-resort catches (a request failed with 500, an
  // I/O thread carried on), each logged, for metrics.
  uint64_t unexpected_errors() const;

  class Impl;  // defined in the .cc; public so its connection types can name it

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace qm::api
