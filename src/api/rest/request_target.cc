#include "api/rest/request_target.h"

#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "common/utf8.h"

namespace qm::api {
namespace {

namespace http = boost::beast::http;

std::string Str(boost::beast::string_view v) { return std::string(v.data(), v.size()); }

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A '%' not followed by two hex digits is kept as it is, as browsers and Go's lenient paths do.
std::string PercentDecode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && HexDigit(s[i + 1]) >= 0 && HexDigit(s[i + 2]) >= 0) {
      out += static_cast<char>(HexDigit(s[i + 1]) * 16 + HexDigit(s[i + 2]));
      i += 2;
    } else if (plus_is_space && s[i] == '+') {
      out += ' ';
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

absl::Status ParseRequestTarget(std::string_view target, HttpRequest* req) {
  auto q = target.find('?');
  req->path = PercentDecode(target.substr(0, q), /*plus_is_space=*/false);
  if (!IsValidUtf8(req->path)) {
    return absl::InvalidArgumentError("the request path is not valid UTF-8");
  }
  if (q == std::string_view::npos) return absl::OkStatus();
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    if (!pair.empty()) {
      auto eq = pair.find('=');
      std::string key = PercentDecode(pair.substr(0, eq), true);
      std::string value =
          eq == std::string_view::npos ? "" : PercentDecode(pair.substr(eq + 1), true);
      if (!IsValidUtf8(key) || !IsValidUtf8(value)) {
        return absl::InvalidArgumentError("the query parameters are not valid UTF-8");
      }
      req->query[std::move(key)] = std::move(value);
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return absl::OkStatus();
}

absl::Status FromHttpMessage(http::request<http::string_body>&& msg, HttpRequest* req,
                             std::optional<std::string>* bearer_token) {
  req->method = Str(msg.method_string());
  absl::Status status = ParseRequestTarget(Str(msg.target()), req);
  req->content_type = Str(msg[http::field::content_type]);
  req->accept = Str(msg[http::field::accept]);
  req->user_agent = SanitizeUtf8(Str(msg[http::field::user_agent]));
  for (const auto& f : msg) {
    std::string name = absl::AsciiStrToLower(Str(f.name_string()));
    if (absl::StartsWith(name, "impersonate-")) {
      std::string value = Str(f.value());
      if (status.ok() && !IsValidUtf8(value)) {
        status = absl::InvalidArgumentError("the " + name + " header is not valid UTF-8");
      }
      req->impersonation.emplace_back(std::move(name), std::move(value));
    }
  }
  bearer_token->reset();
  std::string authz = Str(msg[http::field::authorization]);
  if (authz.size() > 7 && absl::EqualsIgnoreCase(authz.substr(0, 7), "bearer ")) {
    *bearer_token = std::string(absl::StripAsciiWhitespace(authz.substr(7)));
  }
  req->body = std::move(msg.body());
  return status;
}

}  // namespace qm::api
