#pragma once

// Objects the integration tests create again and again, in the hub version.

#include <string>

#include <nlohmann/json.hpp>

namespace qm::testing {

// The spec of a DeviceClass that selects every device of `driver`.
inline nlohmann::json DriverClassSpec(const std::string& driver) {
  return {{"selectors", {{{"cel", {{"expression", "device.driver == '" + driver + "'"}}}}}}};
}

// That DeviceClass, named `name`, as a REST client posts it.
inline nlohmann::json DriverClass(const std::string& name, const std::string& driver) {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "DeviceClass"},
          {"metadata", {{"name", name}}},
          {"spec", DriverClassSpec(driver)}};
}

}  // namespace qm::testing
