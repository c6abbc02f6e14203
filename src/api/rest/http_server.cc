#include "api/rest/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "api/rest/metrics.h"
#include "spdlog/spdlog.h"

// A small HTTP/1.1 server on POSIX sockets: one thread per connection, keep-alive, Content-Length
// and chunked request bodies, chunked streaming for watches. (Pistache, tried first, rejects
// kubectl's `Content-Type: application/json-patch+json` with 415 in its eager header parser.)
namespace qm::api {
namespace {

constexpr size_t kMaxHeaderBytes = 64 * 1024;
constexpr size_t kMaxBodyBytes = 16 * 1024 * 1024;
constexpr size_t kMaxChunkLineBytes = 1024;
constexpr auto kIdleTimeout = std::chrono::minutes(5);     // between requests on a connection
constexpr auto kRequestTimeout = std::chrono::minutes(1);  // to receive one request's body
constexpr int kMaxConnections = 4096;
constexpr size_t kMaxWatchBacklogBytes = 64 * 1024 * 1024;
constexpr int kPollSliceMs = 200;

const char* Reason(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 413:
      return "Payload Too Large";
    case 415:
      return "Unsupported Media Type";
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "Unknown";
  }
}

std::string PercentDecode(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else if (s[i] == '+') {
      out += ' ';
    } else {
      out += s[i];
    }
  }
  return out;
}

