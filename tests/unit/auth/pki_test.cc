// The first-start PKI: CA and serving certificate on disk, client certificates, kubeconfigs.
// Certificates are checked with OpenSSL itself (and the openssl CLI where installed), never by
// re-reading what the code under test says it wrote.
#include "auth/pki.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace qm::auth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteAll(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
}

int Mode(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int>(st.st_mode & 07777);
}

X509Ptr Cert(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  return X509Ptr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

PkeyPtr Key(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  return PkeyPtr(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
}

// "" when `cert_pem` chains to `ca_pem` for `purpose`; otherwise OpenSSL's reason.
std::string VerifyError(const std::string& ca_pem, const std::string& cert_pem, int purpose) {
  X509Ptr ca = Cert(ca_pem);
  X509Ptr cert = Cert(cert_pem);
  if (!ca || !cert) return "unparseable";
  std::unique_ptr<X509_STORE, decltype(&X509_STORE_free)> store(X509_STORE_new(), X509_STORE_free);
  std::unique_ptr<X509_STORE_CTX, decltype(&X509_STORE_CTX_free)> ctx(X509_STORE_CTX_new(),
                                                                      X509_STORE_CTX_free);
  X509_STORE_add_cert(store.get(), ca.get());
  X509_STORE_CTX_init(ctx.get(), store.get(), cert.get(), nullptr);
  X509_STORE_CTX_set_purpose(ctx.get(), purpose);
  if (X509_verify_cert(ctx.get()) == 1) return "";
  return X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get()));
}

// Seconds from now until the certificate's notAfter.
long SecondsLeft(X509* cert) {
  int days = 0, secs = 0;
  ASN1_TIME_diff(&days, &secs, nullptr, X509_get0_notAfter(cert));
  return days * 86400L + secs;
}

// Runs a shell command; its exit status and combined output.
std::pair<int, std::string> Shell(const std::string& command) {
  std::string out;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, ""};
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

bool HaveTool(const std::string& tool) {
  return Shell("command -v " + tool + " >/dev/null").first == 0;
}

class PkiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/qm_pki_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/pki";
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  ServerPki MustEnsure(const std::vector<std::string>& dns = {},
                       const std::vector<std::string>& ips = {}) {
    auto pki = EnsureServerPki(dir_, dns, ips);
    EXPECT_TRUE(pki.ok()) << pki.status();
    return pki.ok() ? *pki : ServerPki{};
  }

  std::string root_;
  std::string dir_;
};

TEST_F(PkiTest, FirstStartCreatesCaAndServingCertificateWithPrivateModes) {
  ServerPki pki = MustEnsure();
  EXPECT_TRUE(pki.created);
  EXPECT_EQ(pki.dir, dir_);
  EXPECT_EQ(pki.ca_cert_file, dir_ + "/ca.crt");
  EXPECT_EQ(pki.ca_key_file, dir_ + "/ca.key");
  EXPECT_EQ(pki.server_cert_file, dir_ + "/server.crt");
  EXPECT_EQ(pki.server_key_file, dir_ + "/server.key");
  EXPECT_EQ(Mode(dir_), 0700);
  EXPECT_EQ(Mode(pki.ca_key_file), 0600);
  EXPECT_EQ(Mode(pki.server_key_file), 0600);
  EXPECT_EQ(Mode(pki.ca_cert_file), 0644);
  EXPECT_EQ(Mode(pki.server_cert_file), 0644);
  EXPECT_EQ(pki.ca_cert_pem, ReadAll(pki.ca_cert_file));

  X509Ptr ca = Cert(pki.ca_cert_pem);
  ASSERT_TRUE(ca);
  EXPECT_EQ(X509_check_ca(ca.get()), 1);
  char cn[128] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(ca.get()), NID_commonName, cn, sizeof(cn));
  EXPECT_STREQ(cn, "quartermaster-ca");
  EXPECT_EQ(EVP_PKEY_get_base_id(X509_get0_pubkey(ca.get())), EVP_PKEY_EC);
  EXPECT_GT(SecondsLeft(ca.get()), 9L * 365 * 86400);
  PkeyPtr ca_key = Key(ReadAll(pki.ca_key_file));
  ASSERT_TRUE(ca_key);
  EXPECT_EQ(X509_check_private_key(ca.get(), ca_key.get()), 1);

  // No temporary files are left behind.
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    ++entries;
    EXPECT_THAT(e.path().filename().string(), Not(HasSubstr(".tmp")));
  }
  EXPECT_EQ(entries, 4);
}

