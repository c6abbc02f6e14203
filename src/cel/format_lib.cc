#include "cel/format_lib.h"

#include <algorithm>

#include "absl/status/statusor.h"
#include "cel/net_lib.h"
#include "cel/time_lib.h"
#include "re2/re2.h"

namespace qm::cel {
namespace {

constexpr std::string_view kDns1123LabelFmt = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
constexpr std::string_view kDns1123SubdomainFmt =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
constexpr std::string_view kDns1035LabelFmt = "[a-z]([-a-z0-9]*[a-z0-9])?";
constexpr std::string_view kQualifiedNameFmt = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
constexpr std::string_view kLabelValueFmt = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
constexpr std::string_view kQualifiedNameErrMsg =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character";

struct FormatInfo {
  std::string_view name;
  uint64_t regex_size;
};

// Kubernetes' MaxRegexSize per format; uri, uuid, byte, date and datetime use the lengths of the
// govalidator/strfmt patterns Kubernetes measures (approximated here).
constexpr FormatInfo kFormats[] = {
    {"dns1123Label", 30},
    {"dns1123Subdomain", 60},
    {"dns1035Label", 30},
    {"qualifiedName", 60},
    {"dns1123LabelPrefix", 30},
    {"dns1123SubdomainPrefix", 60},
    {"dns1035LabelPrefix", 30},
    {"labelValue", 40},
    {"uri", 1000},
    {"uuid", 87},
    {"byte", 83},
    {"date", 72},
    {"datetime", 72},
};

bool FullMatch(std::string_view value, std::string_view pattern) {
  // The patterns are constants; RE2 caches nothing across calls, so keep one per pattern.
  RE2 re("^(?:" + std::string(pattern) + ")$");
  return RE2::FullMatch(re2::StringPiece(value.data(), value.size()), re);
}

std::string MaxLenError(int n) {
  return "must be no more than " + std::to_string(n) + " characters";
}

// apimachinery's RegexError.
std::string RegexError(std::string msg, std::string_view fmt,
                       std::initializer_list<std::string_view> examples) {
  if (examples.size() == 0)
    return msg + " (regex used for validation is '" + std::string(fmt) + "')";
  msg += " (e.g. ";
  size_t i = 0;
  for (std::string_view e : examples) {
    if (i++ > 0) msg += " or ";
    msg += "'" + std::string(e) + "', ";
  }
  msg += "regex used for validation is '" + std::string(fmt) + "')";
  return msg;
}

std::vector<std::string> Dns1123Label(std::string_view v) {
  std::vector<std::string> errs;
  if (v.size() > 63) errs.push_back(MaxLenError(63));
  if (!FullMatch(v, kDns1123LabelFmt)) {
    errs.push_back(RegexError(
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
        "and must start and end with an alphanumeric character",
        kDns1123LabelFmt, {"my-name", "123-abc"}));
  }
  return errs;
}

std::vector<std::string> Dns1123Subdomain(std::string_view v) {
  std::vector<std::string> errs;
  if (v.size() > 253) errs.push_back(MaxLenError(253));
  if (!FullMatch(v, kDns1123SubdomainFmt)) {
    errs.push_back(RegexError(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
        "or '.', and must start and end with an alphanumeric character",
        kDns1123SubdomainFmt, {"example.com"}));
  }
  return errs;
}

std::vector<std::string> Dns1035Label(std::string_view v) {
  std::vector<std::string> errs;
  if (v.size() > 63) errs.push_back(MaxLenError(63));
  if (!FullMatch(v, kDns1035LabelFmt)) {
    errs.push_back(RegexError(
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
        "an alphabetic character, and end with an alphanumeric character",
        kDns1035LabelFmt, {"my-name", "abc-123"}));
  }
  return errs;
}

// apimachinery's maskTrailingDash: a prefix (generateName) may end in '-'.
std::string MaskTrailingDash(std::string_view v) {
  std::string s(v);
  if (s.size() > 1 && s.back() == '-') s = s.substr(0, s.size() - 2) + "a";
  return s;
}

std::vector<std::string> QualifiedName(std::string_view v) {
  std::vector<std::string> errs;
  const size_t slashes = std::count(v.begin(), v.end(), '/');
  std::string_view name = v;
  if (slashes == 1) {
    const size_t slash = v.find('/');
    std::string_view prefix = v.substr(0, slash);
    name = v.substr(slash + 1);
    if (prefix.empty()) {
      errs.push_back("prefix part must be non-empty");
    } else {
      for (std::string& m : Dns1123Subdomain(prefix)) errs.push_back("prefix part " + m);
    }
  } else if (slashes > 1) {
    errs.push_back("a qualified name " +
                   RegexError(std::string(kQualifiedNameErrMsg), kQualifiedNameFmt,
                              {"MyName", "my.name", "123-abc"}) +
                   " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')");
    return errs;
  }
  if (name.empty()) {
    errs.push_back("name part must be non-empty");
  } else if (name.size() > 63) {
    errs.push_back("name part " + MaxLenError(63));
  }
  if (!FullMatch(name, kQualifiedNameFmt)) {
    errs.push_back("name part " + RegexError(std::string(kQualifiedNameErrMsg), kQualifiedNameFmt,
                                             {"MyName", "my.name", "123-abc"}));
  }
  return errs;
}

std::vector<std::string> LabelValue(std::string_view v) {
  std::vector<std::string> errs;
  if (v.size() > 63) errs.push_back(MaxLenError(63));
  if (!FullMatch(v, kLabelValueFmt)) {
    errs.push_back(RegexError(
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
        "or '.', and must start and end with an alphanumeric character",
        kLabelValueFmt, {"MyValue", "my_value", "12345"}));
  }
  return errs;
}

bool ValidBase64(std::string_view v) {
  // Go's base64.StdEncoding.DecodeString: padded, strict alphabet; CR and LF are ignored.
  std::string s;
  for (char c : v) {
    if (c != '\r' && c != '\n') s.push_back(c);
  }
  if (s.size() % 4 != 0) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                       c == '+' || c == '/';
    if (alpha) continue;
    if (c != '=') return false;
    // Padding only in the last two positions, and nothing but padding after it.
    if (i + 2 < s.size()) return false;
    if (i + 1 < s.size() && s[i + 1] != '=') return false;
  }
  return true;
}

bool ValidDate(std::string_view v) {
  // Go's time.Parse("2006-01-02"): reuse the RFC 3339 parser with a fixed time of day.
  if (v.size() != 10) return false;
  absl::StatusOr<Timestamp> t = ParseTimestamp(std::string(v) + "T00:00:00Z");
  return t.ok() || t.status().message() == "timestamp overflow";
}

bool ValidDateTime(std::string_view v) {
  absl::StatusOr<Timestamp> t = ParseTimestamp(v);
  return t.ok() || t.status().message() == "timestamp overflow";
}

}  // namespace

