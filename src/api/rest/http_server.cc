#include "api/rest/http_server.h"

#include <sys/resource.h>

#include <boost/beast/core.hpp>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "api/rest/http_server_internal.h"
#include "api/rest/metrics.h"
#include "api/rest/request_gate.h"
#include "api/rest/status.h"
#include "spdlog/spdlog.h"

// Boost.Beast parses and writes HTTP/1.1; the server around it listens (TLS or plain), accepts
// under a connection cap, routes each request to a handler on a thread pool under an in-flight
// cap (the I/O threads never wait on the database), and shuts down gracefully. Each connection
// is served by a session (http_session.cc).
namespace qm::api {

namespace beast = boost::beast;

namespace http_internal {
namespace {

constexpr auto kShutdownGrace = std::chrono::seconds(10);

std::string StatusBody(int code, const std::string& reason, const std::string& message) {
  nlohmann::json j = {
      {"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", nlohmann::json::object()},
      {"status", "Failure"}, {"message", message}, {"reason", reason},
      {"code", code}};
  return ResponseText(j);
}

}  // namespace

HttpResponse StatusResponse(int code, const std::string& reason, const std::string& message) {
  return HttpResponse{code, "application/json", StatusBody(code, reason, message), {}};
}

}  // namespace http_internal

using namespace http_internal;  // NOLINT(google-build-using-namespace)

absl::Status HttpServer::Impl::Start() {
  auto colon = options_.address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(options_.address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError("address must be host:port: " + options_.address);
  }
  std::string host = options_.address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost") host = "127.0.0.1";
  beast::error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  if (ec) return absl::InvalidArgumentError("cannot parse IP address " + host);

  tls_ = !options_.tls_cert_file.empty();
  if (tls_) {
    ssl_ctx_.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                         ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                         ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
    ssl_ctx_.use_certificate_chain_file(options_.tls_cert_file, ec);
    if (ec)
      return absl::InvalidArgumentError("cannot load TLS certificate " + options_.tls_cert_file);
    ssl_ctx_.use_private_key_file(options_.tls_key_file, ssl::context::pem, ec);
    if (ec) return absl::InvalidArgumentError("cannot load TLS key " + options_.tls_key_file);
    if (!options_.client_ca_file.empty()) {
      ssl_ctx_.load_verify_file(options_.client_ca_file, ec);
      if (ec) return absl::InvalidArgumentError("cannot load client CA " + options_.client_ca_file);
      if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(options_.client_ca_file.c_str())) {
        SSL_CTX_set_client_CA_list(ssl_ctx_.native_handle(), names);
      }
      // Ask for a certificate but let the handshake succeed without one or with an untrusted
      // one: the authenticator answers 401 (as kube-apiserver does), and tokens still work.
      ssl_ctx_.set_verify_mode(ssl::verify_peer);
      ssl_ctx_.set_verify_callback([](bool, ssl::verify_context&) { return true; });
      // Clients that resume TLS sessions (browsers) need a session id context when peers are
      // verified; without one OpenSSL fails every resumed handshake with an internal error.
      static constexpr unsigned char kSessionContext[] = "quartermaster";
      SSL_CTX_set_session_id_context(ssl_ctx_.native_handle(), kSessionContext,
                                     sizeof(kSessionContext) - 1);
    }
  }

  tcp::endpoint endpoint(addr, static_cast<uint16_t>(port));
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(1024, ec);
  if (ec) {
    return absl::UnavailableError("cannot listen on " + options_.address + ": " + ec.message());
  }
  port_ = acceptor_.local_endpoint().port();
  pool_ = std::make_unique<asio::thread_pool>(std::max(1, options_.handler_threads));
  started_ = true;
  Accept();
  for (int i = 0; i < std::max(1, options_.io_threads); ++i) {
    io_threads_.emplace_back([this] {
      while (true) {
        try {
          ioc_.run();
          return;
        } catch (...) {
          // Last-resort catch for this transport: log and keep serving.
          Unexpected("", "an HTTP I/O thread");
        }
      }
    });
  }
  return absl::OkStatus();
}

void HttpServer::Impl::Accept() {
  acceptor_.async_accept(asio::make_strand(ioc_), [this](beast::error_code ec, tcp::socket s) {
    if (stopping_) return;
    if (ec) {
      // Out of descriptors or a transient error: back off instead of spinning.
      if (ec != asio::error::operation_aborted) {
        spdlog::warn("accept: {}", ec.message());
        auto timer = std::make_shared<asio::steady_timer>(ioc_, std::chrono::milliseconds(50));
        timer->async_wait([this, timer](beast::error_code) { Accept(); });
      }
      return;
    }
    size_t open = connections_.fetch_add(1) + 1;
    size_t cap = static_cast<size_t>(std::max(1, options_.max_connections));
    if (open > cap + cap / 10 + 16) {
      // Far past the cap: not even a 503 (that would cost a handshake per attacker connection).
      connections_.fetch_sub(1);
      beast::error_code ignored;
      s.close(ignored);
    } else {
      StartSession(*this, std::move(s), tls_, open > cap);
    }
    Accept();
  });
}

