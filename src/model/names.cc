#include "model/names.h"

#include <string_view>

#include "common/semver.h"

namespace qm::model {
namespace {

constexpr char kLabelFmt[] = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
constexpr char kSubdomainFmt[] = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
constexpr char kQualifiedNameFmt[] = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
constexpr char kLabelValueFmt[] = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
constexpr char kCIdentifierFmt[] = "[A-Za-z_][A-Za-z0-9_]*";

// Hand-written linear scanners for the formats above: std::regex recurses once per character and
// overflows the stack on long client-supplied strings, so none of them is matched with it.
bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z'); }

// [a-z0-9]([-a-z0-9]*[a-z0-9])?
bool MatchesLabel(std::string_view value) {
  if (value.empty() || !IsLowerAlnum(value.front()) || !IsLowerAlnum(value.back())) return false;
  for (char c : value) {
    if (!IsLowerAlnum(c) && c != '-') return false;
  }
  return true;
}

// One or more labels joined by '.'.
bool MatchesSubdomain(std::string_view value) {
  size_t start = 0;
  while (true) {
    size_t dot = value.find('.', start);
    if (!MatchesLabel(value.substr(start, dot == std::string_view::npos ? dot : dot - start))) {
      return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

// ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]
bool MatchesQualifiedName(std::string_view value) {
  if (value.empty() || !IsAlnum(value.front()) || !IsAlnum(value.back())) return false;
  for (char c : value) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

bool MatchesLabelValue(std::string_view value) {
  return value.empty() || MatchesQualifiedName(value);
}

// [A-Za-z_][A-Za-z0-9_]*
bool MatchesCIdentifier(std::string_view value) {
  if (value.empty() || (value.front() >= '0' && value.front() <= '9')) return false;
  for (char c : value) {
    if (!IsAlnum(c) && c != '_') return false;
  }
  return true;
}

std::string MaxLenError(size_t n) {
  return "must be no more than " + std::to_string(n) + " characters";
}

std::string RegexError(const std::string& msg, const char* fmt, const std::string& examples) {
  std::string out = msg;
  out += " (e.g. " + examples + ", regex used for validation is '" + fmt + "')";
  return out;
}

}  // namespace

std::vector<std::string> IsDns1123Label(const std::string& value) {
  std::vector<std::string> errs;
  if (value.size() > kDns1123LabelMaxLength) errs.push_back(MaxLenError(kDns1123LabelMaxLength));
  if (!MatchesLabel(value) && MatchesSubdomain(value)) {
    // A valid subdomain but not a label: the length was checked above, so it must be dots.
    errs.push_back("must not contain dots");
  } else if (!MatchesLabel(value)) {
    errs.push_back(RegexError(
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
        "and must start and end with an alphanumeric character",
        kLabelFmt, "'my-name',  or '123-abc'"));
  }
  return errs;
}

std::vector<std::string> IsDns1123Subdomain(const std::string& value) {
  std::vector<std::string> errs;
  if (value.size() > kDns1123SubdomainMaxLength) {
    errs.push_back(MaxLenError(kDns1123SubdomainMaxLength));
  }
  if (!MatchesSubdomain(value)) {
    errs.push_back(RegexError(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
        "or '.', and must start and end with an alphanumeric character",
        kSubdomainFmt, "'example.com'"));
  }
  return errs;
}

std::vector<std::string> IsQualifiedName(const std::string& value) {
  std::vector<std::string> errs;
  std::string name = value;
  auto slash = value.find('/');
  if (slash != std::string::npos) {
    if (value.find('/', slash + 1) != std::string::npos) {
      errs.push_back(
          RegexError(
              "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must "
              "start and end with an alphanumeric character",
              kQualifiedNameFmt, "'MyName',  or 'my.name',  or '123-abc'") +
          " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')");
      return errs;
    }
    std::string prefix = value.substr(0, slash);
    name = value.substr(slash + 1);
    if (prefix.empty()) {
      errs.push_back("prefix part must be non-empty");
    } else {
      for (const auto& e : IsDns1123Subdomain(prefix)) errs.push_back("prefix part " + e);
    }
  }
  if (name.empty()) {
    errs.push_back("name part must be non-empty");
  } else if (name.size() > 63) {
    errs.push_back("name part " + MaxLenError(63));
  }
  // Like apimachinery, an empty name part also fails the regex (two messages).
  if (!MatchesQualifiedName(name)) {
    errs.push_back("name part " +
                   RegexError("must consist of alphanumeric characters, '-', '_' or '.', and "
                              "must start and end with an alphanumeric character",
                              kQualifiedNameFmt, "'MyName',  or 'my.name',  or '123-abc'"));
  }
  return errs;
}

std::vector<std::string> IsLabelValue(const std::string& value) {
  std::vector<std::string> errs;
  if (value.size() > kLabelValueMaxLength) errs.push_back(MaxLenError(kLabelValueMaxLength));
  if (!MatchesLabelValue(value)) {
    errs.push_back(RegexError(
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
        "or '.', and must start and end with an alphanumeric character",
        kLabelValueFmt, "'MyValue',  or 'my_value',  or '12345'"));
  }
  return errs;
}

std::vector<std::string> IsCIdentifier(const std::string& value) {
  if (MatchesCIdentifier(value)) return {};
  return {
      RegexError("a valid C identifier must start with alphabetic character or '_', "
                 "followed by a string of alphanumeric characters or '_'",
                 kCIdentifierFmt, "'my_name',  or 'MY_NAME',  or 'MyName'")};
}

bool IsLowercaseUuid(const std::string& value) {
  // 8-4-4-4-12 lowercase hex digits.
  if (value.size() != 36) return false;
  for (size_t i = 0; i < value.size(); ++i) {
    char c = value[i];
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool IsSemver(const std::string& value) { return Semver::Parse(value).has_value(); }

}  // namespace qm::model
