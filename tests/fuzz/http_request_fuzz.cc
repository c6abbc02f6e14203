// libFuzzer target for request routing and header handling: the input is a byte stream on one
// connection. Boost.Beast parses it the way HttpServer does (header limit 64 KiB, body limit
// 1 MiB, header first, then the body eagerly), up to eight pipelined requests; each parsed
// request passes the server's framing checks and is turned into an api::HttpRequest as
// HttpServer's Dispatch does (target split and percent-decoded, headers copied, Impersonate-*
// collected), authenticated (static tokens, ServiceAccount tokens), run through the request
// gate (RBAC, impersonation), described for metrics, and served by RestApi over an in-memory
// store. See fuzz_util.h for what counts as a finding.
//
// Tokens the in-memory server knows: "admin-token" (system:masters), "node-token"
// (system:node:node-1), "user-token" (jane, no roles).
#include <boost/asio/buffer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <map>
#include <string>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "api/rest/request_gate.h"
#include "api/rest/request_target.h"
#include "auth/authenticator.h"
#include "auth/service_account_token.h"
#include "fuzz_util.h"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using qm::api::HttpRequest;
using qm::api::HttpResponse;

constexpr uint32_t kHeaderLimit = 64 * 1024;
constexpr uint64_t kBodyLimit = 1024 * 1024;
constexpr int kMaxRequests = 8;

std::string Str(beast::string_view v) { return std::string(v.data(), v.size()); }

std::string Shown(const HttpRequest& req) {
  return qm::fuzz::Printable(req.method) + " " + qm::fuzz::Printable(req.path);
}

bool IsAnonymousPath(const std::string& path) {
  for (const char* p : {"/healthz", "/livez", "/readyz", "/version"}) {
    if (path == p || path == std::string(p) + "/") return true;
  }
  return false;
}

// The in-memory server plus what HttpServer holds around it: authenticator and request gate.
class Server {
 public:
  Server()
      : authn_(
            StaticTokens(),
            {qm::auth::MakeServiceAccountVerifier(
                qm::fuzz::kServiceAccountKey, [this] { return api_.clock().Now(); },
                [this](const std::string& ns,
                       const std::string& name) -> std::optional<std::string> {
                  auto sa = api_.objects().Get(qm::model::ResourceKey{"serviceaccounts", ns, name});
                  if (!sa.ok()) return std::nullopt;
                  return sa->meta.uid;
                })}),
        gate_(api_.authorizer()) {}

  // Dispatch + Route for one parsed request, without the transport's last-resort catches: an
  // exception ends the run where it was thrown.
  void Serve(http::request<http::string_body> msg) {
    HttpRequest req;
    qm::auth::Credentials creds;
    absl::Status target = qm::api::FromHttpMessage(std::move(msg), &req, &creds.bearer_token);
    req.request_id = "fuzz";
    (void)qm::api::RestApi::Describe(req);  // HttpServer::Observe, for every answer
    if (!target.ok()) return;               // 400, before authentication
    auto user = authn_.Authenticate(creds);
    if (!user.ok() || (!user->has_value() && !IsAnonymousPath(req.path))) {
      if (qm::fuzz::Verbose()) std::fprintf(stderr, "%s -> 401\n", Shown(req).c_str());
      return;
    }
    req.user = std::move(*user);
    (void)qm::api::RequestAttributes(req);
    if (auto denied = gate_.Admit(&req)) {
      if (qm::fuzz::Verbose()) {
        std::fprintf(stderr, "%s -> gate %d %s\n", Shown(req).c_str(), denied->code,
                     qm::fuzz::Printable(denied->body, 300).c_str());
      }
      qm::fuzz::CheckResponse(req, *denied);
      if (denied->code != 403 && denied->code != 400) {
        qm::fuzz::Crash("the gate answered " + std::to_string(denied->code), &req);
      }
      return;
    }
    if (qm::api::RestApi::IsWatch(req)) return api_.Watch(req);
    if (req.method == "GET" && (req.path == "/healthz" || req.path == "/livez" ||
                                req.path == "/readyz" || req.path == "/metrics")) {
      return;  // answered by HttpServer itself
    }
    api_.Handle(req);
  }

 private:
  static std::map<std::string, qm::auth::UserInfo> StaticTokens() {
    using qm::auth::UserInfo;
    using qm::auth::WithAuthenticatedGroup;
    return {{"admin-token", WithAuthenticatedGroup(UserInfo{"admin", "admin", {"system:masters"}})},
            {"node-token",
             WithAuthenticatedGroup(UserInfo{"system:node:node-1", "", {"system:nodes"}})},
            {"user-token", WithAuthenticatedGroup(UserInfo{"jane", "jane-uid", {}})}};
  }

  qm::fuzz::InMemoryApi api_;
  qm::auth::UnionAuthenticator authn_;
  qm::api::RequestGate gate_;
};

// Parses one request from the front of `in` as HttpServer's session does and consumes it.
// False when the stream ends or the server would answer 4xx and close the connection.
bool ReadRequest(std::string_view* in, http::request<http::string_body>* out) {
  http::request_parser<http::string_body> p;
  p.header_limit(kHeaderLimit);
  p.body_limit(kBodyLimit);
  beast::error_code ec;
  // The header: the whole of it must be in the buffer (need_more means the stream ended).
  size_t used = p.put(boost::asio::buffer(in->data(), in->size()), ec);
  in->remove_prefix(used);
  if (ec || !p.is_header_done()) return false;
  auto& msg = p.get();
  const auto header_fields = static_cast<size_t>(std::distance(msg.begin(), msg.end()));
  if (auto te = msg.find(http::field::transfer_encoding); te != msg.end()) {
    if (!absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(Str(te->value())), "chunked") ||
        msg.count(http::field::transfer_encoding) > 1) {
      return false;  // 400 unsupported Transfer-Encoding
    }
  }
  if (msg.count(http::field::content_length) > 1) return false;  // 400 duplicate Content-Length
  if (p.content_length() && *p.content_length() > kBodyLimit) return false;  // 413
  p.eager(true);
  while (!p.is_done()) {
    used = p.put(boost::asio::buffer(in->data(), in->size()), ec);
    in->remove_prefix(used);
    if (ec == http::error::need_more && used > 0) continue;
    if (ec || used == 0) {
      if (!p.is_done()) return false;  // stream ended inside the body, or a framing error
      break;
    }
  }
  if (static_cast<size_t>(std::distance(msg.begin(), msg.end())) != header_fields) {
    return false;  // 400 chunk trailers are not accepted
  }
  *out = p.release();
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  qm::fuzz::CurrentInput() = std::string_view(reinterpret_cast<const char*>(data), size);
  std::string_view in(reinterpret_cast<const char*>(data), size);
  Server server;
  for (int i = 0; i < kMaxRequests && !in.empty(); ++i) {
    http::request<http::string_body> msg;
    if (!ReadRequest(&in, &msg)) break;
    const bool keep_alive = msg.keep_alive();
    if (!qm::fuzz::Allow5xx()) {
      server.Serve(std::move(msg));
    } else {
      HttpRequest shown;
      shown.method = Str(msg.method_string());
      shown.path = Str(msg.target());
      try {
        server.Serve(std::move(msg));
      } catch (const std::exception& e) {
        qm::fuzz::InternalError(std::string("exception while serving: ") + e.what(), shown);
      }
    }
    if (!keep_alive) break;
  }
  return 0;
}
