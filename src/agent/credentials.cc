#include "agent/credentials.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/escaping.h"

namespace qm::agent {
namespace {

bool Present(const YAML::Node& n) { return n.IsDefined() && !n.IsNull(); }

// The entry of `list` (clusters, users) named `name`, or the first one when `name` is empty;
// nullopt when there is none.
std::optional<YAML::Node> Named(const YAML::Node& list, const std::string& name, const char* key) {
  if (!Present(list) || !list.IsSequence()) return std::nullopt;
  for (const auto& item : list) {
    if (!item.IsMap()) continue;
    const YAML::Node n = item["name"];
    if (name.empty() || (Present(n) && n.IsScalar() && n.as<std::string>() == name)) {
      const YAML::Node v = item[key];
      if (Present(v)) return v;
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::string Scalar(const YAML::Node& n, const char* key) {
  if (!Present(n) || !n.IsMap()) return "";
  const YAML::Node v = n[key];
  return Present(v) && v.IsScalar() ? v.as<std::string>() : "";
}

// `data` (base64) or the file `file` (relative to `dir`), whichever is set.
absl::StatusOr<std::string> DataOrFile(const YAML::Node& n, const char* data_key,
                                       const char* file_key, const std::string& dir,
                                       const std::string& what) {
  std::string data = Scalar(n, data_key);
  if (!data.empty()) {
    std::string out;
    if (!absl::Base64Unescape(data, &out)) {
      return absl::InvalidArgumentError(what + ": " + data_key + " is not base64");
    }
    return out;
  }
  std::string file = Scalar(n, file_key);
  if (file.empty()) return std::string();
  if (file[0] != '/') file = dir + "/" + file;
  return ReadTextFile(file);
}

}  // namespace

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<ClientCredentials> LoadKubeconfig(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  YAML::Node root;
  try {
    root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(path + ": not YAML: " + e.what());
  }
  if (!root.IsMap()) return absl::InvalidArgumentError(path + ": not a kubeconfig");
  const std::string dir =
      path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  try {
    std::string cluster_name, user_name;
    const std::string current = Scalar(root, "current-context");
    if (!current.empty()) {
      auto ctx = Named(root["contexts"], current, "context");
      if (!ctx) {
        return absl::InvalidArgumentError(path + ": context \"" + current + "\" not found");
      }
      cluster_name = Scalar(*ctx, "cluster");
      user_name = Scalar(*ctx, "user");
    }
    auto cluster = Named(root["clusters"], cluster_name, "cluster");
    auto user = Named(root["users"], user_name, "user");
    if (!cluster) return absl::InvalidArgumentError(path + ": no cluster");
    ClientCredentials out;
    out.server_url = Scalar(*cluster, "server");
    auto ca =
        DataOrFile(*cluster, "certificate-authority-data", "certificate-authority", dir, path);
    if (!ca.ok()) return ca.status();
    out.ca_pem = *ca;
    if (user) {
      auto cert = DataOrFile(*user, "client-certificate-data", "client-certificate", dir, path);
      if (!cert.ok()) return cert.status();
      auto key = DataOrFile(*user, "client-key-data", "client-key", dir, path);
      if (!key.ok()) return key.status();
      out.cert_pem = *cert;
      out.key_pem = *key;
      out.token = Scalar(*user, "token");
    }
    if (out.cert_pem.empty() != out.key_pem.empty()) {
      return absl::InvalidArgumentError(path + ": a client certificate needs its key");
    }
    return out;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(path + ": " + e.what());
  }
}

std::string GrpcTargetForUrl(const std::string& url, int grpc_port) {
  std::string rest = url;
  if (auto scheme = rest.find("://"); scheme != std::string::npos) rest = rest.substr(scheme + 3);
  if (auto slash = rest.find('/'); slash != std::string::npos) rest = rest.substr(0, slash);
  std::string host = rest;
  if (!rest.empty() && rest[0] == '[') {
    host = rest.substr(0, rest.find(']') + 1);
  } else if (auto colon = rest.rfind(':'); colon != std::string::npos) {
    host = rest.substr(0, colon);
  }
  return host + ":" + std::to_string(grpc_port);
}

}  // namespace qm::agent
