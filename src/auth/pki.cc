#include "auth/pki.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"

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
struct BnFree {
  void operator()(BIGNUM* p) const { BN_free(p); }
};
struct GeneralNamesFree {
  void operator()(GENERAL_NAMES* p) const { GENERAL_NAMES_free(p); }
};
struct Asn1TimeFree {
  void operator()(ASN1_TIME* p) const { ASN1_TIME_free(p); }
};
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using BioPtr = std::unique_ptr<BIO, BioFree>;
using BnPtr = std::unique_ptr<BIGNUM, BnFree>;
using GeneralNamesPtr = std::unique_ptr<GENERAL_NAMES, GeneralNamesFree>;
using Asn1TimePtr = std::unique_ptr<ASN1_TIME, Asn1TimeFree>;

// Closes a file descriptor (and so drops any flock held through it).
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

constexpr int kCaDays = 3650;
constexpr int kServingDays = 365;
constexpr long kRenewBeforeSeconds = 30L * 24 * 3600;

// The latest error on this thread's OpenSSL error queue, as text, and an empty queue after:
// a stale entry would otherwise be blamed on the next TLS call made on this thread.
std::string OpenSslError() {
  unsigned long code = ERR_peek_last_error();
  ERR_clear_error();
  if (code == 0) return "unknown OpenSSL error";
  char buf[256] = {};
  ERR_error_string_n(code, buf, sizeof(buf));
  return buf;
}

std::string ErrnoText() { return std::strerror(errno); }

std::string BioString(BIO* bio) {
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  if (len <= 0 || data == nullptr) return "";
  return std::string(data, static_cast<size_t>(len));
}

absl::StatusOr<std::string> CertPem(X509* x) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), x) != 1) {
    return absl::InternalError("cannot encode a certificate: " + OpenSslError());
  }
  return BioString(bio.get());
}

absl::StatusOr<std::string> KeyPem(EVP_PKEY* k) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), k, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return absl::InternalError("cannot encode a private key: " + OpenSslError());
  }
  return BioString(bio.get());
}

X509Ptr ParseCert(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  X509Ptr cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert) ERR_clear_error();
  return cert;
}

// Never prompts: OpenSSL's default callback would read a passphrase from the terminal for an
// encrypted key, hanging a server at start. An encrypted key is refused instead.
int NoPassphrase(char* /*buf*/, int /*size*/, int /*rwflag*/, void* /*u*/) { return -1; }

PkeyPtr ParseKey(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  PkeyPtr key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr) : nullptr);
  if (!key) ERR_clear_error();
  return key;
}

// NotFound when `path` does not exist; FailedPrecondition naming it for any other failure.
absl::StatusOr<std::string> ReadFile(const std::string& path) {
  Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    std::string message = absl::StrCat("cannot read ", path, ": ", ErrnoText());
    if (errno == ENOENT) return absl::NotFoundError(message);
    return absl::FailedPreconditionError(message);
  }
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return absl::FailedPreconditionError(absl::StrCat("cannot read ", path, ": ", ErrnoText()));
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// True unless `path` is known not to exist; a file that cannot be examined counts as present so
// that reading it reports why.
bool MayExist(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 || errno != ENOENT;
}

bool AddExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// What to put in a new certificate besides its key and validity.
struct CertSpec {
  std::string common_name;
  std::vector<std::string> organizations;
  int days = 0;
  bool is_ca = false;
  const char* key_usage = nullptr;
  const char* ext_key_usage = nullptr;  // null: none
  std::set<std::string> dns_names;      // validated
  std::set<std::string> ip_addresses;   // canonical text
};

