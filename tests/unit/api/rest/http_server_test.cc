// The HTTP front door over real loopback sockets: authentication, framing errors (request
// smuggling vectors), limits and their answers, and that internal errors never reach clients.
#include "api/rest/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <system_error>
#include <thread>

#include "api/rest/metrics.h"
#include "api/rest/static_files.h"
#include "common/id_generator.h"
#include "store/memory_store.h"

namespace qm::api {
namespace {

using nlohmann::json;

// The in-memory store, except that Ping can be held (to keep handlers busy), a Get of the
// object named "boom" fails with an internal error whose text must stay in the server, and Gets
// of "oom", "nothreads" and "weird" throw (std::bad_alloc, std::system_error, an int).
class GatedStore final : public store::Store {
 public:
  absl::StatusOr<model::Object> Create(const model::Object& obj) override {
    return inner.Create(obj);
  }
  absl::StatusOr<model::Object> Update(const model::Object& obj, int64_t rv) override {
    return inner.Update(obj, rv);
  }
  absl::StatusOr<model::Object> Delete(const model::ResourceKey& key, int64_t rv) override {
    return inner.Delete(key, rv);
  }
  absl::StatusOr<model::Object> Get(const model::ResourceKey& key) override {
    if (key.name == "boom") {
      return absl::InternalError("pq: relation secret_table_xyz does not exist at 10.0.0.7");
    }
    if (key.name == "oom") throw std::bad_alloc();
    if (key.name == "nothreads") {
      throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                              "thread");
    }
    if (key.name == "weird") throw 42;
    return inner.Get(key);
  }
  absl::StatusOr<store::ListResult> List(const store::ListOptions& o) override {
    return inner.List(o);
  }
  absl::StatusOr<store::ListResult> ListAll() override { return inner.ListAll(); }
  absl::StatusOr<int64_t> CurrentRevision() override { return inner.CurrentRevision(); }
  int64_t LastCommittedRevision() override { return inner.LastCommittedRevision(); }
  absl::StatusOr<std::vector<model::WatchEvent>> ChangesSince(int64_t rv, int64_t limit) override {
    return inner.ChangesSince(rv, limit);
  }
  void WaitForChanges(int64_t rv, std::chrono::milliseconds t) override {
    inner.WaitForChanges(rv, t);
  }
  absl::Status Compact(int64_t rv) override { return inner.Compact(rv); }
  absl::StatusOr<std::vector<model::Object>> Commit(const store::Transaction& txn) override {
    return inner.Commit(txn);
  }
  absl::StatusOr<std::vector<store::DeviceClaim>> ListDeviceClaims() override {
    return inner.ListDeviceClaims();
  }
  absl::Status Ping() override {
    std::unique_lock<std::mutex> lock(mu);
    ++pings_waiting;
    cv.notify_all();
    cv.wait(lock, [&] { return !hold; });
    --pings_waiting;
    return absl::OkStatus();
  }
  void Hold() {
    std::lock_guard<std::mutex> lock(mu);
    hold = true;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu);
    hold = false;
    cv.notify_all();
  }
  void WaitForPings(int n) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return pings_waiting >= n; });
  }

  store::MemoryStore inner;
  std::mutex mu;
  std::condition_variable cv;
  bool hold = false;
  int pings_waiting = 0;
};

class FixedClock : public Clock {
 public:
  std::chrono::system_clock::time_point Now() const override {
    return std::chrono::system_clock::time_point(std::chrono::seconds(1800000000));
  }
};

constexpr char kToken[] = "test-token-0123456789";

// A raw loopback client: sends bytes exactly as given and reads what comes back.
class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~RawClient() { close(fd_); }
  bool connected() const { return connected_; }

  void Send(const std::string& data) {
    ASSERT_EQ(send(fd_, data.data(), data.size(), MSG_NOSIGNAL), static_cast<ssize_t>(data.size()));
  }

  // Reads until the peer closes or `wait` passes without new bytes; `closed` says which.
  std::string ReadAll(std::chrono::milliseconds wait, bool* closed = nullptr) {
    std::string out;
    if (closed) *closed = false;
    while (true) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(wait.count())) <= 0) return out;
      char buf[8192];
      ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        if (closed) *closed = true;
        return out;
      }
      out.append(buf, static_cast<size_t>(n));
    }
  }

  // Reads one response with a Content-Length body.
  std::string ReadResponse() {
    std::string out;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      auto end = out.find("\r\n\r\n");
      if (end != std::string::npos) {
        auto cl = out.find("Content-Length: ");
        size_t len = cl == std::string::npos ? 0 : std::stoul(out.substr(cl + 16));
        if (out.size() >= end + 4 + len) return out;
      }
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buf[8192];
      ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return out;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }

 private:
  int fd_;
  bool connected_ = false;
};

