// Static token files, the union authenticator and ServiceAccount tokens.
#include "auth/authenticator.h"

#include <gtest/gtest.h>

#include <string>

#include "auth/service_account_token.h"

namespace qm::auth {
namespace {

using std::chrono::hours;
using std::chrono::seconds;
using std::chrono::system_clock;

TEST(TokenFileTest, ParsesKubernetesCsvWithQuotedGroups) {
  auto tokens = ParseTokenFile(
      "# comment\n"
      "t1,alice,u1,\"team-a,system:masters\"\n"
      "\n"
      "t2,bob,u2\n");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  ASSERT_EQ(tokens->size(), 2u);
  const UserInfo& alice = tokens->at("t1");
  EXPECT_EQ(alice.name, "alice");
  EXPECT_EQ(alice.uid, "u1");
  EXPECT_EQ(alice.groups,
            (std::vector<std::string>{"team-a", "system:masters", "system:authenticated"}));
  EXPECT_EQ(tokens->at("t2").groups, (std::vector<std::string>{"system:authenticated"}));
}

TEST(TokenFileTest, BadLinesNameTheLineButNeverTheToken) {
  for (const std::string& text :
       {std::string("secret-token-1,alice\n"), std::string("ok,a,1\nsecret-token-1,,2\n"),
        std::string("secret-token-1,a,1\nsecret-token-1,b,2\n"),
        std::string("secret-token-1,a,1,\"g1\n")}) {
    auto tokens = ParseTokenFile(text);
    ASSERT_FALSE(tokens.ok()) << text;
    EXPECT_EQ(tokens.status().message().find("secret-token-1"), std::string::npos);
    EXPECT_NE(tokens.status().message().find("line"), std::string::npos);
  }
}

TEST(UnionAuthenticatorTest, TokensCertificatesAndAnonymous) {
  std::map<std::string, UserInfo> tokens;
  tokens["good"] = WithAuthenticatedGroup({"alice", "1", {}});
  UnionAuthenticator authn(std::move(tokens), {});

  Credentials none;
  auto anon = authn.Authenticate(none);
  ASSERT_TRUE(anon.ok());
  EXPECT_FALSE(anon->has_value());

  Credentials good;
  good.bearer_token = "good";
  auto alice = authn.Authenticate(good);
  ASSERT_TRUE(alice.ok());
  ASSERT_TRUE(alice->has_value());
  EXPECT_EQ((*alice)->name, "alice");

  Credentials bad;
  bad.bearer_token = "bad";
  EXPECT_TRUE(absl::IsUnauthenticated(authn.Authenticate(bad).status()));

  Credentials cert;
  cert.client_certificate = PeerCertificate{"system:node:n1", {"system:nodes"}};
  auto node = authn.Authenticate(cert);
  ASSERT_TRUE(node.ok());
  EXPECT_EQ((*node)->name, "system:node:n1");
  EXPECT_TRUE((*node)->InGroup("system:nodes"));
  EXPECT_TRUE((*node)->InGroup("system:authenticated"));

  Credentials untrusted;
  untrusted.untrusted_client_certificate = true;
  EXPECT_TRUE(absl::IsUnauthenticated(authn.Authenticate(untrusted).status()));
}

class ServiceAccountTokenTest : public ::testing::Test {
 protected:
  const std::string key_ = std::string(32, 'k');
  const system_clock::time_point now_ = system_clock::time_point(seconds(1800000000));
  ServiceAccountClaims Claims() const {
    return ServiceAccountClaims{"team-a",          "builder", "uid-1",
                                {"quartermaster"}, now_,      now_ + hours(1)};
  }
};

TEST_F(ServiceAccountTokenTest, RoundTripsItsClaims) {
  std::string token = SignServiceAccountToken(key_, Claims());
  auto claims = VerifyServiceAccountToken(key_, token, now_ + seconds(10));
  ASSERT_TRUE(claims.ok()) << claims.status();
  ASSERT_TRUE(claims->has_value());
  EXPECT_EQ((*claims)->namespace_name, "team-a");
  EXPECT_EQ((*claims)->name, "builder");
  EXPECT_EQ((*claims)->uid, "uid-1");
  EXPECT_EQ((*claims)->expires_at, now_ + hours(1));
}

TEST_F(ServiceAccountTokenTest, ExpiredTamperedAndForeignTokens) {
  std::string token = SignServiceAccountToken(key_, Claims());
  EXPECT_TRUE(
      absl::IsUnauthenticated(VerifyServiceAccountToken(key_, token, now_ + hours(2)).status()));
  EXPECT_TRUE(absl::IsUnauthenticated(
      VerifyServiceAccountToken(std::string(32, 'x'), token, now_).status()));
  // A payload edited to another service account no longer matches its signature.
  ServiceAccountClaims other = Claims();
  other.name = "admin";
  std::string forged = SignServiceAccountToken(std::string(32, 'x'), other);
  std::string spliced = forged.substr(0, forged.rfind('.')) + token.substr(token.rfind('.'));
  EXPECT_TRUE(absl::IsUnauthenticated(VerifyServiceAccountToken(key_, spliced, now_).status()));
  for (const std::string& garbage :
       {std::string("abc"), std::string("a.b.c"), std::string("...."), std::string(100000, '.')}) {
    auto r = VerifyServiceAccountToken(key_, garbage, now_);
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r->has_value());
  }
}

TEST_F(ServiceAccountTokenTest, TimesPastTheClockRangeAreMalformedNotOverflowed) {
  // Signed with the right key, so only the claims can refuse it (the fuzzer found iat/exp
  // beyond the year 2262, or a huge float, overflowing the nanosecond clock: undefined
  // behaviour).
  for (const char* claims :
       {R"("iat":1,"exp":9223372036854775807)", R"("iat":-9223372036854775807,"exp":2000000000)",
        R"("iat":1,"exp":-1)", R"("iat":1,"exp":6.6e123)", R"("iat":1,"exp":"2000000000")",
        R"("iat":1)"}) {
    std::string payload =
        std::string(R"({"iss":")") + kServiceAccountIssuer + R"(","aud":["quartermaster"],)" +
        claims + R"(,"kubernetes.io":{"namespace":"a","serviceaccount":{"name":"b","uid":"c"}}})";
    auto r = VerifyServiceAccountToken(key_, SignServiceAccountPayload(key_, payload), now_);
    EXPECT_TRUE(absl::IsUnauthenticated(r.status())) << claims;
  }
  // The same shape with times in range verifies: the refusals above are about the times.
  std::string good =
      std::string(R"({"iss":")") + kServiceAccountIssuer +
      R"(","aud":["quartermaster"],"iat":1800000000,"exp":1800003600,)"
      R"("kubernetes.io":{"namespace":"a","serviceaccount":{"name":"b","uid":"c"}}})";
  auto r = VerifyServiceAccountToken(key_, SignServiceAccountPayload(key_, good), now_);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->name, "b");
}

}  // namespace
}  // namespace qm::auth
