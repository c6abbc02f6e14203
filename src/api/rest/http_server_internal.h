#pragma once

// The insides of HttpServer shared by its two files and included by nothing else:
// http_server.cc (listening, accepting, routing, shutdown) and http_session.cc (one connection:
// TLS, reading and answering requests, watch streams).

#include "api/rest/http_server.h"  // first: asio's headers expect what it includes

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "api/rest/audit_api.h"
#include "api/rest/static_files.h"
#include "common/mutex.h"
#include "service/audit_log.h"

namespace qm::api {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

// One connection. Lives as long as an operation on it is pending (shared_from_this in every
// handler); all of its handlers run on its strand.
class SessionBase {
 public:
  virtual ~SessionBase() = default;
  // Asks the session to finish: idle connections close, watches end, a request being handled
  // answers and then closes. Callable from any thread.
  virtual void Stop() = 0;
};

class HttpServer::Impl {
 public:
  Impl(RestApi& api, store::Store& store, Metrics& metrics, const auth::Authenticator& authn,
       const RequestGate* gate, HttpServerOptions options)
      : api_(api),
        store_(store),
        metrics_(metrics),
        authn_(authn),
        gate_(gate),
        options_(std::move(options)),
        ioc_(std::max(1, options_.io_threads)),
        ssl_ctx_(ssl::context::tls_server),
        acceptor_(ioc_) {}

  ~Impl() { Shutdown(); }

  absl::Status Start();
  void Shutdown();
  int port() const { return port_; }
  size_t connection_count() const { return connections_.load(); }
  uint64_t unexpected_errors() const { return unexpected_errors_.load(); }
  // Logs and counts the exception being handled; call from a catch block only. Never throws.
  void Unexpected(const std::string& request_id, const char* where) noexcept;

  // Shared with the sessions.
  const HttpServerOptions& options() const { return options_; }
  ssl::context& ssl_ctx() { return ssl_ctx_; }
  bool stopping() const { return stopping_.load(); }
  const auth::Authenticator& authn() const { return authn_; }
  const RequestGate* gate() const { return gate_; }
  void set_audit(service::AuditLog* log) { audit_ = log; }
  void set_static_files(const StaticFiles* files) { static_files_ = files; }
  // The web UI's file for `req`, or nullopt when the request is for the API.
  std::optional<HttpResponse> ServeStatic(const HttpRequest& req) const {
    return static_files_ == nullptr ? std::nullopt : static_files_->Serve(req);
  }
  // Queues the record of a denied request.
  void AuditDenied(const HttpRequest& req, int code) {
    if (audit_ != nullptr) audit_->Record(AuditRecordFor(req, code));
  }
  RestApi& api() { return api_; }
  asio::thread_pool& pool() { return *pool_; }

  // Reserves a handler slot; false when max_requests_inflight are busy.
  bool AcquireInflight() {
    if (inflight_.fetch_add(1) >= options_.max_requests_inflight) {
      inflight_.fetch_sub(1);
      return false;
    }
    return true;
  }
  void ReleaseInflight() {
    if (inflight_.fetch_sub(1) == 1) {
      qm::MutexLock lock(&mu_);
      cv_.SignalAll();
    }
  }

  // Answers a non-watch request (runs on the handler pool).
  HttpResponse Route(const HttpRequest& req);
  // Logs and counts one finished request.
  void Observe(const HttpRequest& req, int code, std::chrono::steady_clock::time_point start);

  void Register(SessionBase* s, std::weak_ptr<SessionBase> weak) {
    qm::MutexLock lock(&mu_);
    sessions_.emplace(s, std::move(weak));
  }
  void Unregister(SessionBase* s) {
    qm::MutexLock lock(&mu_);
    sessions_.erase(s);
    connections_.fetch_sub(1);
    cv_.SignalAll();
  }

 private:
  void Accept();

  RestApi& api_;
  store::Store& store_;
  Metrics& metrics_;
  const auth::Authenticator& authn_;
  const RequestGate* const gate_;
  service::AuditLog* audit_ = nullptr;
  const StaticFiles* static_files_ = nullptr;
  const HttpServerOptions options_;
  asio::io_context ioc_;
  ssl::context ssl_ctx_;
  bool tls_ = false;
  tcp::acceptor acceptor_;
  std::unique_ptr<asio::thread_pool> pool_;
  std::vector<std::thread> io_threads_;
  std::atomic<bool> started_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<int> inflight_{0};
  std::atomic<size_t> connections_{0};
  std::atomic<uint64_t> unexpected_errors_{0};
  int port_ = 0;
  qm::Mutex mu_;
  qm::CondVar cv_;
  std::unordered_map<SessionBase*, std::weak_ptr<SessionBase>> sessions_ ABSL_GUARDED_BY(mu_);
};

namespace http_internal {

// A Kubernetes Status answer.
HttpResponse StatusResponse(int code, const std::string& reason, const std::string& message);

// Starts serving an accepted connection (TLS when `tls`); `reject` answers its first request
// with 503 (the server is past its connection cap). The session registers itself with `server`.
void StartSession(HttpServer::Impl& server, tcp::socket socket, bool tls, bool reject);

}  // namespace http_internal
}  // namespace qm::api