TEST_F(PkiTest, ExistingDirectoryIsMadePrivate) {
  ASSERT_EQ(mkdir(dir_.c_str(), 0755), 0);
  ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
  MustEnsure();
  EXPECT_EQ(Mode(dir_), 0700);
}

TEST_F(PkiTest, LaterStartsReuseTheCaAndServingCertificate) {
  ServerPki first = MustEnsure({"gpu.example.com"}, {"10.1.2.3"});
  std::string server_crt = ReadAll(first.server_cert_file);
  std::string server_key = ReadAll(first.server_key_file);
  ServerPki second = MustEnsure({"gpu.example.com"}, {"10.1.2.3"});
  EXPECT_FALSE(second.created);
  EXPECT_EQ(second.ca_cert_pem, first.ca_cert_pem);
  EXPECT_EQ(ReadAll(second.server_cert_file), server_crt);
  EXPECT_EQ(ReadAll(second.server_key_file), server_key);
}

TEST_F(PkiTest, ServingCertificateVerifiesAndNamesTheRequestedHosts) {
  ServerPki pki = MustEnsure({"gpu.example.com"}, {"10.1.2.3", "[fd00::7]"});
  std::string cert_pem = ReadAll(pki.server_cert_file);
  EXPECT_EQ(VerifyError(pki.ca_cert_pem, cert_pem, X509_PURPOSE_SSL_SERVER), "");
  // A serving certificate is not a client credential.
  EXPECT_NE(VerifyError(pki.ca_cert_pem, cert_pem, X509_PURPOSE_SSL_CLIENT), "");

  X509Ptr cert = Cert(cert_pem);
  ASSERT_TRUE(cert);
  EXPECT_EQ(X509_check_host(cert.get(), "localhost", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_host(cert.get(), "gpu.example.com", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_host(cert.get(), "other.example.com", 0, 0, nullptr), 0);
  for (const char* ip : {"127.0.0.1", "::1", "10.1.2.3", "fd00::7"}) {
    EXPECT_EQ(X509_check_ip_asc(cert.get(), ip, 0), 1) << ip;
  }
  EXPECT_EQ(X509_check_ip_asc(cert.get(), "10.1.2.4", 0), 0);
  EXPECT_TRUE(X509_get_extended_key_usage(cert.get()) & XKU_SSL_SERVER);
  EXPECT_FALSE(X509_get_extended_key_usage(cert.get()) & XKU_SSL_CLIENT);
  char cn[128] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert.get()), NID_commonName, cn, sizeof(cn));
  EXPECT_STREQ(cn, "quartermaster");
  long left = SecondsLeft(cert.get());
  EXPECT_GT(left, 364L * 86400);
  EXPECT_LE(left, 366L * 86400);

  PkeyPtr key = Key(ReadAll(pki.server_key_file));
  ASSERT_TRUE(key);
  EXPECT_EQ(X509_check_private_key(cert.get(), key.get()), 1);
}

TEST_F(PkiTest, NewAddressReissuesOnlyTheServingCertificate) {
  ServerPki first = MustEnsure({}, {"10.1.2.3"});
  std::string ca_key = ReadAll(first.ca_key_file);
  std::string old_cert = ReadAll(first.server_cert_file);
  ServerPki second = MustEnsure({}, {"10.9.9.9"});
  EXPECT_FALSE(second.created);
  EXPECT_EQ(second.ca_cert_pem, first.ca_cert_pem);
  EXPECT_EQ(ReadAll(second.ca_key_file), ca_key);
  std::string new_cert = ReadAll(second.server_cert_file);
  EXPECT_NE(new_cert, old_cert);
  EXPECT_EQ(VerifyError(second.ca_cert_pem, new_cert, X509_PURPOSE_SSL_SERVER), "");
  X509Ptr cert = Cert(new_cert);
  ASSERT_TRUE(cert);
  EXPECT_EQ(X509_check_ip_asc(cert.get(), "10.9.9.9", 0), 1);
  PkeyPtr key = Key(ReadAll(second.server_key_file));
  ASSERT_TRUE(key);
  EXPECT_EQ(X509_check_private_key(cert.get(), key.get()), 1);
}

