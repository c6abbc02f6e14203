#include "agent/cdi.h"

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "auth/pki.h"

namespace qm::agent {
namespace {

using nlohmann::json;

constexpr char kFilePrefix[] = "k8s.gpu.nvidia.com-claim_";
constexpr char kFileSuffix[] = ".json";

json Edits(const std::vector<std::string>& env, const std::vector<std::string>& nodes,
           const std::vector<CdiMount>& mounts) {
  json edits = json::object();
  if (!env.empty()) edits["env"] = env;
  if (!nodes.empty()) {
    json list = json::array();
    for (const auto& n : nodes) list.push_back({{"path", n}});
    edits["deviceNodes"] = std::move(list);
  }
  if (!mounts.empty()) {
    json list = json::array();
    for (const auto& m : mounts) {
      list.push_back({{"hostPath", m.host_path},
                      {"containerPath", m.container_path},
                      {"options", {"rw", "nosuid", "nodev", "bind"}}});
    }
    edits["mounts"] = std::move(list);
  }
  return edits;
}

}  // namespace

std::string CdiSpecJson(const CdiSpec& spec) {
  json out = {{"cdiVersion", kCdiVersion}, {"kind", spec.kind}};
  if (!spec.annotations.empty()) {
    json a = json::object();
    for (const auto& [k, v] : spec.annotations) a[k] = v;
    out["annotations"] = std::move(a);
  }
  json devices = json::array();
  for (const auto& d : spec.devices) {
    devices.push_back(
        {{"name", d.name}, {"containerEdits", Edits(d.env, d.device_nodes, d.mounts)}});
  }
  out["devices"] = std::move(devices);
  json common = Edits(spec.env, spec.device_nodes, spec.mounts);
  if (!common.empty()) out["containerEdits"] = std::move(common);
  return out.dump(2) + "\n";
}

std::string QualifiedDeviceId(const std::string& kind, const std::string& device) {
  return kind + "=" + device;
}

bool IsSafeClaimUid(const std::string& uid) {
  if (uid.empty() || uid.size() > 64) return false;
  for (char c : uid) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string CdiSpecPath(const std::string& dir, const std::string& uid) {
  return dir + "/" + kFilePrefix + uid + kFileSuffix;
}

absl::Status WriteCdiSpec(const std::string& dir, const std::string& uid, const CdiSpec& spec) {
  if (!IsSafeClaimUid(uid)) return absl::InvalidArgumentError("unsafe claim uid \"" + uid + "\"");
  return auth::WriteFileAtomically(CdiSpecPath(dir, uid), CdiSpecJson(spec), 0644);
}

absl::Status RemoveCdiSpec(const std::string& dir, const std::string& uid) {
  if (!IsSafeClaimUid(uid)) return absl::InvalidArgumentError("unsafe claim uid \"" + uid + "\"");
  const std::string path = CdiSpecPath(dir, uid);
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::FailedPreconditionError("cannot remove " + path + ": " + std::strerror(errno));
  }
  return absl::OkStatus();
}

std::vector<std::string> ListCdiSpecs(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  const std::string prefix = kFilePrefix, suffix = kFileSuffix;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    std::string uid = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (IsSafeClaimUid(uid)) out.push_back(uid);
  }
  closedir(d);
  return out;
}

}  // namespace qm::agent
