// libFuzzer target for credential and body parsers that see bytes from clients or files:
// the static token file (auth/authenticator.h), ServiceAccount tokens
// (auth/service_account_token.h) and protobuf request bodies (api/rest/protobuf.h).
//
// Input: one byte choosing the parser (its low nibble % 5, so '0'..'4'), then the rest:
//   0: ParseTokenFile. Every user parsed has a token and a name and is in
//      system:authenticated; an error names a line.
//   1: VerifyServiceAccountToken on the rest as a bearer token. Claims are only returned for a
//      token whose signature verifies, so the same token under another key must not verify.
//   2: the rest as a token payload, signed here with the server key: the claim parser after the
//      signature check (what a token the server signed from client-chosen fields meets).
//   3: Sign/Verify round trip of claims built from the rest (printable strings, times from
//      bytes): the claims come back as they were signed; one second after expiry they do not.
//   4: DecodeKubernetesProtobuf. A decoded body is an object with string apiVersion and kind,
//      and serializes (RestApi::Handle dumps it before decoding it again as JSON; a body that
//      does not is an internal error, see fuzz_util.h).
// Never a crash, hang or exception; a finding aborts (see fuzz_util.h).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "api/rest/protobuf.h"
#include "auth/authenticator.h"
#include "auth/service_account_token.h"
#include "fuzz_util.h"

namespace {

using qm::fuzz::Crash;
using Time = std::chrono::system_clock::time_point;

constexpr char kOtherKey[] = "another-service-account-key-0123456789abcdef";
const Time kNow{std::chrono::seconds(1800000000)};

void TokenFile(const std::string& text) {
  auto users = qm::auth::ParseTokenFile(text);
  if (!users.ok()) {
    if (users.status().message().find("line") == std::string::npos) {
      Crash("token file error does not name a line: " + std::string(users.status().message()));
    }
    return;
  }
  for (const auto& [token, user] : *users) {
    if (token.empty() || user.name.empty() || !user.InGroup(qm::auth::kGroupAuthenticated)) {
      Crash("token file user without token, name or system:authenticated: " + user.name);
    }
  }
}

void Verify(const std::string& token) {
  auto claims = qm::auth::VerifyServiceAccountToken(qm::fuzz::kServiceAccountKey, token, kNow);
  if (!claims.ok() || !claims->has_value()) return;
  auto other = qm::auth::VerifyServiceAccountToken(kOtherKey, token, kNow);
  if (other.ok() && other->has_value()) Crash("a token verified under two keys: " + token);
}

void SignedPayload(const std::string& payload) {
  std::string token = qm::auth::SignServiceAccountPayload(qm::fuzz::kServiceAccountKey, payload);
  (void)qm::auth::VerifyServiceAccountToken(qm::fuzz::kServiceAccountKey, token, kNow);
}

// Takes up to `n` bytes of `*in` as a printable string.
std::string Take(std::string_view* in, size_t n) {
  std::string out;
  while (n-- > 0 && !in->empty()) {
    out += static_cast<char>(0x20 + static_cast<unsigned char>(in->front()) % 0x5f);
    in->remove_prefix(1);
  }
  return out;
}

int64_t TakeInt(std::string_view* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4 && !in->empty(); ++i) {
    v = v << 8 | static_cast<unsigned char>(in->front());
    in->remove_prefix(1);
  }
  return v;
}

void RoundTrip(std::string_view in) {
  qm::auth::ServiceAccountClaims c;
  c.issued_at = kNow - std::chrono::seconds(TakeInt(&in) % 100000);
  c.expires_at = kNow + std::chrono::seconds(1 + TakeInt(&in) % 10000000);
  c.namespace_name = Take(&in, 63);
  c.name = Take(&in, 63);
  c.uid = Take(&in, 36);
  while (!in.empty() && c.audiences.size() < 4) c.audiences.push_back(Take(&in, 32));
  const std::string token = qm::auth::SignServiceAccountToken(qm::fuzz::kServiceAccountKey, c);
  auto back = qm::auth::VerifyServiceAccountToken(qm::fuzz::kServiceAccountKey, token, kNow);
  if (!back.ok() || !back->has_value()) {
    Crash("a signed token does not verify: " +
          (back.ok() ? std::string("not ours") : std::string(back.status().message())));
  }
  const auto& got = **back;
  using std::chrono::seconds;
  using std::chrono::time_point_cast;
  if (got.namespace_name != c.namespace_name || got.name != c.name || got.uid != c.uid ||
      got.audiences != c.audiences ||
      time_point_cast<seconds>(got.issued_at) != time_point_cast<seconds>(c.issued_at) ||
      time_point_cast<seconds>(got.expires_at) != time_point_cast<seconds>(c.expires_at)) {
    Crash("claims changed in a sign/verify round trip: " + token);
  }
  auto late = qm::auth::VerifyServiceAccountToken(qm::fuzz::kServiceAccountKey, token,
                                                  c.expires_at + seconds(1));
  if (late.ok()) Crash("an expired token verifies: " + token);
  auto forged = qm::auth::VerifyServiceAccountToken(kOtherKey, token, kNow);
  if (forged.ok() && forged->has_value()) Crash("a token verifies under another key");
}

void Protobuf(const std::string& body) {
  auto decoded = qm::api::DecodeKubernetesProtobuf(body);
  if (!decoded.ok()) return;
  if (!decoded->is_object() || !(*decoded)["apiVersion"].is_string() ||
      !(*decoded)["kind"].is_string()) {
    Crash("decoded protobuf is not an object with apiVersion and kind: " +
          decoded->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  try {
    (void)decoded->dump();
  } catch (const std::exception& e) {
    qm::api::HttpRequest req;
    req.method = "POST";
    req.content_type = qm::api::kProtobufContentType;
    qm::fuzz::InternalError(std::string("decoded protobuf body does not serialize (RestApi::Handle "
                                        "dumps it, so the request is answered 500): ") +
                                e.what(),
                            req);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  qm::fuzz::CurrentInput() = std::string_view(reinterpret_cast<const char*>(data), size);
  std::string_view view(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string rest(view);
  switch ((data[0] & 0x0f) % 5) {
    case 0:
      TokenFile(rest);
      break;
    case 1:
      Verify(rest);
      break;
    case 2:
      SignedPayload(rest);
      break;
    case 3:
      RoundTrip(view);
      break;
    default:
      Protobuf(rest);
      break;
  }
  return 0;
}