// A subjectAltName built from parts, never from a configuration string, so no name can smuggle
// extra entries in.
absl::Status AddSubjectAltNames(X509* cert, const CertSpec& spec) {
  GeneralNamesPtr names(sk_GENERAL_NAME_new_null());
  if (!names) return absl::InternalError("out of memory");
  auto push = [&](int type, ASN1_STRING* value) {
    GENERAL_NAME* gn = GENERAL_NAME_new();
    if (gn == nullptr || value == nullptr) {
      GENERAL_NAME_free(gn);
      ASN1_STRING_free(value);
      return false;
    }
    GENERAL_NAME_set0_value(gn, type, value);
    if (sk_GENERAL_NAME_push(names.get(), gn) == 0) {
      GENERAL_NAME_free(gn);
      return false;
    }
    return true;
  };
  for (const auto& dns : spec.dns_names) {
    ASN1_IA5STRING* s = ASN1_IA5STRING_new();
    if (s != nullptr && ASN1_STRING_set(s, dns.data(), static_cast<int>(dns.size())) != 1) {
      ASN1_IA5STRING_free(s);
      s = nullptr;
    }
    if (!push(GEN_DNS, s)) return absl::InternalError("cannot add DNS name " + dns);
  }
  for (const auto& ip : spec.ip_addresses) {
    if (!push(GEN_IPADD, a2i_IPADDRESS(ip.c_str()))) {
      return absl::InternalError("cannot add IP address " + ip);
    }
  }
  if (X509_add1_ext_i2d(cert, NID_subject_alt_name, names.get(), 0, X509V3_ADD_DEFAULT) != 1) {
    return absl::InternalError("cannot add subjectAltName: " + OpenSslError());
  }
  return absl::OkStatus();
}

// A new certificate for a new P-256 key, signed by `issuer`/`issuer_key` (both null:
// self-signed) and never valid beyond its issuer.
absl::StatusOr<std::pair<X509Ptr, PkeyPtr>> NewCert(const CertSpec& spec, X509* issuer,
                                                    EVP_PKEY* issuer_key) {
  PkeyPtr key(EVP_EC_gen("P-256"));
  X509Ptr cert(X509_new());
  BnPtr serial(BN_new());
  if (!key || !cert || !serial) {
    return absl::InternalError("cannot generate a key: " + OpenSslError());
  }
  // 127 random bits with the top one set: positive, unique in practice, 16 bytes encoded.
  if (X509_set_version(cert.get(), X509_VERSION_3) != 1 ||
      BN_rand(serial.get(), 127, BN_RAND_TOP_ONE, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr ||
      X509_set_pubkey(cert.get(), key.get()) != 1) {
    return absl::InternalError("cannot fill in a certificate: " + OpenSslError());
  }
  // An hour back tolerates clients whose clocks run a little behind.
  if (X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) == nullptr ||
      X509_time_adj_ex(X509_getm_notAfter(cert.get()), spec.days, 0, nullptr) == nullptr) {
    return absl::InternalError("cannot set a validity period: " + OpenSslError());
  }
  if (issuer != nullptr &&
      ASN1_TIME_compare(X509_get0_notAfter(issuer), X509_get0_notAfter(cert.get())) < 0 &&
      X509_set1_notAfter(cert.get(), X509_get0_notAfter(issuer)) != 1) {
    return absl::InternalError("cannot set a validity period: " + OpenSslError());
  }
  X509_NAME* name = X509_get_subject_name(cert.get());
  for (const auto& o : spec.organizations) {
    if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                                   reinterpret_cast<const unsigned char*>(o.c_str()), -1, -1,
                                   0) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot use organization \"", o, "\" in a certificate: ", OpenSslError()));
    }
  }
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(spec.common_name.c_str()),
                                 -1, -1, 0) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("cannot use common name \"", spec.common_name,
                                                   "\" in a certificate: ", OpenSslError()));
  }
  X509* signer = issuer != nullptr ? issuer : cert.get();
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(signer)) != 1) {
    return absl::InternalError("cannot set an issuer: " + OpenSslError());
  }
  std::vector<std::pair<int, const char*>> extensions = {
      {NID_basic_constraints, spec.is_ca ? "critical,CA:TRUE" : "critical,CA:FALSE"},
      {NID_key_usage, spec.key_usage},
      {NID_subject_key_identifier, "hash"}};
  if (spec.ext_key_usage != nullptr) extensions.push_back({NID_ext_key_usage, spec.ext_key_usage});
  if (issuer != nullptr) extensions.push_back({NID_authority_key_identifier, "keyid"});
  for (const auto& [nid, value] : extensions) {
    if (!AddExt(cert.get(), signer, nid, value)) {
      return absl::InternalError(
          absl::StrCat("cannot add certificate extension ", value, ": ", OpenSslError()));
    }
  }
  if (!spec.dns_names.empty() || !spec.ip_addresses.empty()) {
    QM_RETURN_IF_ERROR(AddSubjectAltNames(cert.get(), spec));
  }
  EVP_PKEY* signing_key = issuer_key != nullptr ? issuer_key : key.get();
  if (X509_sign(cert.get(), signing_key, EVP_sha256()) == 0) {
    return absl::InternalError("cannot sign a certificate: " + OpenSslError());
  }
  return std::make_pair(std::move(cert), std::move(key));
}

