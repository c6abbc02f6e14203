#include "auth/pki.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace qm::auth {
namespace {

struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct BioFree {
  void operator()(BIO* p) const { BIO_free(p); }
};
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using BioPtr = std::unique_ptr<BIO, BioFree>;

constexpr int kCaDays = 3650;
constexpr int kServingDays = 365;
constexpr long kRenewBeforeSeconds = 30L * 24 * 3600;

std::string BioString(BIO* bio) {
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(len));
}

std::string CertPem(X509* x) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), x);
  return BioString(bio.get());
}

std::string KeyPem(EVP_PKEY* k) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), k, nullptr, nullptr, 0, nullptr, nullptr);
  return BioString(bio.get());
}

X509Ptr ParseCert(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return X509Ptr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

PkeyPtr ParseKey(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return PkeyPtr(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

bool AddExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

struct Subject {
  std::string common_name;
  std::vector<std::string> organizations;
};

// A new certificate for a new P-256 key. `issuer`/`issuer_key` null: self-signed.
absl::StatusOr<std::pair<X509Ptr, PkeyPtr>> NewCert(
    const Subject& subject, int days, X509* issuer, EVP_PKEY* issuer_key,
    const std::vector<std::pair<int, std::string>>& extensions) {
  PkeyPtr key(EVP_EC_gen("P-256"));
  X509Ptr cert(X509_new());
  if (!key || !cert) return absl::InternalError("cannot generate a key");
  X509_set_version(cert.get(), 2);
  std::unique_ptr<BIGNUM, decltype(&BN_free)> serial(BN_new(), BN_free);
  BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY);
  BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get()));
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);  // tolerate small clock skew
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(days) * 24 * 3600);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  for (const auto& o : subject.organizations) {
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(o.c_str()), -1, -1, 0);
  }
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(subject.common_name.c_str()),
                             -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  for (const auto& [nid, value] : extensions) {
    if (!AddExt(cert.get(), signer, nid, value)) {
      return absl::InternalError(absl::StrCat("cannot add certificate extension ", value));
    }
  }
  if (X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key.get(), EVP_sha256()) == 0) {
    return absl::InternalError("cannot sign a certificate");
  }
  return std::make_pair(std::move(cert), std::move(key));
}

// The DNS names and IP addresses (as text) of a certificate's subjectAltName.
std::set<std::string> SubjectAltNames(X509* cert) {
  std::set<std::string> out;
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* gn = sk_GENERAL_NAME_value(names, i);
    if (gn->type == GEN_DNS) {
      const ASN1_STRING* s = gn->d.dNSName;
      out.emplace(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                  static_cast<size_t>(ASN1_STRING_length(s)));
    } else if (gn->type == GEN_IPADD) {
      const ASN1_STRING* s = gn->d.iPAddress;
      char text[INET6_ADDRSTRLEN] = {};
      int len = ASN1_STRING_length(s);
      if (len == 4 || len == 16) {
        inet_ntop(len == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(s), text, sizeof(text));
        out.insert(text);
      }
    }
  }
  GENERAL_NAMES_free(names);
  return out;
}

// A DNS name or address safe to place in an OpenSSL extension string.
bool SafeSanValue(const std::string& v) {
  if (v.empty() || v.size() > 253) return false;
  for (char c : v) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != ':' &&
        c != '*') {
      return false;
    }
  }
  return true;
}

// Canonical text of an IP address, or "" when it is not one.
std::string CanonicalIp(const std::string& ip) {
  unsigned char buf[16];
  char text[INET6_ADDRSTRLEN] = {};
  if (inet_pton(AF_INET, ip.c_str(), buf) == 1) {
    inet_ntop(AF_INET, buf, text, sizeof(text));
    return text;
  }
  if (inet_pton(AF_INET6, ip.c_str(), buf) == 1) {
    inet_ntop(AF_INET6, buf, text, sizeof(text));
    return text;
  }
  return "";
}

ServerPki PathsFor(const std::string& dir) {
  ServerPki p;
  p.dir = dir;
  p.ca_cert_file = dir + "/ca.crt";
  p.ca_key_file = dir + "/ca.key";
  p.server_cert_file = dir + "/server.crt";
  p.server_key_file = dir + "/server.key";
  return p;
}

