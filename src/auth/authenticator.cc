#include "auth/authenticator.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace qm::auth {
namespace {

// Splits one CSV line into fields; double quotes group commas, "" is a literal quote.
absl::StatusOr<std::vector<std::string>> SplitCsvLine(absl::string_view line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  if (quoted) return absl::InvalidArgumentError("unterminated quote");
  return fields;
}

}  // namespace

UserInfo WithAuthenticatedGroup(UserInfo user) {
  if (!user.InGroup(kGroupAuthenticated)) user.groups.push_back(kGroupAuthenticated);
  return user;
}

absl::StatusOr<std::map<std::string, UserInfo>> ParseTokenFile(const std::string& contents) {
  std::map<std::string, UserInfo> out;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(contents, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    auto fields = SplitCsvLine(line);
    if (!fields.ok() || fields->size() < 3) {
      return absl::InvalidArgumentError(
          absl::StrCat("token file line ", line_no, ": want token,user,uid[,\"group1,group2\"]"));
    }
    const std::string& token = (*fields)[0];
    UserInfo user{(*fields)[1], (*fields)[2], {}};
    if (token.empty() || user.name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("token file line ", line_no, ": token and user must not be empty"));
    }
    if (fields->size() > 3) {
      for (absl::string_view g : absl::StrSplit((*fields)[3], ',', absl::SkipWhitespace())) {
        user.groups.emplace_back(absl::StripAsciiWhitespace(g));
      }
    }
    if (!out.emplace(token, WithAuthenticatedGroup(std::move(user))).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("token file line ", line_no, ": duplicate token"));
    }
  }
  return out;
}

absl::StatusOr<std::map<std::string, UserInfo>> LoadTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError("cannot read token file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto tokens = ParseTokenFile(ss.str());
  if (!tokens.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", tokens.status().message()));
  }
  return tokens;
}

UnionAuthenticator::UnionAuthenticator(std::map<std::string, UserInfo> static_tokens,
                                       std::vector<TokenVerifier> verifiers)
    : static_tokens_(std::move(static_tokens)), verifiers_(std::move(verifiers)) {}

absl::StatusOr<std::optional<UserInfo>> UnionAuthenticator::Authenticate(
    const Credentials& creds) const {
  if (creds.bearer_token.has_value()) {
    const std::string& token = *creds.bearer_token;
    if (auto it = static_tokens_.find(token); it != static_tokens_.end()) return it->second;
    for (const auto& verify : verifiers_) {
      auto user = verify(token);
      if (!user.ok()) return user.status();
      if (user->has_value()) return WithAuthenticatedGroup(std::move(**user));
    }
    return absl::UnauthenticatedError("invalid bearer token");
  }
  if (creds.untrusted_client_certificate) {
    return absl::UnauthenticatedError("client certificate is not signed by a trusted CA");
  }
  if (creds.client_certificate.has_value()) {
    const PeerCertificate& cert = *creds.client_certificate;
    if (cert.common_name.empty()) {
      return absl::UnauthenticatedError("client certificate has no common name");
    }
    return WithAuthenticatedGroup(UserInfo{cert.common_name, "", cert.organizations});
  }
  return std::optional<UserInfo>();
}

}  // namespace qm::auth