// The DNS names and IP addresses (as canonical text) of a certificate's subjectAltName.
std::set<std::string> SubjectAltNames(X509* cert) {
  std::set<std::string> out;
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr) {
    ERR_clear_error();
    return out;
  }
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* gn = sk_GENERAL_NAME_value(names, i);
    if (gn->type == GEN_DNS) {
      const ASN1_STRING* s = gn->d.dNSName;
      out.emplace(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                  static_cast<size_t>(ASN1_STRING_length(s)));
    } else if (gn->type == GEN_IPADD) {
      // i2s_ASN1_IPADDRESS would do, but inet_ntop matches CanonicalIp's form exactly.
      const ASN1_STRING* s = gn->d.iPAddress;
      char text[INET6_ADDRSTRLEN] = {};
      int len = ASN1_STRING_length(s);
      if ((len == 4 || len == 16) &&
          inet_ntop(len == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(s), text, sizeof(text))) {
        out.insert(text);
      }
    }
  }
  GENERAL_NAMES_free(names);
  return out;
}

// Host names as DNS SANs: letters, digits, '.', '-', '_' (some host names carry one), with an
// optional leading wildcard label. Anything else is a mistake worth reporting, not dropping.
bool ValidDnsName(const std::string& name) {
  std::string rest = name.rfind("*.", 0) == 0 ? name.substr(2) : name;
  if (rest.empty() || rest.size() > 253 || rest.front() == '.' || rest.back() == '.') return false;
  for (char c : rest) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') {
      return false;
    }
  }
  return rest.find("..") == std::string::npos;
}

// Canonical text of an IPv4 or IPv6 address ("[::1]" accepted), or "" when it is not one.
std::string CanonicalIp(std::string ip) {
  if (ip.size() > 2 && ip.front() == '[' && ip.back() == ']') ip = ip.substr(1, ip.size() - 2);
  unsigned char buf[16];
  char text[INET6_ADDRSTRLEN] = {};
  for (int family : {AF_INET, AF_INET6}) {
    if (inet_pton(family, ip.c_str(), buf) == 1 &&
        inet_ntop(family, buf, text, sizeof(text)) != nullptr) {
      return text;
    }
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
  auto cert_pem = ReadFile(p.ca_cert_file);
  if (!cert_pem.ok()) return absl::FailedPreconditionError(cert_pem.status().message());
  auto key_pem = ReadFile(p.ca_key_file);
  if (!key_pem.ok()) return absl::FailedPreconditionError(key_pem.status().message());
  X509Ptr cert = ParseCert(*cert_pem);
  if (!cert) return absl::FailedPreconditionError(p.ca_cert_file + " is not a PEM certificate");
  if (X509_check_ca(cert.get()) == 0) {
    return absl::FailedPreconditionError(p.ca_cert_file + " is not a CA certificate");
  }
  PkeyPtr key = ParseKey(*key_pem);
  if (!key) {
    return absl::FailedPreconditionError(p.ca_key_file + " is not an unencrypted PEM private key");
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::FailedPreconditionError(p.ca_key_file + " does not match " + p.ca_cert_file);
  }
  if (X509_cmp_current_time(X509_get0_notAfter(cert.get())) <= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("the CA in ", p.ca_cert_file, " has expired; move ", p.dir,
                     " aside to create a new one (every client then needs the new ca.crt)"));
  }
  return std::make_pair(std::move(cert), std::move(key));
}