HttpResponse HttpServer::Impl::Route(const HttpRequest& req) {
  HttpResponse r;
  try {
    if (req.method == "GET" && (req.path == "/healthz" || req.path == "/livez")) {
      r = HttpResponse{200, "text/plain", "ok", {}};
    } else if (req.method == "GET" && req.path == "/readyz") {
      absl::Status st = store_.Ping();
      if (st.ok()) {
        r = HttpResponse{200, "text/plain", "ok", {}};
      } else {
        spdlog::warn("request_id={} readyz: database unreachable: {}", req.request_id,
                     std::string(st.message()));
        // Detail only for authenticated callers; never the database's own error text.
        r = HttpResponse{503,
                         "text/plain",
                         req.user ? "[-]database failed: unreachable\nreadyz check failed"
                                  : "readyz check failed",
                         {}};
      }
      return r;
    } else if (req.method == "GET" && req.path == "/metrics") {
      r = HttpResponse{200, "text/plain; version=0.0.4", metrics_.Render(), {}};
    } else if (req.path == kAuditEventsPath) {
      r = HandleAuditQuery(store_, req);
    } else if (audit_ != nullptr && req.user.has_value() && req.method != "GET" &&
               req.method != "HEAD") {
      // A change commits together with its audit record (the same transaction).
      store::AuditRecord record = AuditRecordFor(req, req.method == "POST" ? 201 : 200);
      {
        store::AuditScope scope(&record);
        r = api_.Handle(req);
      }
      // A TokenRequest stores nothing, so no transaction carried its record: queue it instead.
      if (r.code == 201 && record.resource == "serviceaccounts" && record.subresource == "token") {
        audit_->Record(std::move(record));
      }
    } else {
      r = api_.Handle(req);
    }
    if (r.code == 403) AuditDenied(req, 403);
  } catch (...) {
    // Last-resort catch for this transport: one bad request (std::bad_alloc, std::system_error
    // when no thread can be had, anything else) never takes the server down.
    Unexpected(req.request_id, (req.method + " " + req.path).c_str());
    r = HttpResponse{500, "", "", {}};
  }
  if (r.code >= 500) {
    // Internal error text (database messages, exceptions) goes to the log, never to the client.
    if (!r.body.empty() && r.body.find("\"message\":\"\"") == std::string::npos) {
      spdlog::error("request_id={} {} {} answered {}: {}", req.request_id, req.method, req.path,
                    r.code, r.body);
    }
    std::string reason = r.code == 503   ? "ServiceUnavailable"
                         : r.code == 504 ? "Timeout"
                                         : "InternalError";
    r = StatusResponse(r.code, reason,
                       "Internal error occurred: the request failed; the server log has the "
                       "details under request id " +
                           req.request_id);
  }
  return r;
}

void HttpServer::Impl::Unexpected(const std::string& request_id, const char* where) noexcept {
  unexpected_errors_.fetch_add(1);
  try {
    try {
      throw;
    } catch (const std::exception& e) {
      spdlog::error("request_id={} {}: {}", request_id, where, e.what());
    } catch (...) {
      spdlog::error("request_id={} {}: an exception of unknown type", request_id, where);
    }
  } catch (...) {  // the log itself failed (no memory): the count remains
  }
}

void HttpServer::Impl::Observe(const HttpRequest& req, int code,
                               std::chrono::steady_clock::time_point start) {
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto [verb, resource] = RestApi::Describe(req);
  metrics_.ObserveRequest(verb, resource, code, secs);
  spdlog::info(
      "http request_id={} method={} path={} verb={} resource={} user={} remote={} code={} "
      "latency_ms={:.3f}",
      req.request_id, req.method, req.path, verb, resource, req.user ? req.user->name : "",
      req.remote_address, code, secs * 1000);
}

void HttpServer::Impl::Shutdown() {
  if (!started_ || stopping_.exchange(true)) return;
  asio::post(acceptor_.get_executor(), [this] {
    beast::error_code ec;
    acceptor_.close(ec);
  });
  std::vector<std::shared_ptr<SessionBase>> live;
  {
    qm::MutexLock lock(&mu_);
    for (auto& [ptr, weak] : sessions_) {
      if (auto s = weak.lock()) live.push_back(std::move(s));
    }
  }
  for (auto& s : live) s->Stop();
  live.clear();
  {
    qm::MutexLock lock(&mu_);
    const auto deadline = std::chrono::steady_clock::now() + kShutdownGrace;
    while (!sessions_.empty() && cv_.WaitUntil(&mu_, deadline)) {
    }
    if (!sessions_.empty()) {
      spdlog::warn("{} connections still open at shutdown; closing them", sessions_.size());
    }
  }
  pool_->join();
  ioc_.stop();
  for (auto& t : io_threads_) t.join();
}

HttpServer::HttpServer(RestApi& api, store::Store& store, Metrics& metrics,
                       const auth::Authenticator& authenticator, const RequestGate* gate,
                       HttpServerOptions options)
    : impl_(std::make_unique<Impl>(api, store, metrics, authenticator, gate, std::move(options))) {}

HttpServer::~HttpServer() = default;

absl::Status HttpServer::Start() { return impl_->Start(); }

void HttpServer::Shutdown() { impl_->Shutdown(); }

int HttpServer::port() const { return impl_->port(); }

void HttpServer::SetAuditLog(service::AuditLog* log) { impl_->set_audit(log); }

void HttpServer::SetStaticFiles(const StaticFiles* files) { impl_->set_static_files(files); }

size_t HttpServer::connection_count() const { return impl_->connection_count(); }

uint64_t HttpServer::unexpected_errors() const { return impl_->unexpected_errors(); }

}  // namespace qm::api
