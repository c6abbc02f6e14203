#pragma once

// ServiceAccount tokens (what `kubectl create token NAME` gets from the TokenRequest
// subresource): compact JWTs signed with HMAC-SHA256 under a server secret, carrying the
// Kubernetes claims (`sub` = system:serviceaccount:<ns>:<name>, `kubernetes.io` with the
// namespace and the ServiceAccount's name and uid). Verified without a database round trip; the
// caller checks that the ServiceAccount still exists with the same uid, so deleting it
// invalidates its tokens.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

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

// The claims of `token`: nullopt when it is not a token of this issuer (another kind of bearer
// token); Unauthenticated when it claims to be one but its signature, shape or expiry (at
// `now`) is wrong. The message never quotes the token.
absl::StatusOr<std::optional<ServiceAccountClaims>> VerifyServiceAccountToken(
    const std::string& key, const std::string& token, std::chrono::system_clock::time_point now);

}  // namespace qm::auth
