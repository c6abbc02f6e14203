#pragma once

// Kubernetes' CEL library.Format (k8s.io/apiserver/pkg/cel/library/format.go): named string
// formats whose validate() returns apimachinery's validation messages.
//
//   format.dns1123Label() format.dns1123Subdomain() format.dns1035Label() format.qualifiedName()
//   format.dns1123LabelPrefix() format.dns1123SubdomainPrefix() format.dns1035LabelPrefix()
//   format.labelValue() format.uri() format.uuid() format.byte() format.date() format.datetime()
//   format.named(name) -> optional format;  f.validate(s) -> optional list of messages
//
// Pure and thread-safe.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qm::cel {

// True when `name` is one of the format names above (without "format.").
bool IsFormatName(std::string_view name);
// Every format name above (without "format."), in the order listed.
std::vector<std::string_view> FormatNames();
// The validation errors of `value` under format `name` (empty when valid).
// REQUIRES: IsFormatName(name).
std::vector<std::string> ValidateFormat(std::string_view name, std::string_view value);
// Kubernetes' MaxRegexSize of the format, for the cost of validate().
uint64_t FormatRegexSize(std::string_view name);
// The largest FormatRegexSize of all formats (the compile-time estimate).
uint64_t MaxFormatRegexSize();

}  // namespace qm::cel