bool IsFormatName(std::string_view name) {
  for (const FormatInfo& f : kFormats) {
    if (f.name == name) return true;
  }
  return false;
}

std::vector<std::string_view> FormatNames() {
  std::vector<std::string_view> names;
  for (const FormatInfo& f : kFormats) names.push_back(f.name);
  return names;
}

uint64_t FormatRegexSize(std::string_view name) {
  for (const FormatInfo& f : kFormats) {
    if (f.name == name) return f.regex_size;
  }
  return 0;
}

uint64_t MaxFormatRegexSize() {
  uint64_t m = 0;
  for (const FormatInfo& f : kFormats) m = std::max(m, f.regex_size);
  return m;
}

std::vector<std::string> ValidateFormat(std::string_view name, std::string_view value) {
  if (name == "dns1123Label") return Dns1123Label(value);
  if (name == "dns1123LabelPrefix") return Dns1123Label(MaskTrailingDash(value));
  if (name == "dns1123Subdomain") return Dns1123Subdomain(value);
  if (name == "dns1123SubdomainPrefix") return Dns1123Subdomain(MaskTrailingDash(value));
  if (name == "dns1035Label") return Dns1035Label(value);
  if (name == "dns1035LabelPrefix") return Dns1035Label(MaskTrailingDash(value));
  if (name == "qualifiedName") return QualifiedName(value);
  if (name == "labelValue") return LabelValue(value);
  if (name == "uri") {
    absl::StatusOr<Url> u = ParseUrl(value);
    if (u.ok()) return {};
    // ParseUrl's message is Kubernetes' url() text; validate() reports Go's *url.Error only.
    constexpr std::string_view kPrefix = "URL parse error during conversion from string: ";
    std::string m(u.status().message());
    if (m.rfind(kPrefix, 0) == 0) m.erase(0, kPrefix.size());
    return {m};
  }
  if (name == "uuid") {
    if (FullMatch(value,
                  "(?i)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|"
                  "(?i)[0-9a-f]{32}")) {
      return {};
    }
    return {"does not match the UUID format"};
  }
  if (name == "byte")
    return ValidBase64(value) ? std::vector<std::string>{}
                              : std::vector<std::string>{"invalid base64"};
  if (name == "date")
    return ValidDate(value) ? std::vector<std::string>{} : std::vector<std::string>{"invalid date"};
  return ValidDateTime(value) ? std::vector<std::string>{}
                              : std::vector<std::string>{"invalid datetime"};
}

}  // namespace qm::cel