int Code(const std::string& response) {
  return response.size() > 12 ? std::atoi(response.c_str() + 9) : 0;
}

std::string Body(const std::string& response) {
  auto end = response.find("\r\n\r\n");
  return end == std::string::npos ? "" : response.substr(end + 4);
}

std::string Get(const std::string& path, bool auth = true) {
  return "GET " + path + " HTTP/1.1\r\nHost: t\r\n" +
         (auth ? std::string("Authorization: Bearer ") + kToken + "\r\n" : "") + "\r\n";
}

class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(HttpServerOptions options, const StaticFiles* files = nullptr) {
    hub_ = std::make_unique<service::WatchHub>(store_, service::WatchHubOptions{});
    hub_->Start();
    objects_ = std::make_unique<service::ObjectService>(store_, clock_, ids_, hub_.get());
    api_ = std::make_unique<RestApi>(*objects_, *hub_, clock_);
    ASSERT_TRUE(api_->EnsureDefaultNamespace().ok());
    std::map<std::string, auth::UserInfo> tokens;
    tokens[kToken] = auth::WithAuthenticatedGroup({"tester", "1", {auth::kGroupMasters}});
    authn_ = std::make_unique<auth::UnionAuthenticator>(std::move(tokens),
                                                        std::vector<auth::TokenVerifier>{});
    options.address = "127.0.0.1:0";
    server_ = std::make_unique<HttpServer>(*api_, store_, metrics_, *authn_, nullptr, options);
    if (files != nullptr) server_->SetStaticFiles(files);
    ASSERT_TRUE(server_->Start().ok());
  }

  void TearDown() override {
    store_.Release();
    if (server_) server_->Shutdown();
    if (hub_) hub_->Stop();
  }

  int port() const { return server_->port(); }

  GatedStore store_;
  FixedClock clock_;
  RandomIdGenerator ids_;
  Metrics metrics_{[] { return 0.0; }, [] { return 0.0; }, [] { return 0.0; }};
  std::unique_ptr<service::WatchHub> hub_;
  std::unique_ptr<service::ObjectService> objects_;
  std::unique_ptr<RestApi> api_;
  std::unique_ptr<auth::UnionAuthenticator> authn_;
  std::unique_ptr<const StaticFiles> server_files_;  // outlives server_
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, AnonymousReachesOnlyHealthAndVersion) {
  StartServer({});
  for (const char* path : {"/healthz", "/livez", "/readyz", "/version"}) {
    RawClient c(port());
    c.Send(Get(path, false));
    EXPECT_EQ(Code(c.ReadResponse()), 200) << path;
  }
  for (const char* path : {"/api", "/apis/resource.k8s.io/v1/deviceclasses", "/metrics"}) {
    RawClient c(port());
    c.Send(Get(path, false));
    std::string r = c.ReadResponse();
    EXPECT_EQ(Code(r), 401) << path;
    json status = json::parse(Body(r));
    EXPECT_EQ(status["kind"], "Status");
    EXPECT_EQ(status["reason"], "Unauthorized");
    EXPECT_EQ(status["code"], 401);
  }
}

TEST_F(HttpServerTest, WebUiFilesNeedNoCredentialAndApiPathsStillDo) {
  const std::string root = ::testing::TempDir() + "/qm_http_web_ui";
  std::filesystem::create_directories(root + "/assets");
  std::ofstream(root + "/index.html") << "<!doctype html><title>ui</title>";
  std::ofstream(root + "/assets/app.js") << "console.log(1)";
  auto files = StaticFiles::Load(root);
  ASSERT_TRUE(files.ok()) << files.status();
  server_files_ = std::move(*files);
  HttpServerOptions options;
  options.address = "127.0.0.1:0";
  StartServer(options, server_files_.get());
  for (const char* path : {"/", "/inventory/gpu-node-a", "/assets/app.js"}) {
    RawClient c(port());
    c.Send(Get(path, false));
    std::string r = c.ReadResponse();
    EXPECT_EQ(Code(r), 200) << path;
    EXPECT_NE(r.find(std::string(path) == "/assets/app.js" ? "text/javascript" : "text/html"),
              std::string::npos)
        << r;
  }
  for (const char* path : {"/api", "/apis/resource.k8s.io/v1/deviceclasses", "/metrics"}) {
    RawClient c(port());
    c.Send(Get(path, false));
    EXPECT_EQ(Code(c.ReadResponse()), 401) << path;
  }
  RawClient api(port());
  api.Send(Get("/apis/resource.k8s.io/v1/deviceclasses"));
  EXPECT_EQ(Code(api.ReadResponse()), 200);
}