absl::Status MakePrivateDir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError(absl::StrCat("cannot create ", dir, ": ", ErrnoText()));
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot examine ", dir, ": ", ErrnoText()));
  }
  if (!S_ISDIR(st.st_mode)) return absl::FailedPreconditionError(dir + " is not a directory");
  if ((st.st_mode & 07777) != 0700 && chmod(dir.c_str(), 0700) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot make ", dir, " private (0700): ", ErrnoText()));
  }
  return absl::OkStatus();
}

// Whether the serving certificate on disk can be kept: readable, matching its key, signed by
// the CA, carrying every wanted name and valid for more than the renewal margin.
bool ServingCertIsCurrent(const ServerPki& p, X509* ca_cert, const CertSpec& want) {
  auto pem = ReadFile(p.server_cert_file);
  auto key_pem = ReadFile(p.server_key_file);
  if (!pem.ok() || !key_pem.ok()) return false;
  X509Ptr cert = ParseCert(*pem);
  PkeyPtr key = ParseKey(*key_pem);
  bool current = cert && key && X509_check_private_key(cert.get(), key.get()) == 1 &&
                 X509_verify(cert.get(), X509_get0_pubkey(ca_cert)) == 1;
  if (current) {
    std::set<std::string> have = SubjectAltNames(cert.get());
    for (const auto& n : want.dns_names) current = current && have.count(n) > 0;
    for (const auto& n : want.ip_addresses) current = current && have.count(n) > 0;
    time_t renew_at = std::time(nullptr) + kRenewBeforeSeconds;
    // 0 is a comparison error: renew rather than trust it.
    current = current && X509_cmp_time(X509_get0_notAfter(cert.get()), &renew_at) > 0;
  }
  ERR_clear_error();
  return current;
}

