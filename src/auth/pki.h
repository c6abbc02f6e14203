#pragma once

// Certificates at first start (as k3s and kubeadm do): a CA, a serving certificate signed by it,
// client certificates for users and node agents, and kubeconfig files that carry them. Keys are
// written 0600, atomically. No OpenSSL types in this header.
//
// Thread-safety: every function is safe to call concurrently; EnsureServerPki additionally
// serializes callers (threads or processes) that share a directory with an advisory lock on it.

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct x509_st;  // OpenSSL's X509

namespace qm::auth {

struct CertAndKey {
  std::string cert_pem;
  std::string key_pem;  // PKCS#8, unencrypted
};

// The server's PKI directory.
struct ServerPki {
  std::string dir;               // <data-dir>/pki (0700)
  std::string ca_cert_file;      // ca.crt (0644)
  std::string ca_key_file;       // ca.key (0600)
  std::string server_cert_file;  // server.crt (0644)
  std::string server_key_file;   // server.key (0600)
  std::string ca_cert_pem;       // contents of ca.crt
  bool created = false;          // this call created the CA (first start)
};

// Creates `dir` (0700; an existing one is narrowed to 0700) and, once, a self-signed CA
// ("quartermaster-ca", EC P-256, 10 years) and a serving certificate signed by it (CN
// quartermaster; SANs localhost, 127.0.0.1, ::1 and the given names and addresses; serverAuth;
// 1 year, never beyond the CA). Later calls reuse both; the serving certificate alone is
// re-issued, by the same CA, when a requested name is missing from it, it expires within 30
// days, it does not verify against the CA, or it or its key cannot be read.
//
// Errors: InvalidArgument for a DNS name outside [A-Za-z0-9._-] (an optional leading "*." aside)
// or an address that is not IPv4/IPv6 ("[::1]" is accepted); FailedPrecondition naming the file
// when the CA cannot be read, parsed or matched with its key (a key without a certificate, as a
// crash during first start leaves, included) or has expired, and when `dir` cannot be created or
// written. Nothing is ever overwritten except the serving certificate and its key.
absl::StatusOr<ServerPki> EnsureServerPki(const std::string& dir,
                                          const std::vector<std::string>& dns_names,
                                          const std::vector<std::string>& ip_addresses);

// Loads an existing PKI directory without creating or changing anything: NotFound when it has
// no ca.crt, FailedPrecondition naming the file when the CA or its key cannot be read or parsed,
// do not match, or the CA has expired.
absl::StatusOr<ServerPki> LoadServerPki(const std::string& dir);

// A client certificate signed by the CA of `pki` (read from pki.ca_cert_file/ca_key_file): CN
// `common_name`, one O per organization (Kubernetes reads CN as the user and O as the groups),
// clientAuth, a new EC P-256 key, valid `days` days but never beyond the CA.
// Errors: InvalidArgument for an empty CN, an empty organization, a field longer than X.509
// allows (CN and O: 64 characters) or `days` < 1; the CA's errors as in LoadServerPki.
absl::StatusOr<CertAndKey> IssueClientCertificate(const ServerPki& pki,
                                                  const std::string& common_name,
                                                  const std::vector<std::string>& organizations,
                                                  int days);

// The subject of a certificate: its CN (empty when it has none) and each O, in order.
// InvalidArgument when one of them is not valid text. Does not verify anything. The REST layer
// reads the certificate TLS verified with this, gRPC the PEM gRPC hands over (below).
absl::StatusOr<std::pair<std::string, std::vector<std::string>>> SubjectOfCertificate(
    x509_st* cert);
// The same for a PEM certificate; InvalidArgument also when `pem` holds no certificate.
absl::StatusOr<std::pair<std::string, std::vector<std::string>>> SubjectOfCertificatePem(
    const std::string& pem);

// A kubeconfig (YAML) with one cluster, one user and one current context. The cluster and the
// context are named "quartermaster", the user `user.name`. The user carries a bearer token when
// `token` is set, and a client certificate and key when `client_cert_pem` is set. An empty
// `ca_cert_pem` leaves certificate-authority-data out. Names, the URL and the token are written
// as quoted YAML strings, so any text is safe in them.
struct KubeconfigUser {
  std::string name;
  std::string token;
  std::string client_cert_pem;
  std::string client_key_pem;
};
std::string RenderKubeconfig(const std::string& server_url, const std::string& ca_cert_pem,
                             const KubeconfigUser& user);

// Writes `path` through a temporary file in the same directory (created O_EXCL with `mode`,
// fsync'd, renamed over the target, the directory fsync'd), so readers see the old or the new
// contents, a crash never leaves a torn file, and a secret is never readable by others, not even
// briefly. FailedPrecondition naming the file (and the system error) on failure.
absl::Status WriteFileAtomically(const std::string& path, const std::string& contents, mode_t mode);

// `bytes` bytes from the system's CSPRNG, hex-encoded (2 * `bytes` characters, URL-safe).
// Aborts when the CSPRNG cannot be seeded: nothing secure could be made.
std::string RandomSecret(size_t bytes);

}  // namespace qm::auth
