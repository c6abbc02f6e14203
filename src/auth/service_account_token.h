#pragma once

// ServiceAccount tokens (what `kubectl create token NAME` gets from the TokenRequest
// subresource): compact JWTs signed with HMAC-SHA256 under a server secret, carrying the
// Kubernetes claims (`sub` = system:serviceaccount:<ns>:<name>, `kubernetes.io` with the
// namespace and the ServiceAccount's name and uid). Verified without a database round trip; the
// caller checks that the ServiceAccount still exists with the same uid, so deleting it
// invalidates its tokens.

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "auth/authenticator.h"

namespace qm::auth {

inline constexpr char kServiceAccountIssuer[] = "https://quartermaster.local";

struct ServiceAccountClaims {
  std::string namespace_name;
  std::string name;
  std::string uid;  // of the ServiceAccount object
  std::vector<std::string> audiences;
  std::chrono::system_clock::time_point issued_at;
  std::chrono::system_clock::time_point expires_at;
};

// The signed token for `claims` under `key` (at least 32 bytes of secret).
std::string SignServiceAccountToken(const std::string& key, const ServiceAccountClaims& claims);

// The token whose payload is `payload_json` verbatim, signed as SignServiceAccountToken signs
// (an HS256 JWT): for tests and fuzzers that need claims the typed struct cannot express.
std::string SignServiceAccountPayload(const std::string& key, const std::string& payload_json);

// The claims of `token`: nullopt when it is not a token of this issuer (another kind of bearer
// token); Unauthenticated when it claims to be one but its signature, shape or expiry (at
// `now`) is wrong. The message never quotes the token.
absl::StatusOr<std::optional<ServiceAccountClaims>> VerifyServiceAccountToken(
    const std::string& key, const std::string& token, std::chrono::system_clock::time_point now);

}  // namespace qm::auth

namespace qm::auth {

// The uid of ServiceAccount `namespace_name/name` as it exists now, nullopt when it does not.
using ServiceAccountLookup = std::function<std::optional<std::string>(
    const std::string& namespace_name, const std::string& name)>;

// A TokenVerifier (see authenticator.h) for ServiceAccount tokens signed with `key`: the user
// `system:serviceaccount:<ns>:<name>` in groups `system:serviceaccounts` and
// `system:serviceaccounts:<ns>`; Unauthenticated when the ServiceAccount is gone or was
// re-created (another uid).
TokenVerifier MakeServiceAccountVerifier(std::string key,
                                         std::function<std::chrono::system_clock::time_point()> now,
                                         ServiceAccountLookup lookup);

}  // namespace qm::auth