// A YAML double-quoted scalar: safe for any text (YAML is a superset of JSON's escapes).
std::string YamlQuote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, const std::string& contents,
                                 mode_t mode) {
  std::string tmp = path + ".tmp-" + RandomSecret(6);
  int raw_fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (raw_fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot create ", tmp, ": ", ErrnoText()));
  }
  auto fail = [&](const std::string& what) {
    std::string message = absl::StrCat("cannot ", what, " ", path, ": ", ErrnoText());
    unlink(tmp.c_str());
    return absl::FailedPreconditionError(message);
  };
  {
    Fd fd(raw_fd);
    // The umask may have narrowed `mode`; make it exact (it is never wider than asked).
    if (fchmod(fd.get(), mode) != 0) return fail("set the mode of");
    size_t off = 0;
    while (off < contents.size()) {
      ssize_t n = write(fd.get(), contents.data() + off, contents.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return fail("write");
      off += static_cast<size_t>(n);
    }
    if (fsync(fd.get()) != 0) return fail("sync");
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) return fail("replace");
  // The rename is durable only once the directory entry is.
  size_t slash = path.rfind('/');
  std::string parent = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  Fd dir(open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0 || fsync(dir.get()) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot sync the directory of ", path, ": ", ErrnoText()));
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
  if (!MayExist(p.ca_cert_file)) return absl::NotFoundError("no CA in " + dir);
  QM_ASSIGN_OR_RETURN(auto ca, LoadCa(p));
  QM_ASSIGN_OR_RETURN(p.ca_cert_pem, CertPem(ca.first.get()));
  return p;
}

absl::StatusOr<ServerPki> EnsureServerPki(const std::string& dir,
                                          const std::vector<std::string>& dns_names,
                                          const std::vector<std::string>& ip_addresses) {
  CertSpec serving;
  serving.common_name = "quartermaster";
  serving.days = kServingDays;
  serving.key_usage = "critical,digitalSignature,keyEncipherment";
  serving.ext_key_usage = "serverAuth";
  serving.dns_names = {"localhost"};
  serving.ip_addresses = {"127.0.0.1", "::1"};
  for (const auto& d : dns_names) {
    if (!ValidDnsName(d)) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", d, "\" is not a DNS name for the serving certificate"));
    }
    serving.dns_names.insert(d);
  }
  for (const auto& ip : ip_addresses) {
    std::string canonical = CanonicalIp(ip);
    if (canonical.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", ip, "\" is not an IP address for the serving certificate"));
    }
    serving.ip_addresses.insert(canonical);
  }

  QM_RETURN_IF_ERROR(MakePrivateDir(dir));
  // Two processes starting on one data directory would otherwise each mint a CA and could
  // leave one's key beside the other's certificate.
  Fd lock(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (lock.get() < 0 || flock(lock.get(), LOCK_EX) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot lock ", dir, ": ", ErrnoText()));
  }

  ServerPki p = PathsFor(dir);
  X509Ptr ca_cert;
  PkeyPtr ca_key;
  if (MayExist(p.ca_cert_file) || MayExist(p.ca_key_file)) {
    QM_ASSIGN_OR_RETURN(auto ca, LoadCa(p));
    ca_cert = std::move(ca.first);
    ca_key = std::move(ca.second);
  } else {
    CertSpec ca_spec;
    ca_spec.common_name = "quartermaster-ca";
    ca_spec.days = kCaDays;
    ca_spec.is_ca = true;
    ca_spec.key_usage = "critical,keyCertSign,cRLSign,digitalSignature";
    QM_ASSIGN_OR_RETURN(auto ca, NewCert(ca_spec, nullptr, nullptr));
    ca_cert = std::move(ca.first);
    ca_key = std::move(ca.second);
    QM_ASSIGN_OR_RETURN(std::string ca_key_pem, KeyPem(ca_key.get()));
    QM_ASSIGN_OR_RETURN(std::string ca_cert_pem, CertPem(ca_cert.get()));
    // Key first: a crash between the two writes leaves a key without a certificate, which the
    // next start reports instead of silently minting a second CA.
    QM_RETURN_IF_ERROR(WriteFileAtomically(p.ca_key_file, ca_key_pem, 0600));
    QM_RETURN_IF_ERROR(WriteFileAtomically(p.ca_cert_file, ca_cert_pem, 0644));
    p.created = true;
  }
  QM_ASSIGN_OR_RETURN(p.ca_cert_pem, CertPem(ca_cert.get()));

  if (!ServingCertIsCurrent(p, ca_cert.get(), serving)) {
    QM_ASSIGN_OR_RETURN(auto server, NewCert(serving, ca_cert.get(), ca_key.get()));
    QM_ASSIGN_OR_RETURN(std::string key_pem, KeyPem(server.second.get()));
    QM_ASSIGN_OR_RETURN(std::string cert_pem, CertPem(server.first.get()));
    // A crash between the writes leaves a mismatched pair, which the next start re-issues.
    QM_RETURN_IF_ERROR(WriteFileAtomically(p.server_key_file, key_pem, 0600));
    QM_RETURN_IF_ERROR(WriteFileAtomically(p.server_cert_file, cert_pem, 0644));
  }
  return p;
}