TEST_F(PkiTest, ServingCertificateExpiringWithinThirtyDaysIsRenewed) {
  ServerPki pki = MustEnsure();
  // Replace the serving certificate with one the same CA signed for 10 days only.
  X509Ptr ca = Cert(pki.ca_cert_pem);
  PkeyPtr ca_key = Key(ReadAll(pki.ca_key_file));
  ASSERT_TRUE(ca && ca_key);
  PkeyPtr key(EVP_EC_gen("P-256"));
  X509Ptr cert(X509_new());
  ASSERT_TRUE(key && cert);
  X509_set_version(cert.get(), X509_VERSION_3);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 42);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 10L * 86400);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME_add_entry_by_txt(X509_get_subject_name(cert.get()), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("quartermaster"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), X509_get_subject_name(ca.get()));
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, ca.get(), cert.get(), nullptr, nullptr, 0);
  X509_EXTENSION* san =
      X509V3_EXT_conf_nid(nullptr, &ctx, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1,IP:::1");
  ASSERT_NE(san, nullptr);
  X509_add_ext(cert.get(), san, -1);
  X509_EXTENSION_free(san);
  ASSERT_GT(X509_sign(cert.get(), ca_key.get(), EVP_sha256()), 0);
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  PEM_write_bio_X509(bio.get(), cert.get());
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);
  std::string short_pem(data, static_cast<size_t>(len));
  ASSERT_EQ(VerifyError(pki.ca_cert_pem, short_pem, X509_PURPOSE_ANY), "");
  WriteAll(pki.server_cert_file, short_pem);
  std::unique_ptr<BIO, decltype(&BIO_free)> kbio(BIO_new(BIO_s_mem()), BIO_free);
  PEM_write_bio_PrivateKey(kbio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  len = BIO_get_mem_data(kbio.get(), &data);
  WriteAll(pki.server_key_file, std::string(data, static_cast<size_t>(len)));

  ServerPki again = MustEnsure();
  EXPECT_FALSE(again.created);
  EXPECT_EQ(again.ca_cert_pem, pki.ca_cert_pem);
  std::string renewed = ReadAll(again.server_cert_file);
  EXPECT_NE(renewed, short_pem);
  X509Ptr renewed_cert = Cert(renewed);
  ASSERT_TRUE(renewed_cert);
  EXPECT_GT(SecondsLeft(renewed_cert.get()), 300L * 86400);
  EXPECT_EQ(VerifyError(again.ca_cert_pem, renewed, X509_PURPOSE_SSL_SERVER), "");
}

TEST_F(PkiTest, UnreadableServingCertificateIsReissued) {
  ServerPki pki = MustEnsure();
  WriteAll(pki.server_cert_file, "garbage");
  ServerPki again = MustEnsure();
  EXPECT_EQ(
      VerifyError(again.ca_cert_pem, ReadAll(again.server_cert_file), X509_PURPOSE_SSL_SERVER), "");
}

