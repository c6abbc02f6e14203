#pragma once

// Internal to api/rest's validation: what the resource.k8s.io kinds share, following
// Kubernetes' pkg/apis/resource/validation. Limits are those of resource.k8s.io/v1
// (reference/dra-api.md §1.8).

#include <cstddef>
#include <string>

#include "api/rest/validator.h"
#include "model/field_error.h"

namespace qm::api::validation {

inline constexpr size_t kAttributeKeyMaxLength = 63 + 1 + 32;
inline constexpr size_t kMaxConfigs = 32;

// The Validator with the DRA names and the structures several DRA kinds embed. Defined in
// validation_dra.cc; each DRA kind's rules derive from it.
class DraValidator : public Validator {
 public:
  using Validator::Validator;

  // CSI driver-name rules (Kubernetes reuses ValidateCSIDriverName for DRA drivers).
  void DriverName(const std::string& name, const Path& p);
  void PoolName(const std::string& name, const Path& p);
  void CIdentifier(const std::string& id, const Path& p);
  // An attribute or capacity name: `<C identifier>` or `<domain>/<C identifier>`.
  void DraQualifiedName(const std::string& name, const Path& p);

  // Device selectors (CEL). Stored selectors were valid when written; Kubernetes does not
  // re-check them.
  void Selectors(const json& holder, const Path& p, bool stored);
  // An opaque JSON payload: required, a JSON object, at most `max` bytes when new. The size is
  // that of the compact JSON text, which is what the server stores.
  void RawExtension(const json* value, const Path& p, bool stored, size_t max);
  // A class's, claim's or allocation's opaque driver configuration.
  void DeviceConfiguration(const json& config, const Path& p, bool stored);
  // `old_taint` is set on update; an unchanged effect is not re-checked.
  void DeviceTaint(const json& taint, const json* old_taint, const Path& p);
  // The tolerations of a request or an allocation result.
  void Tolerations(const json& holder, const Path& p);
  // bindingConditions and bindingFailureConditions of a device or an allocation result.
  void BindingParameters(const json& holder, const Path& p);

 private:
  void DeviceToleration(const json& toleration, const Path& p);
};

}  // namespace qm::api::validation
