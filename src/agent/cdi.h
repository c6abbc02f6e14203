#pragma once

// Container Device Interface (CDI, https://github.com/cncf-tags/container-device-interface)
// spec files: how the agent hands prepared devices to the container runtime. One spec file per
// prepared claim, as NVIDIA's DRA driver writes them: kind `k8s.gpu.nvidia.com/claim`, file
// `<dir>/k8s.gpu.nvidia.com-claim_<claim uid>.json`, one CDI device per allocated device named
// `<claim uid>-<device>`, so the fully qualified CDI device ID of device gpu-0 of claim U is
// `k8s.gpu.nvidia.com/claim=U-gpu-0`.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace qm::agent {

inline constexpr char kCdiVersion[] = "0.6.0";
inline constexpr char kCdiKind[] = "k8s.gpu.nvidia.com/claim";

// A bind mount of a host directory into the container (the MPS pipe directory).
struct CdiMount {
  std::string host_path;
  std::string container_path;
};

struct CdiDevice {
  std::string name;                       // unique in the spec; [A-Za-z0-9][A-Za-z0-9_.:-]*
  std::vector<std::string> env;           // "NAME=value"
  std::vector<std::string> device_nodes;  // paths
  std::vector<CdiMount> mounts;
};

struct CdiSpec {
  std::string kind = kCdiKind;
  std::vector<std::pair<std::string, std::string>> annotations;
  std::vector<CdiDevice> devices;
  // Edits applied whenever any device of the spec is injected.
  std::vector<std::string> env;
  std::vector<std::string> device_nodes;
  std::vector<CdiMount> mounts;
};

// The spec as CDI JSON (cdiVersion 0.6.0).
std::string CdiSpecJson(const CdiSpec& spec);

// "k8s.gpu.nvidia.com/claim=<name>".
std::string QualifiedDeviceId(const std::string& kind, const std::string& device);

// Whether `uid` may name a spec file (and CDI devices): letters, digits and '-', 1 to 64 of
// them. Claim uids are RFC 4122 UUIDs; anything else is refused rather than used in a path.
bool IsSafeClaimUid(const std::string& uid);

// The spec file of claim `uid` in `dir`.
std::string CdiSpecPath(const std::string& dir, const std::string& uid);

// Writes the spec of claim `uid` atomically (a temporary file renamed over the target, 0644): a
// runtime reading the directory sees the old file, the new one, or none, never a torn one.
absl::Status WriteCdiSpec(const std::string& dir, const std::string& uid, const CdiSpec& spec);

// Removes the spec of claim `uid`; OK when there is none.
absl::Status RemoveCdiSpec(const std::string& dir, const std::string& uid);

// The claim uids of the spec files of kCdiKind in `dir` (other files are not ours).
std::vector<std::string> ListCdiSpecs(const std::string& dir);

}  // namespace qm::agent