TEST_F(PkiTest, ClientCertificateCarriesUserAndGroupsAndVerifies) {
  MustEnsure();
  // A later process (the credential CLI) loads the directory without creating anything.
  auto pki = LoadServerPki(dir_);
  ASSERT_TRUE(pki.ok()) << pki.status();
  EXPECT_FALSE(pki->created);
  EXPECT_EQ(pki->ca_cert_pem, ReadAll(dir_ + "/ca.crt"));
  auto issued = IssueClientCertificate(*pki, "system:node:gpu-a", {"system:nodes", "team-a"}, 30);
  ASSERT_TRUE(issued.ok()) << issued.status();

  EXPECT_EQ(VerifyError(pki->ca_cert_pem, issued->cert_pem, X509_PURPOSE_SSL_CLIENT), "");
  EXPECT_NE(VerifyError(pki->ca_cert_pem, issued->cert_pem, X509_PURPOSE_SSL_SERVER), "");
  X509Ptr cert = Cert(issued->cert_pem);
  PkeyPtr key = Key(issued->key_pem);
  ASSERT_TRUE(cert && key);
  EXPECT_EQ(X509_check_private_key(cert.get(), key.get()), 1);
  EXPECT_EQ(EVP_PKEY_get_base_id(key.get()), EVP_PKEY_EC);
  long left = SecondsLeft(cert.get());
  EXPECT_GT(left, 29L * 86400);
  EXPECT_LE(left, 30L * 86400 + 60);

  // The subject as OpenSSL prints it, and as SubjectOfCertificatePem reads it.
  char line[256] = {};
  X509_NAME_oneline(X509_get_subject_name(cert.get()), line, sizeof(line));
  EXPECT_STREQ(line, "/O=system:nodes/O=team-a/CN=system:node:gpu-a");
  auto subject = SubjectOfCertificatePem(issued->cert_pem);
  ASSERT_TRUE(subject.ok()) << subject.status();
  EXPECT_EQ(subject->first, "system:node:gpu-a");
  EXPECT_THAT(subject->second, ElementsAre("system:nodes", "team-a"));

  // Two certificates never share a key or serial number.
  auto other = IssueClientCertificate(*pki, "alice", {}, 1);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(other->key_pem, issued->key_pem);
  X509Ptr other_cert = Cert(other->cert_pem);
  ASSERT_TRUE(other_cert);
  EXPECT_NE(ASN1_INTEGER_cmp(X509_get0_serialNumber(cert.get()),
                             X509_get0_serialNumber(other_cert.get())),
            0);
  auto alice = SubjectOfCertificatePem(other->cert_pem);
  ASSERT_TRUE(alice.ok());
  EXPECT_EQ(alice->first, "alice");
  EXPECT_TRUE(alice->second.empty());
}