absl::StatusOr<std::pair<X509Ptr, PkeyPtr>> LoadCa(const ServerPki& p) {
  std::string cert_pem, key_pem;
  if (!ReadFile(p.ca_cert_file, &cert_pem)) {
    return absl::FailedPreconditionError("cannot read " + p.ca_cert_file);
  }
  if (!ReadFile(p.ca_key_file, &key_pem)) {
    return absl::FailedPreconditionError("cannot read " + p.ca_key_file);
  }
  X509Ptr cert = ParseCert(cert_pem);
  if (!cert) return absl::FailedPreconditionError(p.ca_cert_file + " is not a PEM certificate");
  PkeyPtr key = ParseKey(key_pem);
  if (!key) return absl::FailedPreconditionError(p.ca_key_file + " is not a PEM private key");
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return absl::FailedPreconditionError(p.ca_key_file + " does not match " + p.ca_cert_file);
  }
  return std::make_pair(std::move(cert), std::move(key));
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, const std::string& contents,
                                 mode_t mode) {
  std::string tmp = path + ".tmp-" + RandomSecret(6);
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create ", tmp, ": ", std::strerror(errno)));
  }
  fchmod(fd, mode);  // the umask may have narrowed it; never widened beyond `mode`
  size_t off = 0;
  while (off < contents.size()) {
    ssize_t n = write(fd, contents.data() + off, contents.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string err = std::strerror(errno);
      close(fd);
      unlink(tmp.c_str());
      return absl::FailedPreconditionError(absl::StrCat("cannot write ", path, ": ", err));
    }
    off += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0 || close(fd) != 0 || rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = std::strerror(errno);
    unlink(tmp.c_str());
    return absl::FailedPreconditionError(absl::StrCat("cannot write ", path, ": ", err));
  }
  return absl::OkStatus();
}

std::string RandomSecret(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(bytes)) != 1) {
    std::abort();  // no entropy: nothing secure can be made
  }
  return absl::BytesToHexString(raw);
}

absl::StatusOr<ServerPki> LoadServerPki(const std::string& dir) {
  ServerPki p = PathsFor(dir);
  if (!Exists(p.ca_cert_file)) return absl::NotFoundError("no CA in " + dir);
  auto ca = LoadCa(p);
  if (!ca.ok()) return ca.status();
  p.ca_cert_pem = CertPem(ca->first.get());
  return p;
}

absl::StatusOr<ServerPki> EnsureServerPki(const std::string& dir,
                                          const std::vector<std::string>& dns_names,
                                          const std::vector<std::string>& ip_addresses) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create ", dir, ": ", std::strerror(errno)));
  }
  chmod(dir.c_str(), 0700);
  ServerPki p = PathsFor(dir);
  X509Ptr ca_cert;
  PkeyPtr ca_key;
  if (Exists(p.ca_cert_file) || Exists(p.ca_key_file)) {
    auto ca = LoadCa(p);
    if (!ca.ok()) return ca.status();
    ca_cert = std::move(ca->first);
    ca_key = std::move(ca->second);
  } else {
    auto ca = NewCert({"quartermaster-ca", {}}, kCaDays, nullptr, nullptr,
                      {{NID_basic_constraints, "critical,CA:TRUE"},
                       {NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature"},
                       {NID_subject_key_identifier, "hash"}});
    if (!ca.ok()) return ca.status();
    ca_cert = std::move(ca->first);
    ca_key = std::move(ca->second);
    // Key first: a crash between the two writes leaves a key without a certificate, which the
    // next start reports instead of silently minting a second CA.
    if (auto st = WriteFileAtomically(p.ca_key_file, KeyPem(ca_key.get()), 0600); !st.ok()) {
      return st;
    }
    if (auto st = WriteFileAtomically(p.ca_cert_file, CertPem(ca_cert.get()), 0644); !st.ok()) {
      return st;
    }
    p.created = true;
  }
  p.ca_cert_pem = CertPem(ca_cert.get());

  std::set<std::string> want_dns = {"localhost"};
  std::set<std::string> want_ips = {"127.0.0.1", "::1"};
  for (const auto& d : dns_names) {
    if (SafeSanValue(d)) want_dns.insert(d);
  }
  for (const auto& ip : ip_addresses) {
    std::string c = CanonicalIp(ip);
    if (!c.empty()) want_ips.insert(c);
  }

  bool issue = true;
  std::string pem, key_pem;
  if (ReadFile(p.server_cert_file, &pem) && ReadFile(p.server_key_file, &key_pem)) {
    X509Ptr cert = ParseCert(pem);
    PkeyPtr key = ParseKey(key_pem);
    if (cert && key && X509_check_private_key(cert.get(), key.get()) == 1) {
      EVP_PKEY* ca_pub = X509_get0_pubkey(ca_cert.get());
      std::set<std::string> have = SubjectAltNames(cert.get());
      time_t renew_at = std::time(nullptr) + kRenewBeforeSeconds;
      bool has_all = true;
      for (const auto& n : want_dns) has_all = has_all && have.count(n) > 0;
      for (const auto& n : want_ips) has_all = has_all && have.count(n) > 0;
      issue = !has_all || X509_verify(cert.get(), ca_pub) != 1 ||
              X509_cmp_time(X509_get0_notAfter(cert.get()), &renew_at) < 0;
    }
  }
  if (issue) {
    std::vector<std::string> sans;
    for (const auto& n : want_dns) sans.push_back("DNS:" + n);
    for (const auto& n : want_ips) sans.push_back("IP:" + n);
    auto server = NewCert({"quartermaster", {}}, kServingDays, ca_cert.get(), ca_key.get(),
                          {{NID_basic_constraints, "critical,CA:FALSE"},
                           {NID_key_usage, "critical,digitalSignature,keyEncipherment"},
                           {NID_ext_key_usage, "serverAuth"},
                           {NID_authority_key_identifier, "keyid"},
                           {NID_subject_alt_name, absl::StrJoin(sans, ",")}});
    if (!server.ok()) return server.status();
    if (auto st = WriteFileAtomically(p.server_key_file, KeyPem(server->second.get()), 0600);
        !st.ok()) {
      return st;
    }
    if (auto st = WriteFileAtomically(p.server_cert_file, CertPem(server->first.get()), 0644);
        !st.ok()) {
      return st;
    }
  }
  return p;
}

