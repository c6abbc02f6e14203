#pragma once

#include <string>
#include <vector>

// Name-format checks with Kubernetes' exact rules and messages. Each returns the list of
// problems (empty when the value is valid), worded as apimachinery's validation package words
// them, so callers can wrap them into FieldErrors.
namespace qm::model {

inline constexpr size_t kDns1123LabelMaxLength = 63;
inline constexpr size_t kDns1123SubdomainMaxLength = 253;
inline constexpr size_t kLabelValueMaxLength = 63;

std::vector<std::string> IsDns1123Label(const std::string& value);
std::vector<std::string> IsDns1123Subdomain(const std::string& value);
// A label key or other qualified name: "[prefix/]name", prefix a DNS subdomain, name <= 63.
std::vector<std::string> IsQualifiedName(const std::string& value);
std::vector<std::string> IsLabelValue(const std::string& value);
// A C identifier: [A-Za-z_][A-Za-z0-9_]*.
std::vector<std::string> IsCIdentifier(const std::string& value);
// A lowercase RFC 4122 UUID of 36 characters.
bool IsLowercaseUuid(const std::string& value);
// A semantic version 2.0.0 string (no leading "v", no leading zeros).
bool IsSemver(const std::string& value);

}  // namespace qm::model