TEST_F(PkiTest, ClientCertificateArgumentsAreChecked) {
  ServerPki pki = MustEnsure();
  EXPECT_EQ(IssueClientCertificate(pki, "", {}, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(IssueClientCertificate(pki, "alice", {""}, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(IssueClientCertificate(pki, "alice", {}, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto long_cn = IssueClientCertificate(pki, std::string(65, 'a'), {}, 1);
  EXPECT_EQ(long_cn.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ERR_peek_error(), 0u) << "the OpenSSL error queue is left empty";
  EXPECT_TRUE(IssueClientCertificate(pki, std::string(64, 'a'), {}, 1).ok());
}

TEST_F(PkiTest, SubjectOfGarbageIsAnError) {
  EXPECT_EQ(SubjectOfCertificatePem("not a certificate").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST_F(PkiTest, LoadingAMissingPkiIsNotFoundAndCreatesNothing) {
  auto pki = LoadServerPki(dir_);
  EXPECT_EQ(pki.status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir_));
}

TEST_F(PkiTest, CorruptCaKeyIsAnErrorNamingTheFile) {
  ServerPki pki = MustEnsure();
  WriteAll(pki.ca_key_file, "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
  auto again = EnsureServerPki(dir_, {}, {});
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(), HasSubstr(pki.ca_key_file));
  EXPECT_EQ(ERR_peek_error(), 0u) << "the OpenSSL error queue is left empty";
  auto loaded = LoadServerPki(dir_);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kFailedPrecondition);
  auto issued = IssueClientCertificate(pki, "alice", {}, 1);
  EXPECT_EQ(issued.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(issued.status().message(), HasSubstr(pki.ca_key_file));
}

TEST_F(PkiTest, CorruptCaCertificateIsAnErrorNamingTheFile) {
  ServerPki pki = MustEnsure();
  WriteAll(pki.ca_cert_file, "garbage");
  auto again = EnsureServerPki(dir_, {}, {});
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(), HasSubstr(pki.ca_cert_file));
}

TEST_F(PkiTest, CaKeyFromAnotherCaIsRefused) {
  ServerPki pki = MustEnsure();
  std::string other_root = root_ + "/other";
  auto other = EnsureServerPki(other_root, {}, {});
  ASSERT_TRUE(other.ok()) << other.status();
  WriteAll(pki.ca_key_file, ReadAll(other->ca_key_file));
  auto again = EnsureServerPki(dir_, {}, {});
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(), HasSubstr("does not match"));
}

TEST_F(PkiTest, KeyWithoutCertificateIsReportedNotReplaced) {
  // What a crash between the CA's two writes at first start leaves behind.
  ServerPki pki = MustEnsure();
  std::string ca_key = ReadAll(pki.ca_key_file);
  ASSERT_EQ(unlink(pki.ca_cert_file.c_str()), 0);
  auto again = EnsureServerPki(dir_, {}, {});
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(), HasSubstr(pki.ca_cert_file));
  EXPECT_EQ(ReadAll(pki.ca_key_file), ca_key);
  EXPECT_FALSE(std::filesystem::exists(pki.ca_cert_file));
}

TEST_F(PkiTest, EncryptedCaKeyIsRefused) {
  ServerPki pki = MustEnsure();
  PkeyPtr key = Key(ReadAll(pki.ca_key_file));
  ASSERT_TRUE(key);
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  static const char kPass[] = "secret";
  ASSERT_EQ(PEM_write_bio_PKCS8PrivateKey(bio.get(), key.get(), EVP_aes_256_cbc(), nullptr, 0,
                                          nullptr, const_cast<char*>(kPass)),
            1);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);
  WriteAll(pki.ca_key_file, std::string(data, static_cast<size_t>(len)));
  auto again = EnsureServerPki(dir_, {}, {});
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(), HasSubstr(pki.ca_key_file));
}

TEST_F(PkiTest, InvalidNamesAreRejectedBeforeAnythingIsWritten) {
  for (const auto& [dns, ips] :
       std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>>{
           {{"a.example.com,DNS:evil.example.com"}, {}},
           {{"bad name"}, {}},
           {{""}, {}},
           {{}, {"not-an-ip"}},
           {{}, {"10.0.0.1:8080"}},
           {{}, {"10.0.0.1,IP:10.0.0.2"}}}) {
    auto pki = EnsureServerPki(dir_, dns, ips);
    EXPECT_EQ(pki.status().code(), absl::StatusCode::kInvalidArgument)
        << (dns.empty() ? ips[0] : dns[0]);
  }
  EXPECT_FALSE(std::filesystem::exists(dir_));
  // Host names with an underscore, wildcards and bracketed IPv6 are accepted.
  ServerPki pki = MustEnsure({"build_host", "*.gpu.example.com"}, {"[fd00::1]"});
  X509Ptr cert = Cert(ReadAll(pki.server_cert_file));
  ASSERT_TRUE(cert);
  EXPECT_EQ(X509_check_host(cert.get(), "a.gpu.example.com", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_ip_asc(cert.get(), "fd00::1", 0), 1);
}

TEST_F(PkiTest, ConcurrentFirstStartsAgreeOnOneCa) {
  absl::StatusOr<ServerPki> a, b;
  std::thread ta([&] { a = EnsureServerPki(dir_, {}, {}); });
  std::thread tb([&] { b = EnsureServerPki(dir_, {}, {}); });
  ta.join();
  tb.join();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->ca_cert_pem, b->ca_cert_pem);
  EXPECT_NE(a->created, b->created) << "exactly one call creates the CA";
  auto loaded = LoadServerPki(dir_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->ca_cert_pem, a->ca_cert_pem);
}

TEST_F(PkiTest, OpensslCliVerifiesServingAndClientCertificates) {
  if (!HaveTool("openssl")) GTEST_SKIP() << "no openssl CLI on this machine";
  ServerPki pki = MustEnsure({"gpu.example.com"}, {});
  auto client = IssueClientCertificate(pki, "alice", {"team-a"}, 7);
  ASSERT_TRUE(client.ok()) << client.status();
  std::string client_file = root_ + "/alice.crt";
  WriteAll(client_file, client->cert_pem);

  auto server = Shell(absl::StrCat("openssl verify -CAfile ", pki.ca_cert_file,
                                   " -purpose sslserver -verify_hostname gpu.example.com ",
                                   pki.server_cert_file));
  EXPECT_EQ(server.first, 0) << server.second;
  EXPECT_THAT(server.second, HasSubstr(": OK"));
  auto wrong_host =
      Shell(absl::StrCat("openssl verify -CAfile ", pki.ca_cert_file,
                         " -verify_hostname elsewhere.example.com ", pki.server_cert_file));
  EXPECT_NE(wrong_host.first, 0) << wrong_host.second;
  auto user = Shell(absl::StrCat("openssl verify -CAfile ", pki.ca_cert_file,
                                 " -purpose sslclient ", client_file));
  EXPECT_EQ(user.first, 0) << user.second;
  auto subject = Shell("openssl x509 -noout -subject -nameopt compat -in " + client_file);
  EXPECT_EQ(subject.first, 0) << subject.second;
  EXPECT_THAT(subject.second, HasSubstr("/O=team-a/CN=alice"));
}

TEST(KubeconfigTest, TokenUserCarriesTheCaAndServer) {
  const std::string ca = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  std::string yaml =
      RenderKubeconfig("https://10.0.0.5:8443", ca, KubeconfigUser{"admin", "tok123", "", ""});
  EXPECT_THAT(yaml, HasSubstr("server: \"https://10.0.0.5:8443\"\n"));
  EXPECT_THAT(yaml, HasSubstr("token: \"tok123\"\n"));
  EXPECT_THAT(yaml, HasSubstr("current-context: quartermaster\n"));
  EXPECT_THAT(yaml, Not(HasSubstr("client-certificate-data")));
  // The CA line decodes back to the PEM.
  const std::string key = "certificate-authority-data: ";
  size_t at = yaml.find(key);
  ASSERT_NE(at, std::string::npos);
  size_t end = yaml.find('\n', at);
  std::string decoded;
  ASSERT_TRUE(absl::Base64Unescape(yaml.substr(at + key.size(), end - at - key.size()), &decoded));
  EXPECT_EQ(decoded, ca);
}

TEST(KubeconfigTest, CertificateUserAndNoCa) {
  std::string yaml =
      RenderKubeconfig("https://h:1", "", KubeconfigUser{"system:node:a", "", "CERT\n", "KEY\n"});
  EXPECT_THAT(yaml, Not(HasSubstr("certificate-authority-data")));
  EXPECT_THAT(yaml, Not(HasSubstr("token:")));
  EXPECT_THAT(yaml, HasSubstr("client-certificate-data: Q0VSVAo=\n"));  // base64("CERT\n")
  EXPECT_THAT(yaml, HasSubstr("client-key-data: S0VZCg==\n"));          // base64("KEY\n")
  EXPECT_THAT(yaml, HasSubstr("- name: \"system:node:a\"\n"));
}

// kubectl reads what we render, odd user names included.
TEST_F(PkiTest, KubectlReadsTheKubeconfig) {
  if (!HaveTool("kubectl")) GTEST_SKIP() << "no kubectl on this machine";
  ServerPki pki = MustEnsure();
  auto cert = IssueClientCertificate(pki, "o'brien \"x\": #1", {}, 1);
  ASSERT_TRUE(cert.ok()) << cert.status();
  std::string path = root_ + "/kubeconfig";
  ASSERT_TRUE(WriteFileAtomically(path,
                                  RenderKubeconfig("https://127.0.0.1:6443", pki.ca_cert_pem,
                                                   KubeconfigUser{"o'brien \"x\": #1", "",
                                                                  cert->cert_pem, cert->key_pem}),
                                  0600)
                  .ok());
  auto user = Shell("kubectl config view --kubeconfig " + path +
                    " -o jsonpath='{.contexts[0].context.user}|{.clusters[0].cluster.server}'");
  EXPECT_EQ(user.first, 0) << user.second;
  EXPECT_EQ(user.second, "o'brien \"x\": #1|https://127.0.0.1:6443");
  auto ca = Shell("kubectl config view --raw --kubeconfig " + path +
                  " -o jsonpath='{.clusters[0].cluster.certificate-authority-data}'");
  std::string decoded;
  ASSERT_TRUE(absl::Base64Unescape(ca.second, &decoded)) << ca.second;
  EXPECT_EQ(decoded, pki.ca_cert_pem);
}

TEST_F(PkiTest, WriteFileAtomicallyReplacesWithExactMode) {
  std::string path = root_ + "/secret";
  WriteAll(path, "old contents that are longer");
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  mode_t old_umask = umask(0);
  absl::Status st = WriteFileAtomically(path, "new", 0600);
  umask(old_umask);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(ReadAll(path), "new");
  EXPECT_EQ(Mode(path), 0600);
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(root_)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1) << "no temporary file is left behind";

  absl::Status missing = WriteFileAtomically(root_ + "/no/such/dir/file", "x", 0600);
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(missing.message(), HasSubstr(root_ + "/no/such/dir/file"));
}

TEST(RandomSecretTest, HexOfTheRequestedEntropy) {
  std::string a = RandomSecret(32);
  std::string b = RandomSecret(32);
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace qm::auth