bool SendAll(int fd, const char* data, size_t len) {
  while (len > 0) {
    ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

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
  return out;
}

std::string WarningHeaders(const std::vector<std::string>& warnings) {
  std::string out;
  std::set<std::string> seen;
  for (const auto& w : warnings) {
    std::string text = SanitizeWarning(w);
    if (seen.insert(text).second) out += "Warning: 299 - \"" + text + "\"\r\n";
  }
  return out;
}

// Reads one request from a connection, buffering what arrives after it.
class RequestReader {
 public:
  RequestReader(int fd, const std::atomic<bool>& stopping) : fd_(fd), stopping_(stopping) {}

  enum class Result { kOk, kClosed, kBad, kTooLarge };

  // Blocks until a whole request arrived, the peer closed, the idle timeout passed or the
  // server is stopping while no request is in progress.
  Result Read(HttpRequest* req, bool* keep_alive) {
    size_t header_end;
    deadline_ = std::chrono::steady_clock::now() + kIdleTimeout;
    while ((header_end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (buf_.size() > kMaxHeaderBytes) return Result::kTooLarge;
      if (buf_.empty() && stopping_.load()) return Result::kClosed;
      if (!Fill()) return Result::kClosed;
    }
    // A request that started must arrive at a reasonable pace.
    deadline_ = std::chrono::steady_clock::now() + kRequestTimeout;
    std::string head = buf_.substr(0, header_end);
    buf_.erase(0, header_end + 4);
    size_t line_end = head.find("\r\n");
    std::string request_line = head.substr(0, line_end);
    auto sp1 = request_line.find(' ');
    auto sp2 = request_line.rfind(' ');
    if (sp1 == std::string::npos || sp2 == sp1) return Result::kBad;
    req->method = request_line.substr(0, sp1);
    std::string target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
    std::string version = request_line.substr(sp2 + 1);
    auto q = target.find('?');
    req->path = PercentDecode(target.substr(0, q));
    if (q != std::string::npos) {
      std::string query = target.substr(q + 1);
      size_t start = 0;
      while (start <= query.size()) {
        size_t amp = query.find('&', start);
        std::string pair =
            query.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
        if (!pair.empty()) {
          auto eq = pair.find('=');
          req->query[PercentDecode(pair.substr(0, eq))] =
              eq == std::string::npos ? "" : PercentDecode(pair.substr(eq + 1));
        }
        if (amp == std::string::npos) break;
        start = amp + 1;
      }
    }
    size_t content_length = 0;
    bool chunked = false;
    *keep_alive = version == "HTTP/1.1";
    size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
    while (pos < head.size()) {
      size_t end = head.find("\r\n", pos);
      if (end == std::string::npos) end = head.size();
      std::string line = head.substr(pos, end - pos);
      pos = end + 2;
      auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = absl::AsciiStrToLower(line.substr(0, colon));
      std::string value(absl::StripAsciiWhitespace(line.substr(colon + 1)));
      if (name == "content-length") {
        if (!absl::SimpleAtoi(value, &content_length)) return Result::kBad;
      } else if (name == "transfer-encoding") {
        chunked = absl::AsciiStrToLower(value).find("chunked") != std::string::npos;
      } else if (name == "content-type") {
        req->content_type = value;
      } else if (name == "accept") {
        req->accept = value;
      } else if (name == "connection") {
        std::string v = absl::AsciiStrToLower(value);
        if (v == "close") *keep_alive = false;
        if (v == "keep-alive") *keep_alive = true;
      }
    }
    if (chunked) return ReadChunked(&req->body);
    if (content_length > kMaxBodyBytes) return Result::kTooLarge;
    while (buf_.size() < content_length) {
      if (!Fill()) return Result::kClosed;
    }
    req->body = buf_.substr(0, content_length);
    buf_.erase(0, content_length);
    return Result::kOk;
  }

 private:
  Result ReadChunked(std::string* body) {
    while (true) {
      size_t eol;
      while ((eol = buf_.find("\r\n")) == std::string::npos) {
        if (buf_.size() > kMaxChunkLineBytes) return Result::kBad;
        if (!Fill()) return Result::kClosed;
      }
      size_t size = std::strtoul(buf_.substr(0, eol).c_str(), nullptr, 16);
      buf_.erase(0, eol + 2);
      if (body->size() + size > kMaxBodyBytes) return Result::kTooLarge;
      while (buf_.size() < size + 2) {
        if (!Fill()) return Result::kClosed;
      }
      body->append(buf_, 0, size);
      buf_.erase(0, size + 2);
      if (size == 0) return Result::kOk;
    }
  }

  // Reads more bytes; false on EOF, error, the deadline, or a stop request while idle.
  bool Fill() {
    while (true) {
      if (std::chrono::steady_clock::now() > deadline_) return false;
      pollfd p{fd_, POLLIN, 0};
      int r = poll(&p, 1, kPollSliceMs);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return false;
      if (r == 0) {
        if (buf_.empty() && stopping_.load()) return false;
        continue;
      }
      char tmp[16384];
      ssize_t n = recv(fd_, tmp, sizeof(tmp), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      buf_.append(tmp, static_cast<size_t>(n));
      return true;
    }
  }

  int fd_;
  const std::atomic<bool>& stopping_;
  std::string buf_;
  std::chrono::steady_clock::time_point deadline_;
};

// A watch response streamed with chunked encoding. The watch hub's thread only queues frames
// (it must never block on a slow client); the connection's own thread sends them in WaitDone.
// A client that falls too far behind loses its watch, as with the apiserver, and re-lists.
class SocketSink final : public WatchSink {
 public:
  explicit SocketSink(int fd) : fd_(fd) {}

  void Begin(const std::vector<std::string>& warnings) override {
    Enqueue(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: "
        "chunked\r\nCache-Control: no-cache, private\r\n" +
        WarningHeaders(warnings) + "\r\n");
    std::lock_guard<std::mutex> lock(mu_);
    began_ = true;
  }

  bool Write(const std::string& chunk) override {
    if (chunk.empty()) return true;
    char size[32];
    int n = std::snprintf(size, sizeof(size), "%zx\r\n", chunk.size());
    std::string frame(size, static_cast<size_t>(n));
    frame += chunk;
    frame += "\r\n";
    return Enqueue(std::move(frame));
  }

  void End() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (ending_ || closed_) return;
    queue_.push_back("0\r\n\r\n");
    ending_ = true;
    cv_.notify_all();
  }

  bool began() {
    std::lock_guard<std::mutex> lock(mu_);
    return began_;
  }

  // Sends queued frames until the stream ends, the client hangs up, or the server stops.
  void WaitDone(const std::atomic<bool>& stopping) {
    while (true) {
      std::deque<std::string> batch;
      bool ending;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, std::chrono::milliseconds(kPollSliceMs),
                     [&] { return !queue_.empty() || ending_ || closed_; });
        if (closed_) return;
        batch.swap(queue_);
        queued_bytes_ = 0;
        ending = ending_;
      }
      for (const auto& frame : batch) {
        if (!SendAll(fd_, frame.data(), frame.size())) {
          Close();
          return;
        }
      }
      if (ending) {
        Close();
        return;
      }
      if (stopping.load()) {
        End();
        continue;
      }
      pollfd p{fd_, POLLIN | POLLRDHUP, 0};
      if (poll(&p, 1, 0) > 0) {
        char tmp[512];
        ssize_t n = recv(fd_, tmp, sizeof(tmp), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) ||
            (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
          Close();
          return;
        }
      }
    }
  }

 private:
  bool Enqueue(std::string frame) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || ending_) return false;
    queued_bytes_ += frame.size();
    if (queued_bytes_ > kMaxWatchBacklogBytes) {
      closed_ = true;  // the client cannot keep up
      cv_.notify_all();
      return false;
    }
    queue_.push_back(std::move(frame));
    cv_.notify_all();
    return true;
  }

  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    queue_.clear();
  }

  const int fd_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  size_t queued_bytes_ = 0;
  bool began_ = false;
  bool ending_ = false;
  bool closed_ = false;
};

}  // namespace

