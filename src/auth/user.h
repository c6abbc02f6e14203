#pragma once

#include <string>
#include <vector>

namespace qm::auth {

// Who made a request, as Kubernetes' authenticators describe a user: a name, an optional uid and
// the groups it belongs to. Every authenticated user is also in `system:authenticated`.
struct UserInfo {
  std::string name;
  std::string uid;
  std::vector<std::string> groups;

  bool InGroup(const std::string& group) const {
    for (const auto& g : groups) {
      if (g == group) return true;
    }
    return false;
  }
};

inline constexpr char kGroupMasters[] = "system:masters";
inline constexpr char kGroupAuthenticated[] = "system:authenticated";
inline constexpr char kGroupNodes[] = "system:nodes";
inline constexpr char kGroupServiceAccounts[] = "system:serviceaccounts";
inline constexpr char kNodeUserPrefix[] = "system:node:";
inline constexpr char kServiceAccountUserPrefix[] = "system:serviceaccount:";

}  // namespace qm::auth
