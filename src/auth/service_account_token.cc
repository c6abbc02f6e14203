#include "auth/service_account_token.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace qm::auth {
namespace {

using nlohmann::json;

// RFC 7515 base64url without padding.
std::string B64Url(const std::string& in) {
  std::string out;
  absl::WebSafeBase64Escape(in, &out);
  return out;
}

std::string Hmac(const std::string& key, const std::string& data) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac, &len);
  return std::string(reinterpret_cast<char*>(mac), len);
}

int64_t Seconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

// A NumericDate claim (RFC 7519: seconds, a JSON number; a fraction is dropped) that the
// clock's 64-bit count can hold (nanoseconds here: up to the year 2262). False when absent, not
// a number or out of range: converting such a value would be undefined behaviour.
bool NumericDate(const json& payload, const char* key, int64_t* out) {
  constexpr int64_t kMaxSeconds =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::duration::max())
          .count();
  auto it = payload.find(key);
  if (it == payload.end()) return false;
  if (it->is_number_integer() || it->is_number_unsigned()) {
    if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(kMaxSeconds)) {
      return false;
    }
    *out = it->get<int64_t>();
  } else if (it->is_number_float()) {
    const double d = it->get<double>();
    if (!(d >= 0 && d <= static_cast<double>(kMaxSeconds))) return false;  // NaN fails too
    *out = static_cast<int64_t>(d);
  } else {
    return false;
  }
  return *out >= 0 && *out <= kMaxSeconds;
}

const char kHeader[] = R"({"alg":"HS256","typ":"JWT"})";

}  // namespace

std::string SignServiceAccountToken(const std::string& key, const ServiceAccountClaims& c) {
  json payload = {
      {"iss", kServiceAccountIssuer},
      {"sub", "system:serviceaccount:" + c.namespace_name + ":" + c.name},
      {"aud", c.audiences},
      {"iat", Seconds(c.issued_at)},
      {"nbf", Seconds(c.issued_at)},
      {"exp", Seconds(c.expires_at)},
      {"kubernetes.io",
       {{"namespace", c.namespace_name}, {"serviceaccount", {{"name", c.name}, {"uid", c.uid}}}}},
  };
  return SignServiceAccountPayload(key, payload.dump());
}

std::string SignServiceAccountPayload(const std::string& key, const std::string& payload_json) {
  std::string signing_input = B64Url(kHeader) + "." + B64Url(payload_json);
  return signing_input + "." + B64Url(Hmac(key, signing_input));
}

absl::StatusOr<std::optional<ServiceAccountClaims>> VerifyServiceAccountToken(
    const std::string& key, const std::string& token, std::chrono::system_clock::time_point now) {
  std::vector<std::string> parts = absl::StrSplit(token, '.');
  if (parts.size() != 3) return std::optional<ServiceAccountClaims>();
  std::string header, payload_text, signature;
  if (!absl::WebSafeBase64Unescape(parts[0], &header) ||
      !absl::WebSafeBase64Unescape(parts[1], &payload_text) ||
      !absl::WebSafeBase64Unescape(parts[2], &signature)) {
    return std::optional<ServiceAccountClaims>();
  }
  json payload = json::parse(payload_text, nullptr, /*allow_exceptions=*/false);
  if (!payload.is_object() || payload.value("iss", json()) != kServiceAccountIssuer) {
    return std::optional<ServiceAccountClaims>();  // someone else's token
  }
  std::string expected = Hmac(key, parts[0] + "." + parts[1]);
  if (header != kHeader || signature.size() != expected.size() ||
      CRYPTO_memcmp(signature.data(), expected.data(), expected.size()) != 0) {
    return absl::UnauthenticatedError("service account token has an invalid signature");
  }
  ServiceAccountClaims c;
  try {
    const json& k8s = payload.at("kubernetes.io");
    c.namespace_name = k8s.at("namespace").get<std::string>();
    c.name = k8s.at("serviceaccount").at("name").get<std::string>();
    c.uid = k8s.at("serviceaccount").at("uid").get<std::string>();
    c.audiences = payload.at("aud").get<std::vector<std::string>>();
    int64_t iat = 0, exp = 0;
    if (!NumericDate(payload, "iat", &iat) || !NumericDate(payload, "exp", &exp)) {
      return absl::UnauthenticatedError("service account token has malformed claims");
    }
    c.issued_at = std::chrono::system_clock::time_point(std::chrono::seconds(iat));
    c.expires_at = std::chrono::system_clock::time_point(std::chrono::seconds(exp));
  } catch (const json::exception&) {
    return absl::UnauthenticatedError("service account token has malformed claims");
  }
  if (now >= c.expires_at) return absl::UnauthenticatedError("service account token has expired");
  return std::optional<ServiceAccountClaims>(std::move(c));
}

}  // namespace qm::auth

namespace qm::auth {

TokenVerifier MakeServiceAccountVerifier(std::string key,
                                         std::function<std::chrono::system_clock::time_point()> now,
                                         ServiceAccountLookup lookup) {
  return [key = std::move(key), now = std::move(now), lookup = std::move(lookup)](
             const std::string& token) -> absl::StatusOr<std::optional<UserInfo>> {
    auto claims = VerifyServiceAccountToken(key, token, now());
    if (!claims.ok()) return claims.status();
    if (!claims->has_value()) return std::optional<UserInfo>();
    const ServiceAccountClaims& c = **claims;
    auto uid = lookup(c.namespace_name, c.name);
    if (!uid.has_value() || *uid != c.uid) {
      return absl::UnauthenticatedError("the token's service account no longer exists");
    }
    return std::optional<UserInfo>(UserInfo{
        std::string(kServiceAccountUserPrefix) + c.namespace_name + ":" + c.name,
        c.uid,
        {kGroupServiceAccounts, std::string(kGroupServiceAccounts) + ":" + c.namespace_name}});
  };
}

}  // namespace qm::auth
