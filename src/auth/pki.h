#pragma once

// Certificates at first start (as k3s and kubeadm do): a CA, a serving certificate signed by it,
// client certificates for users and node agents, and kubeconfig files that carry them. Keys are
// written 0600, atomically. No OpenSSL types in this header.

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace qm::auth {

struct CertAndKey {
  std::string cert_pem;
  std::string key_pem;
};

// The server's PKI directory.
struct ServerPki {
  std::string dir;               // <data-dir>/pki (0700)
  std::string ca_cert_file;      // ca.crt
  std::string ca_key_file;       // ca.key (0600)
  std::string server_cert_file;  // server.crt
  std::string server_key_file;   // server.key (0600)
  std::string ca_cert_pem;       // contents of ca.crt
  bool created = false;          // this call created the CA (first start)
};

// Creates `dir` and, once, a self-signed CA ("quartermaster-ca", EC P-256, 10 years) and a
// serving certificate signed by it (CN quartermaster; SANs localhost, 127.0.0.1, ::1 and the
// given names and addresses; serverAuth; 1 year). Later calls reuse both; the serving
// certificate alone is re-issued when a requested name is missing from it or it expires within
// 30 days. FailedPrecondition naming the file when existing files cannot be read or parsed.
absl::StatusOr<ServerPki> EnsureServerPki(const std::string& dir,
                                          const std::vector<std::string>& dns_names,
                                          const std::vector<std::string>& ip_addresses);

// Loads an existing PKI directory without creating anything (NotFound when it has no CA).
absl::StatusOr<ServerPki> LoadServerPki(const std::string& dir);

// A client certificate signed by the CA of `pki`: CN `common_name`, one O per organization
// (Kubernetes reads CN as the user and O as the groups), clientAuth, EC P-256, `days` valid.
absl::StatusOr<CertAndKey> IssueClientCertificate(const ServerPki& pki,
                                                  const std::string& common_name,
                                                  const std::vector<std::string>& organizations,
                                                  int days);

// The subject of a PEM certificate: CN and each O.
absl::StatusOr<std::pair<std::string, std::vector<std::string>>> SubjectOfCertificatePem(
    const std::string& pem);

// A kubeconfig (YAML) with one cluster, one user and one current context, all named
// "quartermaster" (the user named `user.name`). The user carries a bearer token or a client
// certificate and key; `ca_cert_pem` empty leaves certificate-authority-data out.
struct KubeconfigUser {
  std::string name;
  std::string token;
  std::string client_cert_pem;
  std::string client_key_pem;
};
std::string RenderKubeconfig(const std::string& server_url, const std::string& ca_cert_pem,
                             const KubeconfigUser& user);

// Writes `path` through a temporary file in the same directory (created with `mode`, fsync'd,
// renamed over the target), so readers see the old or the new contents and a secret is never
// readable by others, not even briefly.
absl::Status WriteFileAtomically(const std::string& path, const std::string& contents,
                                 mode_t mode);

// `bytes` bytes from the system's CSPRNG, hex-encoded.
std::string RandomSecret(size_t bytes);

}  // namespace qm::auth
