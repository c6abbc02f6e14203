// One connection of the HTTP server (http_server.h): TLS with optional client certificates,
// authentication, deadlines per phase of a request, requests handed to the handler pool, and
// chunked watch streams fed from the watch hub's thread.

#include "api/rest/http_server_internal.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/resource.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <cstdio>
#include <deque>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/rest/audit_api.h"
#include "api/rest/metrics.h"
#include "api/rest/request_gate.h"
#include "api/rest/request_target.h"
#include "api/rest/static_files.h"
#include "api/rest/status.h"
#include "auth/pki.h"
#include "common/id_generator.h"
#include "common/mutex.h"
#include "common/utf8.h"
#include "service/audit_log.h"
#include "spdlog/spdlog.h"

namespace qm::api {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using http_internal::StatusResponse;

constexpr size_t kMaxWatchBacklogBytes = 64 * 1024 * 1024;
constexpr auto kWriteTimeout = std::chrono::seconds(30);

std::string Str(beast::string_view v) { return std::string(v.data(), v.size()); }

// Warning texts can carry client-chosen field names: keep them to one printable, quoted line.
std::string SanitizeWarning(const std::string& w) {
  constexpr size_t kMaxWarningBytes = 256;
  std::string out;
  for (char c : w) {
    if (out.size() >= kMaxWarningBytes) {
      out += "...";
      break;
    }
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      out += '?';
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else {
      out += c;
    }
  }
  return "299 - \"" + out + "\"";
}

std::vector<std::string> WarningValues(const std::vector<std::string>& warnings) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& w : warnings) {
    std::string v = SanitizeWarning(w);
    if (seen.insert(v).second) out.push_back(std::move(v));
  }
  return out;
}

bool IsAnonymousPath(const std::string& path) {
  for (const char* p : {"/healthz", "/livez", "/readyz", "/version"}) {
    if (path == p || path == std::string(p) + "/") return true;
  }
  return false;
}

// A watch response: the watch hub's thread queues frames (it must never block on a slow
// client) and the connection's strand writes them. A client that falls too far behind loses its
// watch, as with the apiserver, and re-lists.
class WatchStream final : public WatchSink {
 public:
  using Notify = std::function<void()>;
  WatchStream(std::string request_id, Notify notify)
      : request_id_(std::move(request_id)), notify_(std::move(notify)) {}

  // The connection closes when the watch ends (FlushWatch), and the head says so: a client that
  // took the finished stream's connection for reusable sent its next request into the close
  // (Chromium retried such requests twice, then failed them with ERR_TOO_MANY_RETRIES).
  void Begin(const std::vector<std::string>& warnings) override {
    std::string head =
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
        "Connection: close\r\nCache-Control: no-cache, private\r\nAudit-Id: " +
        request_id_ + "\r\n";
    for (const auto& w : WarningValues(warnings)) head += "Warning: " + w + "\r\n";
    head += "\r\n";
    {
      qm::MutexLock lock(&mu_);
      began_ = true;
    }
    Enqueue(std::move(head), false);
  }

  bool Write(const std::string& chunk) override {
    if (chunk.empty()) return true;
    char size[32];
    int n = std::snprintf(size, sizeof(size), "%zx\r\n", chunk.size());
    std::string frame(size, static_cast<size_t>(n));
    frame += chunk;
    frame += "\r\n";
    return Enqueue(std::move(frame), false);
  }

  void End() override { Enqueue("0\r\n\r\n", true); }

  bool began() {
    qm::MutexLock lock(&mu_);
    return began_;
  }

  // Takes what is queued (for the strand). `ended` says the stream is complete after it,
  // `overflowed` that the client fell behind and the connection must close.
  std::string Take(bool* ended, bool* overflowed) {
    qm::MutexLock lock(&mu_);
    std::string out;
    for (auto& f : queue_) out += f;
    queue_.clear();
    queued_bytes_ = 0;
    notified_ = false;
    *ended = ended_;
    *overflowed = overflowed_;
    return out;
  }

  // The client left: later writes report failure so the hub drops the watcher.
  void Close() {
    qm::MutexLock lock(&mu_);
    closed_ = true;
    queue_.clear();
  }

 private:
  bool Enqueue(std::string frame, bool end) {
    bool notify = false;
    bool overflowed = false;
    {
      qm::MutexLock lock(&mu_);
      if (closed_ || ended_) return false;
      queued_bytes_ += frame.size();
      if (queued_bytes_ > kMaxWatchBacklogBytes) {
        overflowed_ = true;
        closed_ = true;
        queue_.clear();
      } else {
        queue_.push_back(std::move(frame));
        ended_ = end;
      }
      if (!notified_) notify = notified_ = true;
      overflowed = overflowed_;
    }
    if (notify) notify_();
    return !overflowed;
  }

