#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace qm {

// A Semantic Version 2.0.0 value (https://semver.org), as Kubernetes' CEL semver library and
// DRA `version` attributes use it. Immutable; copyable.
class Semver {
 public:
  // Parses strict semver: MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD], no leading zeros in numeric
  // parts, no "v" prefix. With `normalize`, as CEL's semver(s, true): a leading "v" is dropped,
  // missing minor/patch become 0, and leading zeros in the three numbers are removed.
  // nullopt when `text` is not a version.
  static std::optional<Semver> Parse(const std::string& text, bool normalize = false);

  uint64_t major() const { return major_; }
  uint64_t minor() const { return minor_; }
  uint64_t patch() const { return patch_; }
  const std::vector<std::string>& prerelease() const { return prerelease_; }

  // Precedence per semver §11: numbers compared numerically, a pre-release ranks below the
  // release, pre-release identifiers compared one by one (numeric < alphanumeric); build
  // metadata is ignored. Returns -1, 0 or 1.
  int Compare(const Semver& other) const;

  // The canonical text (with build metadata if it had any).
  std::string ToString() const;

 private:
  uint64_t major_ = 0, minor_ = 0, patch_ = 0;
  std::vector<std::string> prerelease_;
  std::string build_;
};

}  // namespace qm