absl::StatusOr<CertAndKey> IssueClientCertificate(const ServerPki& pki,
                                                  const std::string& common_name,
                                                  const std::vector<std::string>& organizations,
                                                  int days) {
  if (common_name.empty()) return absl::InvalidArgumentError("a client certificate needs a CN");
  for (const auto& o : organizations) {
    if (o.empty()) return absl::InvalidArgumentError("a certificate organization is empty");
  }
  if (days < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a client certificate must be valid for at least a day, not ", days));
  }
  QM_ASSIGN_OR_RETURN(auto ca, LoadCa(pki));
  CertSpec spec;
  spec.common_name = common_name;
  spec.organizations = organizations;
  spec.days = days;
  spec.key_usage = "critical,digitalSignature";
  spec.ext_key_usage = "clientAuth";
  QM_ASSIGN_OR_RETURN(auto cert, NewCert(spec, ca.first.get(), ca.second.get()));
  CertAndKey out;
  QM_ASSIGN_OR_RETURN(out.cert_pem, CertPem(cert.first.get()));
  QM_ASSIGN_OR_RETURN(out.key_pem, KeyPem(cert.second.get()));
  return out;
}

absl::StatusOr<std::pair<std::string, std::vector<std::string>>> SubjectOfCertificatePem(
    const std::string& pem) {
  X509Ptr cert = ParseCert(pem);
  if (!cert) return absl::InvalidArgumentError("not a PEM certificate");
  return SubjectOfCertificate(cert.get());
}

absl::StatusOr<std::pair<std::string, std::vector<std::string>>> SubjectOfCertificate(X509* cert) {
  std::pair<std::string, std::vector<std::string>> out;
  X509_NAME* name = X509_get_subject_name(cert);
  for (int i = 0; i < X509_NAME_entry_count(name); ++i) {
    X509_NAME_ENTRY* e = X509_NAME_get_entry(name, i);
    int nid = OBJ_obj2nid(X509_NAME_ENTRY_get_object(e));
    if (nid != NID_commonName && nid != NID_organizationName) continue;
    unsigned char* utf8 = nullptr;
    int len = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(e));
    if (len < 0) {
      ERR_clear_error();
      return absl::InvalidArgumentError("a certificate subject field is not valid text");
    }
    std::string value(reinterpret_cast<char*>(utf8), static_cast<size_t>(len));
    OPENSSL_free(utf8);
    if (nid == NID_commonName) out.first = value;
    if (nid == NID_organizationName) out.second.push_back(value);
  }
  return out;
}

std::string RenderKubeconfig(const std::string& server_url, const std::string& ca_cert_pem,
                             const KubeconfigUser& user) {
  std::string out = absl::StrCat(
      "apiVersion: v1\n"
      "kind: Config\n"
      "clusters:\n"
      "- name: quartermaster\n"
      "  cluster:\n"
      "    server: ",
      YamlQuote(server_url), "\n");
  if (!ca_cert_pem.empty()) {
    absl::StrAppend(&out, "    certificate-authority-data: ", absl::Base64Escape(ca_cert_pem),
                    "\n");
  }
  absl::StrAppend(&out, "users:\n- name: ", YamlQuote(user.name), "\n  user:\n");
  if (!user.token.empty()) absl::StrAppend(&out, "    token: ", YamlQuote(user.token), "\n");
  if (!user.client_cert_pem.empty()) {
    absl::StrAppend(&out, "    client-certificate-data: ", absl::Base64Escape(user.client_cert_pem),
                    "\n    client-key-data: ", absl::Base64Escape(user.client_key_pem), "\n");
  }
  absl::StrAppend(&out,
                  "contexts:\n"
                  "- name: quartermaster\n"
                  "  context:\n"
                  "    cluster: quartermaster\n"
                  "    user: ",
                  YamlQuote(user.name),
                  "\n"
                  "current-context: quartermaster\n");
  return out;
}

}  // namespace qm::auth