TEST_F(HttpServerTest, BadTokensAreUnauthorizedAndGoodOnesPass) {
  StartServer({});
  for (const std::string& header :
       {std::string("Authorization: Bearer wrong\r\n"), std::string("Authorization: Bearer \r\n"),
        std::string("Authorization: Bearer ") + std::string(5000, 'x') + "\r\n"}) {
    RawClient c(port());
    c.Send("GET /api HTTP/1.1\r\nHost: t\r\n" + header + "\r\n");
    EXPECT_EQ(Code(c.ReadResponse()), 401);
  }
  // A bad token is refused even on an anonymous path: credentials that are presented must hold.
  RawClient bad(port());
  bad.Send("GET /healthz HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer nope\r\n\r\n");
  EXPECT_EQ(Code(bad.ReadResponse()), 401);
  RawClient good(port());
  good.Send(Get("/apis/resource.k8s.io/v1/deviceclasses"));
  std::string r = good.ReadResponse();
  EXPECT_EQ(Code(r), 200);
  EXPECT_NE(r.find("Audit-Id: "), std::string::npos);
}

TEST_F(HttpServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  StartServer({});
  RawClient c(port());
  for (int i = 0; i < 3; ++i) {
    c.Send(Get("/version"));
    EXPECT_EQ(Code(c.ReadResponse()), 200);
  }
}

// Request smuggling vectors: each is a 400 and the connection closes, so nothing after the
// ambiguous request can be read as a second request.
TEST_F(HttpServerTest, AmbiguousFramingIsRejectedAndClosesTheConnection) {
  StartServer({});
  const std::string auth = std::string("Authorization: Bearer ") + kToken + "\r\n";
  const std::string smuggled = Get("/api");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"Content-Length and Transfer-Encoding",
       "POST /api HTTP/1.1\r\nHost: t\r\n" + auth +
           "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
      {"Transfer-Encoding and Content-Length",
       "POST /api HTTP/1.1\r\nHost: t\r\n" + auth +
           "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"},
      {"duplicate Content-Length", "POST /api HTTP/1.1\r\nHost: t\r\n" + auth +
                                       "Content-Length: 2\r\nContent-Length: 5\r\n\r\n{}"},
      {"duplicate equal Content-Length", "POST /api HTTP/1.1\r\nHost: t\r\n" + auth +
                                             "Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}"},
      {"malformed chunk size", "POST /api HTTP/1.1\r\nHost: t\r\n" + auth +
                                   "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"},
      {"chunk size overflow",
       "POST /api HTTP/1.1\r\nHost: t\r\n" + auth +
           "Transfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n{}\r\n0\r\n\r\n"},
      {"chunk trailer",
       "POST /api HTTP/1.1\r\nHost: t\r\n" + auth +
           "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX-Trailer: 1\r\n\r\n"},
      {"unknown transfer coding", "POST /api HTTP/1.1\r\nHost: t\r\n" + auth +
                                      "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"},
      {"negative Content-Length",
       "POST /api HTTP/1.1\r\nHost: t\r\n" + auth + "Content-Length: -1\r\n\r\n"},
      {"space before colon",
       "POST /api HTTP/1.1\r\nHost: t\r\n" + auth + "Content-Length : 2\r\n\r\n{}"},
  };
  for (const auto& [name, request] : cases) {
    RawClient c(port());
    c.Send(request + smuggled);
    bool closed = false;
    std::string out = c.ReadAll(std::chrono::seconds(5), &closed);
    EXPECT_EQ(Code(out), 400) << name << ": " << out;
    EXPECT_TRUE(closed) << name;
    // Exactly one response: the smuggled request was never served.
    EXPECT_EQ(out.find("HTTP/1.1", 1), std::string::npos) << name << ": " << out;
  }
}