absl::StatusOr<CertAndKey> IssueClientCertificate(const ServerPki& pki,
                                                  const std::string& common_name,
                                                  const std::vector<std::string>& organizations,
                                                  int days) {
  if (common_name.empty()) return absl::InvalidArgumentError("a client certificate needs a CN");
  auto ca = LoadCa(pki);
  if (!ca.ok()) return ca.status();
  auto cert = NewCert({common_name, organizations}, days, ca->first.get(), ca->second.get(),
                      {{NID_basic_constraints, "critical,CA:FALSE"},
                       {NID_key_usage, "critical,digitalSignature"},
                       {NID_ext_key_usage, "clientAuth"},
                       {NID_authority_key_identifier, "keyid"}});
  if (!cert.ok()) return cert.status();
  return CertAndKey{CertPem(cert->first.get()), KeyPem(cert->second.get())};
}

absl::StatusOr<std::pair<std::string, std::vector<std::string>>> SubjectOfCertificatePem(
    const std::string& pem) {
  X509Ptr cert = ParseCert(pem);
  if (!cert) return absl::InvalidArgumentError("not a PEM certificate");
  std::pair<std::string, std::vector<std::string>> out;
  X509_NAME* name = X509_get_subject_name(cert.get());
  for (int i = 0; i < X509_NAME_entry_count(name); ++i) {
    X509_NAME_ENTRY* e = X509_NAME_get_entry(name, i);
    int nid = OBJ_obj2nid(X509_NAME_ENTRY_get_object(e));
    unsigned char* utf8 = nullptr;
    int len = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(e));
    if (len < 0) continue;
    std::string value(reinterpret_cast<char*>(utf8), static_cast<size_t>(len));
    OPENSSL_free(utf8);
    if (nid == NID_commonName) out.first = value;
    if (nid == NID_organizationName) out.second.push_back(value);
  }
  return out;
}

std::string RenderKubeconfig(const std::string& server_url, const std::string& ca_cert_pem,
                             const KubeconfigUser& user) {
  auto b64 = [](const std::string& s) { return absl::Base64Escape(s); };
  std::string out =
      "apiVersion: v1\n"
      "kind: Config\n"
      "clusters:\n"
      "- name: quartermaster\n"
      "  cluster:\n"
      "    server: " +
      server_url + "\n";
  if (!ca_cert_pem.empty()) out += "    certificate-authority-data: " + b64(ca_cert_pem) + "\n";
  out +=
      "users:\n"
      "- name: " +
      user.name + "\n  user:\n";
  if (!user.token.empty()) out += "    token: " + user.token + "\n";
  if (!user.client_cert_pem.empty()) {
    out += "    client-certificate-data: " + b64(user.client_cert_pem) + "\n";
    out += "    client-key-data: " + b64(user.client_key_pem) + "\n";
  }
  out +=
      "contexts:\n"
      "- name: quartermaster\n"
      "  context:\n"
      "    cluster: quartermaster\n"
      "    user: " +
      user.name +
      "\n"
      "current-context: quartermaster\n";
  return out;
}

}  // namespace qm::auth