  const std::string request_id_;
  const Notify notify_;
  qm::Mutex mu_;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool began_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool overflowed_ ABSL_GUARDED_BY(mu_) = false;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
};

template <bool kTls>
class Session final : public SessionBase, public std::enable_shared_from_this<Session<kTls>> {
 public:
  using Stream = std::conditional_t<kTls, beast::ssl_stream<beast::tcp_stream>, beast::tcp_stream>;

  Session(HttpServer::Impl& srv, tcp::socket socket, bool reject)
      : srv_(srv), stream_(MakeStream(srv, std::move(socket))), reject_(reject) {
    beast::error_code ec;
    auto ep = beast::get_lowest_layer(stream_).socket().remote_endpoint(ec);
    if (!ec) remote_ = ep.address().to_string() + ":" + std::to_string(ep.port());
    beast::get_lowest_layer(stream_).socket().set_option(tcp::no_delay(true), ec);
  }

  ~Session() override { srv_.Unregister(this); }

  void Run() {
    asio::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
      if constexpr (kTls) {
        self->state_ = State::kHandshake;
        self->Lowest().expires_after(self->srv_.options().header_timeout);
        self->stream_.async_handshake(ssl::stream_base::server,
                                      [self](beast::error_code ec) { self->OnHandshake(ec); });
      } else {
        self->ReadRequest();
      }
    });
  }

  void Stop() override {
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] {
      switch (self->state_) {
        case State::kHandshake:
        case State::kIdle:
        case State::kReading:
          self->Close();
          break;
        case State::kWatching:
          if (self->watch_) self->watch_->End();
          break;
        default:
          break;  // a request being handled answers and then closes
      }
    });
  }

 private:
  enum class State { kHandshake, kIdle, kReading, kHandling, kWatching, kClosed };

  static Stream MakeStream(HttpServer::Impl& srv, tcp::socket socket) {
    if constexpr (kTls) {
      return Stream(std::move(socket), srv.ssl_ctx());
    } else {
      return Stream(std::move(socket));
    }
  }

  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  void OnHandshake(beast::error_code ec) {
    if (ec) return Close();
    if constexpr (kTls) {
      SSL* ssl = stream_.native_handle();
      if (X509* cert = SSL_get1_peer_certificate(ssl)) {
        // A subject that is not valid text is refused like an unverified certificate, as on
        // gRPC.
        if (SSL_get_verify_result(ssl) == X509_V_OK) {
          if (auto subject = auth::SubjectOfCertificate(cert); subject.ok()) {
            peer_ = auth::PeerCertificate{std::move(subject->first), std::move(subject->second)};
          }
        }
        if (!peer_.has_value()) untrusted_cert_ = true;
        X509_free(cert);
      }
    }
    ReadRequest();
  }

  // Waits for the first byte of the next request under the idle timeout, then reads its head
  // under the header deadline.
  void ReadRequest() {
    if (srv_.stopping()) return Close();
    state_ = State::kIdle;
    if (buffer_.size() > 0) return ReadHeader();
    Lowest().expires_after(srv_.options().idle_timeout);
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) return self->Close();
                              self->buffer_.commit(n);
                              self->ReadHeader();
                            });
  }

  void ReadHeader() {
    state_ = State::kReading;
    started_ = std::chrono::steady_clock::now();
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(srv_.options().max_header_bytes));
    parser_->body_limit(srv_.options().max_body_bytes);
    Lowest().expires_after(srv_.options().header_timeout);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    auto& msg = parser_->get();
    header_fields_ = static_cast<size_t>(std::distance(msg.begin(), msg.end()));
    // Only `chunked` alone is a framing this server accepts for a body of unknown length;
    // anything else (gzip, chunked twice, an unknown coding) is a smuggling risk.
    if (auto te = msg.find(http::field::transfer_encoding); te != msg.end()) {
      if (!absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(Str(te->value())), "chunked") ||
          msg.count(http::field::transfer_encoding) > 1) {
        return Fail(400, "unsupported Transfer-Encoding");
      }
    }
    // Beast merges repeated equal Content-Length headers; a proxy in front may not, so any
    // repetition is refused.
    if (msg.count(http::field::content_length) > 1) {
      return Fail(400, "duplicate Content-Length");
    }
    if (parser_->content_length() && *parser_->content_length() > srv_.options().max_body_bytes) {
      return Fail(413, "the request body is too large");
    }
    Lowest().expires_after(srv_.options().body_timeout);
    auto read_body = [self = this->shared_from_this()] {
      http::async_read(self->stream_, self->buffer_, *self->parser_,
                       [self](beast::error_code ec, size_t) { self->OnBody(ec); });
    };
    if (absl::EqualsIgnoreCase(Str(msg[http::field::expect]), "100-continue")) {
      auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
      http::async_write(
          stream_, *cont,
          [self = this->shared_from_this(), cont, read_body](beast::error_code ec, size_t) {
            if (ec) return self->Close();
            read_body();
          });
      return;
    }
    read_body();
  }

  void OnBody(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    auto& msg = parser_->get();
    if (static_cast<size_t>(std::distance(msg.begin(), msg.end())) != header_fields_) {
      return Fail(400, "chunk trailers are not accepted");
    }
    Dispatch(parser_->release());
  }

  void OnReadError(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == beast::error::timeout ||
        ec == asio::error::operation_aborted || ec == asio::error::connection_reset ||
        ec.category() == asio::error::get_ssl_category() || ec == ssl::error::stream_truncated) {
      return Close();
    }
    if (ec == http::error::header_limit) return Fail(431, "request headers too large");
    if (ec == http::error::body_limit) return Fail(413, "the request body is too large");
    Fail(400, "malformed HTTP request: " + ec.message());
  }

  // Answers a framing error with a Status and closes: the rest of the stream cannot be trusted.
  void Fail(int code, const std::string& message) {
    std::string reason = code == 413   ? "RequestEntityTooLarge"
                         : code == 431 ? "RequestHeaderFieldsTooLarge"
                                       : "BadRequest";
    HttpRequest req;
    req.request_id = RandomUuid();
    req.remote_address = remote_;
    srv_.Observe(req, code, started_);
    Write(StatusResponse(code, reason, message), false, req.request_id);
  }

  void Dispatch(http::request<http::string_body> msg) {
    state_ = State::kHandling;
    HttpRequest req;
    const bool keep_alive = msg.keep_alive();
    auth::Credentials creds;
    absl::Status target = FromHttpMessage(std::move(msg), &req, &creds.bearer_token);
    req.request_id = RandomUuid();
    req.remote_address = remote_;
    if (!target.ok()) {
      srv_.Observe(req, 400, started_);
      return Write(StatusResponse(400, "BadRequest", std::string(target.message())), false,
                   req.request_id);
    }
    if (reject_) {
      srv_.Observe(req, 503, started_);
      return Write(StatusResponse(503, "ServiceUnavailable", "too many open connections"), false,
                   req.request_id);
    }
    // The web UI's files are public and held in memory: answered here, without a credential.
    if (auto file = srv_.ServeStatic(req)) {
      srv_.Observe(req, file->code, started_);
      return Write(std::move(*file), keep_alive, req.request_id);
    }

    creds.client_certificate = peer_;
    creds.untrusted_client_certificate = untrusted_cert_;
    auto user = srv_.authn().Authenticate(creds);
    if (!user.ok() || (!user->has_value() && !IsAnonymousPath(req.path))) {
      if (!user.ok()) {
        spdlog::info("request_id={} remote={} authentication failed: {}", req.request_id, remote_,
                     std::string(user.status().message()));
      }
      srv_.Observe(req, 401, started_);
      srv_.AuditDenied(req, 401);
      return Write(StatusResponse(401, "Unauthorized", "Unauthorized"), keep_alive, req.request_id);
    }
    req.user = std::move(*user);
    if (srv_.gate() != nullptr) {
      if (auto denied = srv_.gate()->Admit(&req)) {
        srv_.Observe(req, denied->code, started_);
        srv_.AuditDenied(req, denied->code);
        return Write(std::move(*denied), keep_alive, req.request_id);
      }
    }

    if (RestApi::IsWatch(req)) return StartWatch(std::move(req), keep_alive);
    if (!srv_.AcquireInflight()) {
      srv_.Observe(req, 429, started_);
      HttpResponse r =
          StatusResponse(429, "TooManyRequests", "too many requests, please try again later");
      return Write(std::move(r), keep_alive, req.request_id, /*retry_after=*/true);
    }
    asio::post(srv_.pool(), [self = this->shared_from_this(), req = std::move(req), keep_alive] {
      // Whatever happens here (memory or threads running out, an exception of any type) fails
      // this request only: the handler thread carries on and the in-flight slot is returned.
      HttpResponse r;
      try {
        r = self->srv_.Route(req);
      } catch (...) {
        self->srv_.Unexpected(req.request_id, "handling the request");
        r.code = 500;
        r.content_type = "text/plain";
      }
      self->srv_.ReleaseInflight();
      try {
        self->srv_.Observe(req, r.code, self->started_);
        asio::post(self->stream_.get_executor(),
                   [self, r = std::move(r), keep_alive, id = req.request_id]() mutable {
                     self->Write(std::move(r), keep_alive, id);
                   });
      } catch (...) {
        self->srv_.Unexpected(req.request_id, "answering the request");
        // No answer could be queued: the client sees the connection close.
        asio::post(self->stream_.get_executor(), [self] { self->Close(); });
      }
    });
  }

  void Write(HttpResponse r, bool keep_alive, const std::string& request_id,
             bool retry_after = false) {
    if (state_ == State::kClosed) return;
    state_ = State::kHandling;
    auto res =
        std::make_shared<http::response<http::string_body>>(static_cast<http::status>(r.code), 11);
    res->set(http::field::content_type, r.content_type);
    res->set(http::field::cache_control, "no-cache, private");
    res->set("Audit-Id", request_id);
    if (retry_after) res->set(http::field::retry_after, "1");
    for (const auto& w : WarningValues(r.warnings)) res->insert(http::field::warning, w);
    res->body() = std::move(r.body);
    res->keep_alive(keep_alive && !srv_.stopping());
    res->prepare_payload();
    Lowest().expires_after(kWriteTimeout);
    http::async_write(stream_, *res,
                      [self = this->shared_from_this(), res](beast::error_code ec, size_t) {
                        if (ec || !res->keep_alive()) return self->Close();
                        self->ReadRequest();
                      });
  }

  void StartWatch(HttpRequest req, bool keep_alive) {
    std::weak_ptr<Session> weak = this->shared_from_this();
    auto executor = stream_.get_executor();
    watch_ = std::make_shared<WatchStream>(req.request_id, [weak, executor] {
      asio::post(executor, [weak] {
        if (auto self = weak.lock()) self->FlushWatch();
      });
    });
    auto start = started_;
    asio::post(
        srv_.pool(), [self = this->shared_from_this(), req = std::move(req), keep_alive, start] {
          std::optional<HttpResponse> err;
          try {
            err = self->srv_.api().StartWatch(req, self->watch_);
          } catch (...) {
            self->srv_.Unexpected(req.request_id, "starting a watch");
            err = StatusResponse(
                500, "InternalError",
                "Internal error occurred: see the server log for request " + req.request_id);
          }
          self->srv_.Observe(req, err && !self->watch_->began() ? err->code : 200, start);
          asio::post(self->stream_.get_executor(),
                     [self, err = std::move(err), keep_alive, id = req.request_id]() mutable {
                       if (err && !self->watch_->began()) {
                         self->watch_.reset();
                         return self->Write(std::move(*err), keep_alive, id);
                       }
                       self->state_ = State::kWatching;
                       self->Lowest().expires_never();
                       self->ReadWhileWatching();
                       self->FlushWatch();
                       if (self->srv_.stopping()) self->watch_->End();
                     });
        });
  }

  // A watching client sends nothing; a read that completes means it left (or misbehaves).
  void ReadWhileWatching() {
    stream_.async_read_some(buffer_.prepare(512),
                            [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                              if (self->state_ == State::kClosed) return;
                              if (ec) {
                                if (self->watch_) self->watch_->Close();
                                return self->Close();
                              }
                              self->buffer_.commit(n);
                              self->buffer_.consume(self->buffer_.size());
                              self->ReadWhileWatching();
                            });
  }

  void FlushWatch() {
    if (writing_ || state_ != State::kWatching || !watch_) return;
    bool ended = false, overflowed = false;
    auto batch = std::make_shared<std::string>(watch_->Take(&ended, &overflowed));
    if (overflowed) {
      spdlog::warn("watch client {} fell too far behind; closing its watch", remote_);
      return Close();
    }
    if (batch->empty()) {
      if (ended) Close();
      return;
    }
    writing_ = true;
    asio::async_write(
        stream_, asio::buffer(*batch),
        [self = this->shared_from_this(), batch, ended](beast::error_code ec, size_t) {
          self->writing_ = false;
          if (ec) {
            if (self->watch_) self->watch_->Close();
            return self->Close();
          }
          if (ended) return self->Close();
          self->FlushWatch();
        });
  }

  void Close() {
    if (state_ == State::kClosed) return;
    state_ = State::kClosed;
    if (watch_) watch_->Close();
    beast::error_code ec;
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
    Lowest().close();
  }

  HttpServer::Impl& srv_;
  Stream stream_;
  const bool reject_;
  std::string remote_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  size_t header_fields_ = 0;
  std::optional<auth::PeerCertificate> peer_;
  bool untrusted_cert_ = false;
  State state_ = State::kIdle;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::shared_ptr<WatchStream> watch_;
  bool writing_ = false;
};

}  // namespace

namespace http_internal {

void StartSession(HttpServer::Impl& server, tcp::socket socket, bool tls, bool reject) {
  if (tls) {
    auto t = std::make_shared<Session<true>>(server, std::move(socket), reject);
    server.Register(t.get(), t);
    t->Run();
  } else {
    auto t = std::make_shared<Session<false>>(server, std::move(socket), reject);
    server.Register(t.get(), t);
    t->Run();
  }
}

}  // namespace http_internal
}  // namespace qm::api