class HttpServer::Impl {
 public:
  Impl(RestApi& api, store::Store& store, Metrics& metrics, HttpServerOptions options)
      : api_(api), store_(store), metrics_(metrics), options_(std::move(options)) {}

  ~Impl() { Shutdown(); }

  absl::Status Start() {
    auto colon = options_.address.rfind(':');
    int port = 0;
    if (colon == std::string::npos ||
        !absl::SimpleAtoi(options_.address.substr(colon + 1), &port)) {
      return absl::InvalidArgumentError("address must be host:port: " + options_.address);
    }
    std::string host = options_.address.substr(0, colon);
    if (host == "localhost") host = "127.0.0.1";
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
      return absl::InvalidArgumentError("cannot parse IPv4 address " + host);
    }
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        listen(listen_fd_, 512) != 0) {
      std::string err = std::strerror(errno);
      close(listen_fd_);
      listen_fd_ = -1;
      return absl::UnavailableError("cannot listen on " + options_.address + ": " + err);
    }
    socklen_t len = sizeof(addr);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    accept_thread_ = std::thread([this] { AcceptLoop(); });
    return absl::OkStatus();
  }

  void Shutdown() {
    if (stopping_.exchange(true)) return;
    if (accept_thread_.joinable()) accept_thread_.join();
    if (listen_fd_ >= 0) close(listen_fd_);
    // Requests in progress finish and answer; idle connections and watches notice `stopping_`
    // within one poll slice. Stop reading from everyone so no new request starts.
    std::unique_lock<std::mutex> lock(mu_);
    for (int fd : open_fds_) shutdown(fd, SHUT_RD);
    while (!cv_.wait_for(lock, std::chrono::seconds(5), [&] { return open_fds_.empty(); })) {
      spdlog::info("waiting for {} connections to finish", open_fds_.size());
    }
  }

  int port() const { return port_; }

 private:
  void AcceptLoop() {
    while (!stopping_.load()) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, kPollSliceMs) <= 0) continue;
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        // Out of descriptors (EMFILE/ENFILE) or a transient error: back off instead of spinning.
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      timeval tv{10, 0};  // a client that stops reading cannot block a writer forever
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (open_fds_.size() >= static_cast<size_t>(kMaxConnections)) {
          WriteResponse(fd, HttpResponse{503, "text/plain", "too many connections", {}}, false);
          close(fd);
          continue;
        }
        open_fds_.insert(fd);
      }
      std::thread([this, fd] {
        Serve(fd);
        std::lock_guard<std::mutex> lock(mu_);
        open_fds_.erase(fd);
        close(fd);
        cv_.notify_all();
      }).detach();
    }
  }

  void Serve(int fd) {
    RequestReader reader(fd, stopping_);
    while (true) {
      HttpRequest req;
      bool keep_alive = false;
      auto result = reader.Read(&req, &keep_alive);
      if (result == RequestReader::Result::kClosed) return;
      if (result != RequestReader::Result::kOk) {
        int code = result == RequestReader::Result::kTooLarge ? 413 : 400;
        WriteResponse(fd, HttpResponse{code, "text/plain", Reason(code), {}}, false);
        return;
      }
      auto start = std::chrono::steady_clock::now();
      int code = 500;
      bool streamed = false;
      try {
        code = Dispatch(fd, req, keep_alive, &streamed);
      } catch (const std::exception& e) {
        // Last-resort catch for this transport: one bad request never takes the server down.
        spdlog::error("request {} {} failed: {}", req.method, req.path, e.what());
        WriteResponse(fd,
                      HttpResponse{500,
                                   "application/json",
                                   R"({"kind":"Status","apiVersion":"v1","metadata":{},)"
                                   R"("status":"Failure","reason":"InternalError","code":500,)"
                                   R"("message":"internal error"})",
                                   {}},
                      false);
        return;
      }
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      auto [verb, resource] = RestApi::Describe(req);
      metrics_.ObserveRequest(verb, resource, code, secs);
      spdlog::info("http method={} path={} verb={} resource={} code={} latency_ms={:.3f}",
                   req.method, req.path, verb, resource, code, secs * 1000);
      if (streamed || !keep_alive || stopping_.load()) return;
    }
  }

  int Dispatch(int fd, const HttpRequest& req, bool keep_alive, bool* streamed) {
    HttpResponse r;
    if (req.method == "GET" && (req.path == "/healthz" || req.path == "/livez")) {
      r = HttpResponse{200, "text/plain", "ok", {}};
    } else if (req.method == "GET" && req.path == "/readyz") {
      absl::Status st = store_.Ping();
      r = st.ok() ? HttpResponse{200, "text/plain", "ok", {}}
                  : HttpResponse{503, "text/plain", "database unreachable: " + st.ToString(), {}};
    } else if (req.method == "GET" && req.path == "/metrics") {
      r = HttpResponse{200, "text/plain; version=0.0.4", metrics_.Render(), {}};
    } else if (RestApi::IsWatch(req)) {
      auto sink = std::make_shared<SocketSink>(fd);
      auto err = api_.StartWatch(req, sink);
      if (err) {
        if (sink->began()) {
          *streamed = true;
          return err->code;
        }
        r = *err;
      } else {
        *streamed = true;
        sink->WaitDone(stopping_);
        return 200;
      }
    } else {
      r = api_.Handle(req);
    }
    WriteResponse(fd, r, keep_alive);
    return r.code;
  }

  static void WriteResponse(int fd, const HttpResponse& r, bool keep_alive) {
    std::string head = "HTTP/1.1 " + std::to_string(r.code) + " " + Reason(r.code) +
                       "\r\nContent-Type: " + r.content_type +
                       "\r\nContent-Length: " + std::to_string(r.body.size()) +
                       "\r\nCache-Control: no-cache, private\r\n" + WarningHeaders(r.warnings) +
                       (keep_alive ? "" : "Connection: close\r\n") + "\r\n";
    head += r.body;
    SendAll(fd, head.data(), head.size());
  }

  RestApi& api_;
  store::Store& store_;
  Metrics& metrics_;
  const HttpServerOptions options_;
  std::atomic<bool> stopping_{false};
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread accept_thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<int> open_fds_;  // guarded by mu_
};

HttpServer::HttpServer(RestApi& api, store::Store& store, Metrics& metrics,
                       HttpServerOptions options)
    : impl_(std::make_unique<Impl>(api, store, metrics, std::move(options))) {}

HttpServer::~HttpServer() = default;

absl::Status HttpServer::Start() { return impl_->Start(); }

void HttpServer::Shutdown() { impl_->Shutdown(); }

int HttpServer::port() const { return impl_->port(); }

}  // namespace qm::api
