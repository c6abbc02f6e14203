#include "model/dra.h"

#include <algorithm>
#include <charconv>

namespace qm::model {
namespace {

bool ParseInt(const std::string& text, int64_t& out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end && !text.empty();
}

bool Contains(const std::vector<std::string>& values, const std::string& value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

// One requirement against a value that may be absent (`present == false`).
bool RequirementMatches(const NodeSelectorRequirement& r, bool present, const std::string& value) {
  if (r.op == "In") return present && Contains(r.values, value);
  if (r.op == "NotIn") return !present || !Contains(r.values, value);
  if (r.op == "Exists") return present;
  if (r.op == "DoesNotExist") return !present;
  if (r.op == "Gt" || r.op == "Lt") {
    int64_t have = 0;
    int64_t want = 0;
    if (!present || r.values.size() != 1 || !ParseInt(value, have) ||
        !ParseInt(r.values[0], want)) {
      return false;
    }
    return r.op == "Gt" ? have > want : have < want;
  }
  return false;  // unknown operators select nothing, as in nodeaffinity
}

bool TermMatches(const NodeSelectorTerm& term, const NodeInfo& node) {
  if (term.match_expressions.empty() && term.match_fields.empty()) return false;
  for (const auto& r : term.match_expressions) {
    auto it = node.labels.find(r.key);
    bool present = it != node.labels.end();
    if (!RequirementMatches(r, present, present ? it->second : std::string())) return false;
  }
  for (const auto& r : term.match_fields) {
    if (r.key != "metadata.name") return false;
    if (!RequirementMatches(r, true, node.name)) return false;
  }
  return true;
}

}  // namespace

bool NodeSelectorMatches(const NodeSelector& selector, const NodeInfo& node) {
  return std::any_of(selector.terms.begin(), selector.terms.end(),
                     [&](const NodeSelectorTerm& t) { return TermMatches(t, node); });
}

const DeviceBinding& Device::Binding() const {
  static const DeviceBinding kNone;
  return binding != nullptr ? *binding : kNone;
}

bool Tolerates(const DeviceToleration& toleration, const DeviceTaint& taint) {
  if (!toleration.effect.empty() && toleration.effect != taint.effect) return false;
  if (!toleration.key.empty() && toleration.key != taint.key) return false;
  if (toleration.op == "Exists") return true;
  if (toleration.op.empty() || toleration.op == "Equal") return toleration.value == taint.value;
  return false;
}

}  // namespace qm::model
