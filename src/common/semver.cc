#include "common/semver.h"

#include <cctype>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace qm {
namespace {

bool AllDigits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

bool IdentifierChars(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
  }
  return true;
}

// A MAJOR/MINOR/PATCH number: digits, no leading zero unless normalizing.
bool ParseNumber(std::string s, bool normalize, uint64_t* out) {
  if (!AllDigits(s)) return false;
  if (s.size() > 1 && s[0] == '0') {
    if (!normalize) return false;
    s.erase(0, s.find_first_not_of('0'));
    if (s.empty()) s = "0";
  }
  return absl::SimpleAtoi(s, out);
}

}  // namespace

std::optional<Semver> Semver::Parse(const std::string& input, bool normalize) {
  std::string text = input;
  if (normalize && !text.empty() && text[0] == 'v') text.erase(0, 1);
  Semver v;
  if (auto plus = text.find('+'); plus != std::string::npos) {
    v.build_ = text.substr(plus + 1);
    text.resize(plus);
    for (const auto& id : absl::StrSplit(v.build_, '.')) {
      if (!IdentifierChars(std::string(id))) return std::nullopt;
    }
  }
  if (auto dash = text.find('-'); dash != std::string::npos) {
    std::string pre = text.substr(dash + 1);
    text.resize(dash);
    for (const auto& id_view : absl::StrSplit(pre, '.')) {
      std::string id(id_view);
      if (!IdentifierChars(id)) return std::nullopt;
      if (AllDigits(id) && id.size() > 1 && id[0] == '0') return std::nullopt;
      v.prerelease_.push_back(id);
    }
  }
  std::vector<std::string> parts = absl::StrSplit(text, '.');
  if (normalize) {
    while (parts.size() < 3) parts.push_back("0");
  }
  if (parts.size() != 3 || !ParseNumber(parts[0], normalize, &v.major_) ||
      !ParseNumber(parts[1], normalize, &v.minor_) ||
      !ParseNumber(parts[2], normalize, &v.patch_)) {
    return std::nullopt;
  }
  return v;
}

int Semver::Compare(const Semver& o) const {
  auto cmp = [](uint64_t a, uint64_t b) { return a < b ? -1 : (a > b ? 1 : 0); };
  if (int c = cmp(major_, o.major_)) return c;
  if (int c = cmp(minor_, o.minor_)) return c;
  if (int c = cmp(patch_, o.patch_)) return c;
  if (prerelease_.empty() || o.prerelease_.empty()) {
    return prerelease_.empty() == o.prerelease_.empty() ? 0 : (prerelease_.empty() ? 1 : -1);
  }
  for (size_t i = 0; i < prerelease_.size() && i < o.prerelease_.size(); ++i) {
    const std::string& a = prerelease_[i];
    const std::string& b = o.prerelease_[i];
    bool an = AllDigits(a), bn = AllDigits(b);
    if (an && bn) {
      // Numeric identifiers have no leading zeros: the longer one is larger, at any length
      // (no overflow for identifiers past 2^64).
      if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
      if (a != b) return a < b ? -1 : 1;
    } else if (an != bn) {
      return an ? -1 : 1;
    } else if (a != b) {
      return a < b ? -1 : 1;
    }
  }
  return cmp(prerelease_.size(), o.prerelease_.size());
}

std::string Semver::ToString() const {
  std::string out =
      std::to_string(major_) + "." + std::to_string(minor_) + "." + std::to_string(patch_);
  for (size_t i = 0; i < prerelease_.size(); ++i) out += (i ? "." : "-") + prerelease_[i];
  if (!build_.empty()) out += "+" + build_;
  return out;
}

}  // namespace qm