TEST_F(HttpServerTest, OversizedBodiesAndHeadersGetClearAnswers) {
  HttpServerOptions o;
  o.max_body_bytes = 1024;
  o.max_header_bytes = 4096;
  StartServer(o);
  {
    RawClient c(port());
    c.Send("POST /api HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n");
    bool closed = false;
    std::string out = c.ReadAll(std::chrono::seconds(5), &closed);
    EXPECT_EQ(Code(out), 413);
    EXPECT_TRUE(closed);
  }
  {
    RawClient c(port());
    c.Send("POST /api HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n" +
           std::string(2048, 'a') + "\r\n0\r\n\r\n");
    EXPECT_EQ(Code(c.ReadAll(std::chrono::seconds(5))), 413);
  }
  {
    RawClient c(port());
    c.Send("GET /api HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(8000, 'a') + "\r\n\r\n");
    EXPECT_EQ(Code(c.ReadAll(std::chrono::seconds(5))), 431);
  }
}

TEST_F(HttpServerTest, SlowHeadersAreCutAtTheDeadline) {
  HttpServerOptions o;
  o.header_timeout = std::chrono::milliseconds(300);
  StartServer(o);
  RawClient slow(port());
  slow.Send("GET /api HTTP/1.1\r\nHost: t\r\n");  // never finishes its headers
  auto start = std::chrono::steady_clock::now();
  bool closed = false;
  slow.ReadAll(std::chrono::seconds(5), &closed);
  EXPECT_TRUE(closed);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
}

TEST_F(HttpServerTest, IdleConnectionsCloseAfterTheIdleTimeout) {
  HttpServerOptions o;
  o.idle_timeout = std::chrono::milliseconds(300);
  StartServer(o);
  RawClient c(port());
  c.Send(Get("/version"));
  EXPECT_EQ(Code(c.ReadResponse()), 200);
  bool closed = false;
  c.ReadAll(std::chrono::seconds(5), &closed);
  EXPECT_TRUE(closed);
}

TEST_F(HttpServerTest, RequestsPastTheInflightCapGet429WithRetryAfter) {
  HttpServerOptions o;
  o.max_requests_inflight = 2;
  o.handler_threads = 4;
  StartServer(o);
  store_.Hold();
  RawClient a(port()), b(port()), c(port());
  a.Send(Get("/readyz"));
  b.Send(Get("/readyz"));
  store_.WaitForPings(2);
  c.Send(Get("/version"));
  std::string r = c.ReadResponse();
  EXPECT_EQ(Code(r), 429);
  EXPECT_NE(r.find("Retry-After: 1"), std::string::npos);
  EXPECT_EQ(json::parse(Body(r))["reason"], "TooManyRequests");
  store_.Release();
  EXPECT_EQ(Code(a.ReadResponse()), 200);
  EXPECT_EQ(Code(b.ReadResponse()), 200);
  c.Send(Get("/version"));
  EXPECT_EQ(Code(c.ReadResponse()), 200);
}

TEST_F(HttpServerTest, ConnectionsPastTheCapGet503) {
  HttpServerOptions o;
  o.max_connections = 2;
  StartServer(o);
  RawClient a(port()), b(port());
  a.Send(Get("/version"));
  EXPECT_EQ(Code(a.ReadResponse()), 200);
  b.Send(Get("/version"));
  EXPECT_EQ(Code(b.ReadResponse()), 200);
  RawClient c(port());
  c.Send(Get("/version"));
  EXPECT_EQ(Code(c.ReadAll(std::chrono::seconds(5))), 503);
}

TEST_F(HttpServerTest, InternalErrorsNameARequestIdAndNothingElse) {
  StartServer({});
  RawClient c(port());
  c.Send(Get("/apis/resource.k8s.io/v1/deviceclasses/boom"));
  std::string r = c.ReadResponse();
  EXPECT_EQ(Code(r), 500);
  EXPECT_EQ(r.find("secret_table_xyz"), std::string::npos) << r;
  EXPECT_EQ(r.find("10.0.0.7"), std::string::npos) << r;
  auto id = r.find("Audit-Id: ");
  ASSERT_NE(id, std::string::npos);
  std::string request_id = r.substr(id + 10, 36);
  EXPECT_NE(Body(r).find(request_id), std::string::npos) << r;
}

// Memory or threads running out (or any exception) while handling one request fails that
// request with a 500; the handler thread and the in-flight slot carry on.
TEST_F(HttpServerTest, AnExceptionInAHandlerFailsOnlyThatRequest) {
  HttpServerOptions o;
  o.max_requests_inflight = 1;
  o.handler_threads = 1;
  StartServer(o);
  RawClient c(port());
  for (const std::string name : {"oom", "nothreads", "weird"}) {
    c.Send(Get("/apis/resource.k8s.io/v1/deviceclasses/" + name));
    std::string r = c.ReadResponse();
    EXPECT_EQ(Code(r), 500) << name;
    EXPECT_NE(Body(r).find("request id"), std::string::npos) << r;
  }
  c.Send(Get("/version"));
  EXPECT_EQ(Code(c.ReadResponse()), 200);
  EXPECT_EQ(server_->unexpected_errors(), 3u);
}

TEST_F(HttpServerTest, WatchStreamsEventsWithChunkedEncoding) {
  StartServer({});
  RawClient w(port());
  w.Send(Get("/apis/resource.k8s.io/v1/deviceclasses?watch=true"));
  std::string head = w.ReadAll(std::chrono::milliseconds(500));
  EXPECT_EQ(Code(head), 200);
  EXPECT_NE(head.find("Transfer-Encoding: chunked"), std::string::npos);
  // The server closes the connection when the watch ends; a client must not take it for reuse.
  EXPECT_NE(head.find("Connection: close\r\n"), std::string::npos) << head;
  RawClient c(port());
  std::string body =
      R"({"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"gpu"}})";
  c.Send(
      "POST /apis/resource.k8s.io/v1/deviceclasses HTTP/1.1\r\nHost: t\r\nAuthorization: "
      "Bearer " +
      std::string(kToken) + "\r\nContent-Type: application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body);
  EXPECT_EQ(Code(c.ReadResponse()), 201);
  std::string events = w.ReadAll(std::chrono::seconds(2));
  EXPECT_NE(events.find(R"("type":"ADDED")"), std::string::npos) << events;
  EXPECT_NE(events.find(R"("name":"gpu")"), std::string::npos) << events;
}

