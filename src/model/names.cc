#include "model/names.h"

#include <regex>

#include "common/semver.h"

namespace qm::model {
namespace {

constexpr char kLabelFmt[] = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
constexpr char kSubdomainFmt[] = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
constexpr char kQualifiedNameFmt[] = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
constexpr char kLabelValueFmt[] = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
constexpr char kCIdentifierFmt[] = "[A-Za-z_][A-Za-z0-9_]*";

// Each pattern is compiled once; std::regex is safe for concurrent matching.
#define QM_DEFINE_MATCHER(fn, fmt)                     \
  bool fn(const std::string& value) {                  \
    static const std::regex* re = new std::regex(fmt); \
    return std::regex_match(value, *re);               \
  }
QM_DEFINE_MATCHER(MatchesLabel, kLabelFmt)
QM_DEFINE_MATCHER(MatchesSubdomain, kSubdomainFmt)
QM_DEFINE_MATCHER(MatchesQualifiedName, kQualifiedNameFmt)
QM_DEFINE_MATCHER(MatchesLabelValue, kLabelValueFmt)
QM_DEFINE_MATCHER(MatchesCIdentifier, kCIdentifierFmt)
#undef QM_DEFINE_MATCHER

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
  static const std::regex re("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");
  return std::regex_match(value, re);
}

bool IsSemver(const std::string& value) { return Semver::Parse(value).has_value(); }

}  // namespace qm::model
