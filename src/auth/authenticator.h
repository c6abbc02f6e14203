#pragma once

// Authentication as Kubernetes does it: a request carries a client certificate (verified by the
// transport against the client CA) and/or a bearer token; an authenticator turns them into a
// UserInfo. Transport-neutral: no TLS or HTTP types here.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "auth/user.h"

namespace qm::auth {

// The subject of a client certificate that chained to the client CA: CN is the user name, each
// O a group (Kubernetes' x509 authenticator).
struct PeerCertificate {
  std::string common_name;
  std::vector<std::string> organizations;
};

// What a request presented.
struct Credentials {
  std::optional<std::string> bearer_token;            // from `Authorization: Bearer <token>`
  std::optional<PeerCertificate> client_certificate;  // verified by the transport
  bool untrusted_client_certificate = false;          // one was presented but did not verify
};

// Turns credentials into a user. Thread-safe.
class Authenticator {
 public:
  virtual ~Authenticator() = default;
  // The user (with `system:authenticated` among its groups); nullopt when the request carries
  // no credentials at all (anonymous); Unauthenticated when it carries credentials that are
  // not valid (unknown, expired or garbled token, untrusted certificate). Messages never quote
  // the token.
  virtual absl::StatusOr<std::optional<UserInfo>> Authenticate(const Credentials& creds) const = 0;
};

// Kubernetes' static token file (--token-auth-file): CSV lines `token,user,uid[,"g1,g2"]`;
// blank lines and lines starting with '#' are skipped. InvalidArgument naming the line (never
// its token) for a malformed line or a duplicate token; NotFound when the file is missing.
absl::StatusOr<std::map<std::string, UserInfo>> ParseTokenFile(const std::string& contents);
absl::StatusOr<std::map<std::string, UserInfo>> LoadTokenFile(const std::string& path);

// Verifies a bearer token other than a static one (ServiceAccount tokens): the user, nullopt
// when the token is not of this kind, Unauthenticated when it is but is invalid.
using TokenVerifier =
    std::function<absl::StatusOr<std::optional<UserInfo>>(const std::string& token)>;

// The union of the authenticators the server runs: client certificates, static tokens, and
// the token verifiers given (tried in order). A certificate and a token together: the token
// wins when it is valid, as in kube-apiserver's union (certificate first, then token).
class UnionAuthenticator final : public Authenticator {
 public:
  UnionAuthenticator(std::map<std::string, UserInfo> static_tokens,
                     std::vector<TokenVerifier> verifiers);
  absl::StatusOr<std::optional<UserInfo>> Authenticate(const Credentials& creds) const override;

 private:
  std::map<std::string, UserInfo> static_tokens_;
  std::vector<TokenVerifier> verifiers_;
};

// Adds `system:authenticated` (and nothing twice) to a user's groups.
UserInfo WithAuthenticatedGroup(UserInfo user);

}  // namespace qm::auth