TEST_F(HttpServerTest, ShutdownEndsWatchesAndClosesIdleConnections) {
  StartServer({});
  RawClient idle(port());
  idle.Send(Get("/version"));
  EXPECT_EQ(Code(idle.ReadResponse()), 200);
  RawClient w(port());
  w.Send(Get("/apis/resource.k8s.io/v1/deviceclasses?watch=true"));
  EXPECT_EQ(Code(w.ReadAll(std::chrono::milliseconds(500))), 0 + 200);
  auto start = std::chrono::steady_clock::now();
  server_->Shutdown();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  bool closed = false;
  std::string tail = w.ReadAll(std::chrono::seconds(2), &closed);
  EXPECT_TRUE(closed);
  EXPECT_NE(tail.find("0\r\n\r\n"), std::string::npos);
  idle.ReadAll(std::chrono::seconds(2), &closed);
  EXPECT_TRUE(closed);
}

// Slowloris: 2,000 connections that trickle a request header one byte every second hold no
// thread and do not slow a normal client down. Bounded: ends after ~6 s by itself.
TEST_F(HttpServerTest, TricklingConnectionsDoNotStarveNormalClients) {
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = std::min<rlim_t>(lim.rlim_max, 8192);
  setrlimit(RLIMIT_NOFILE, &lim);
  ASSERT_GE(lim.rlim_cur, 4200u) << "needs descriptors for 2,000 connections on both ends";
  HttpServerOptions o;
  o.header_timeout = std::chrono::seconds(30);  // the trickle outlives the test
  StartServer(o);
  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < 2000; ++i) {
    slow.push_back(std::make_unique<RawClient>(port()));
    ASSERT_TRUE(slow.back()->connected()) << i;
    slow.back()->Send("G");
  }
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    const std::string rest = "ET /api HTTP/1.1\r\nX-Slow: ";
    for (size_t n = 0; !done.load(); ++n) {
      for (auto& c : slow) c->Send(std::string(1, n < rest.size() ? rest[n] : 'a'));
      for (int t = 0; t < 10 && !done.load(); ++t) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  });
  std::vector<double> ms;
  RawClient normal(port());
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < end) {
    auto start = std::chrono::steady_clock::now();
    normal.Send(Get("/apis/resource.k8s.io/v1/deviceclasses"));
    ASSERT_EQ(Code(normal.ReadResponse()), 200);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  done = true;
  trickle.join();
  EXPECT_EQ(server_->connection_count(), 2001u);
  std::sort(ms.begin(), ms.end());
  ASSERT_GT(ms.size(), 100u);
  double p99 = ms[ms.size() * 99 / 100];
  EXPECT_LT(p99, 100.0) << "p99 " << p99 << " ms over " << ms.size() << " requests";
  std::printf("normal client: %zu requests, p50 %.2f ms, p99 %.2f ms with 2000 trickling\n",
              ms.size(), ms[ms.size() / 2], p99);
}

}  // namespace
}  // namespace qm::api
