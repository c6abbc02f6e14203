#include "model/selector.h"

#include <algorithm>
#include <cctype>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "model/names.h"

namespace qm::model {
namespace {

std::string Trim(absl::string_view s) { return std::string(absl::StripAsciiWhitespace(s)); }

// Splits on commas that are not inside parentheses.
std::vector<std::string> SplitTopLevel(const std::string& text) {
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  return parts;
}

absl::Status CheckKey(const std::string& key, const std::string& part) {
  auto errs = IsQualifiedName(key);
  if (!errs.empty()) {
    return absl::InvalidArgumentError("unable to parse requirement: invalid label key \"" + key +
                                      "\": " + errs.front());
  }
  return absl::OkStatus();
}

absl::Status CheckValue(const std::string& value) {
  auto errs = IsLabelValue(value);
  if (!errs.empty()) {
    return absl::InvalidArgumentError("unable to parse requirement: invalid label value: \"" +
                                      value + "\": " + errs.front());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LabelSelector> LabelSelector::Parse(const std::string& text) {
  LabelSelector sel;
  if (Trim(text).empty()) return sel;
  for (const auto& raw : SplitTopLevel(text)) {
    std::string part = Trim(raw);
    if (part.empty()) return absl::InvalidArgumentError("found '', expected: identifier");
    Requirement req;
    if (part[0] == '!') {
      req.key = Trim(part.substr(1));
      req.op = Op::kDoesNotExist;
    } else {
      // Find the operator: "in (", "notin (", "!=", "==", "=", ">", "<".
      size_t key_end = 0;
      while (key_end < part.size() && !std::isspace(static_cast<unsigned char>(part[key_end])) &&
             part[key_end] != '=' && part[key_end] != '!' && part[key_end] != '>' &&
             part[key_end] != '<') {
        ++key_end;
      }
      req.key = part.substr(0, key_end);
      std::string rest = Trim(part.substr(key_end));
      if (rest.empty()) {
        req.op = Op::kExists;
      } else if (rest.rfind("!=", 0) == 0) {
        req.op = Op::kNotEquals;
        req.values.push_back(Trim(rest.substr(2)));
      } else if (rest.rfind("==", 0) == 0) {
        req.op = Op::kEquals;
        req.values.push_back(Trim(rest.substr(2)));
      } else if (rest[0] == '=') {
        req.op = Op::kEquals;
        req.values.push_back(Trim(rest.substr(1)));
      } else if (rest[0] == '>' || rest[0] == '<') {
        req.op = rest[0] == '>' ? Op::kGreater : Op::kLess;
        std::string v = Trim(rest.substr(1));
        char* end = nullptr;
        std::strtoll(v.c_str(), &end, 10);
        if (v.empty() || *end != '\0') {
          return absl::InvalidArgumentError(
              "unable to parse requirement: for 'Gt', 'Lt' "
              "operators, the value must be an integer");
        }
        req.values.push_back(v);
      } else {
        bool notin = rest.rfind("notin", 0) == 0;
        bool in = !notin && rest.rfind("in", 0) == 0;
        if (!in && !notin) {
          return absl::InvalidArgumentError("unable to parse requirement: found '" + rest +
                                            "', expected: in, notin, =, ==, !=, gt, lt");
        }
        std::string list = Trim(rest.substr(notin ? 5 : 2));
        if (list.size() < 2 || list.front() != '(' || list.back() != ')') {
          return absl::InvalidArgumentError("found '" + list + "', expected: '('");
        }
        req.op = notin ? Op::kNotIn : Op::kIn;
        for (auto v : absl::StrSplit(list.substr(1, list.size() - 2), ',')) {
          req.values.push_back(Trim(v));
        }
      }
    }
    if (auto st = CheckKey(req.key, part); !st.ok()) return st;
    for (const auto& v : req.values) {
      if (req.op == Op::kGreater || req.op == Op::kLess) continue;
      if (auto st = CheckValue(v); !st.ok()) return st;
    }
    sel.requirements_.push_back(std::move(req));
  }
  return sel;
}

bool LabelSelector::Matches(const std::map<std::string, std::string>& labels) const {
  for (const auto& r : requirements_) {
    auto it = labels.find(r.key);
    bool has = it != labels.end();
    switch (r.op) {
      case Op::kExists:
        if (!has) return false;
        break;
      case Op::kDoesNotExist:
        if (has) return false;
        break;
      case Op::kEquals:
      case Op::kIn:
        if (!has || std::find(r.values.begin(), r.values.end(), it->second) == r.values.end()) {
          return false;
        }
        break;
      case Op::kNotEquals:
      case Op::kNotIn:
        if (has && std::find(r.values.begin(), r.values.end(), it->second) != r.values.end()) {
          return false;
        }
        break;
      case Op::kGreater:
      case Op::kLess: {
        if (!has) return false;
        char* end = nullptr;
        long long have = std::strtoll(it->second.c_str(), &end, 10);
        if (it->second.empty() || *end != '\0') return false;
        long long want = std::strtoll(r.values[0].c_str(), nullptr, 10);
        if (r.op == Op::kGreater ? !(have > want) : !(have < want)) return false;
        break;
      }
    }
  }
  return true;
}

absl::StatusOr<FieldSelector> FieldSelector::Parse(const std::string& text,
                                                   const std::vector<std::string>& supported) {
  FieldSelector sel;
  if (Trim(text).empty()) return sel;
  for (const auto& raw : SplitTopLevel(text)) {
    std::string part = Trim(raw);
    if (part.empty()) continue;  // Kubernetes skips empty terms ("a=b,").
    Requirement req;
    size_t pos;
    size_t op_len;
    if ((pos = part.find("!=")) != std::string::npos) {
      req.equals = false;
      op_len = 2;
    } else if ((pos = part.find("==")) != std::string::npos) {
      req.equals = true;
      op_len = 2;
    } else if ((pos = part.find('=')) != std::string::npos) {
      req.equals = true;
      op_len = 1;
    } else {
      return absl::InvalidArgumentError("invalid selector: '" + text + "'; can't understand '" +
                                        part + "'");
    }
    req.field = Trim(part.substr(0, pos));
    req.value = Trim(part.substr(pos + op_len));
    bool known = req.field == "metadata.name" || req.field == "metadata.namespace" ||
                 std::find(supported.begin(), supported.end(), req.field) != supported.end();
    if (!known) {
      return absl::InvalidArgumentError("field label not supported: " + req.field);
    }
    sel.requirements_.push_back(std::move(req));
  }
  return sel;
}

bool FieldSelector::Matches(const std::string& name, const std::string& nspace,
                            const std::map<std::string, std::string>& fields) const {
  static const std::string kAbsent;
  for (const auto& r : requirements_) {
    const std::string* have = &kAbsent;
    if (r.field == "metadata.name") {
      have = &name;
    } else if (r.field == "metadata.namespace") {
      have = &nspace;
    } else if (auto it = fields.find(r.field); it != fields.end()) {
      have = &it->second;
    }
    if ((*have == r.value) != r.equals) return false;
  }
  return true;
}

}  // namespace qm::model
