#pragma once

// How qm-agent proves who it is: a client certificate (`system:node:<name>` in group
// `system:nodes`, as `quartermaster credential --node NAME` mints it) and/or a bearer token, and
// the CA that signed the server's certificate. Read from PEM files or from a kubeconfig.

#include <string>

#include "absl/status/statusor.h"

namespace qm::agent {

struct ClientCredentials {
  std::string server_url;  // from a kubeconfig: the REST URL ("https://host:8080")
  std::string ca_pem;
  std::string cert_pem;
  std::string key_pem;
  std::string token;
};

// The current context's cluster and user of a kubeconfig (the first ones when it names none):
// certificate-authority(-data), client-certificate(-data), client-key(-data), token. Relative
// file paths are relative to the kubeconfig's directory. InvalidArgument naming what is wrong.
absl::StatusOr<ClientCredentials> LoadKubeconfig(const std::string& path);

// Reads a whole file; InvalidArgument naming it when it cannot be read.
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

// The gRPC target for a REST URL: its host with `grpc_port` ("https://10.0.0.5:8080" ->
// "10.0.0.5:8081"; "https://[::1]:8080" -> "[::1]:8081").
std::string GrpcTargetForUrl(const std::string& url, int grpc_port);

}  // namespace qm::agent
