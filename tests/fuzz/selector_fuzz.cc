// libFuzzer target for label and field selectors (model/selector.h): parse, then match.
//
// Input: one byte choosing the selector kind, then `selector` [kSeparator `labels`], where
// `labels` holds one `key=value` per line (a line without '=' is a key with an empty value).
//   byte even: LabelSelector. A parsed selector matches the labels given, and it must match a
//              label set built to satisfy it (when its requirements name distinct keys and
//              none is > or <).
//   byte odd:  FieldSelector, with the field paths of kind AllResourceTypes()[byte/2 % count]
//              supported. The same: it matches the fields given, and a set built to satisfy it.
// Never a crash, hang or exception; a finding aborts (see fuzz_util.h).
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "fuzz_util.h"
#include "model/resource_types.h"
#include "model/selector.h"

namespace {

using qm::fuzz::Crash;
using qm::model::FieldSelector;
using qm::model::LabelSelector;

std::map<std::string, std::string> ParseLines(const std::string& text) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    auto eq = line.find('=');
    out[line.substr(0, eq)] = eq == std::string::npos ? "" : line.substr(eq + 1);
    start = end + 1;
  }
  return out;
}

// Labels that satisfy `sel`, or false when this simple construction does not apply.
bool SatisfyingLabels(const LabelSelector& sel, std::map<std::string, std::string>* out) {
  std::set<std::string> keys;
  for (const auto& r : sel.requirements()) {
    if (!keys.insert(r.key).second) return false;
    switch (r.op) {
      case LabelSelector::Op::kEquals:
      case LabelSelector::Op::kIn:
        if (r.values.empty()) return false;
        (*out)[r.key] = r.values[0];
        break;
      case LabelSelector::Op::kExists:
        (*out)[r.key] = "";
        break;
      case LabelSelector::Op::kNotEquals:
      case LabelSelector::Op::kNotIn:
      case LabelSelector::Op::kDoesNotExist:
        break;  // absent
      case LabelSelector::Op::kGreater:
      case LabelSelector::Op::kLess:
        return false;
    }
  }
  return true;
}

void Labels(const std::string& text, const std::map<std::string, std::string>& given) {
  auto sel = LabelSelector::Parse(text);
  if (!sel.ok()) {
    if (sel.status().message().empty()) Crash("label selector error without a message");
    return;
  }
  (void)sel->Matches(given);
  for (const auto& r : sel->requirements()) {
    if ((r.op == LabelSelector::Op::kGreater || r.op == LabelSelector::Op::kLess) &&
        r.values.size() != 1) {
      Crash("label selector requirement > or < without exactly one value: " + text);
    }
  }
  if (sel->Empty() != sel->requirements().empty()) Crash("Empty() disagrees: " + text);
  std::map<std::string, std::string> labels;
  if (SatisfyingLabels(*sel, &labels) && !sel->Matches(labels)) {
    Crash("label selector does not match labels built to satisfy it: " + text);
  }
}

void Fields(const std::string& text, const std::map<std::string, std::string>& given,
            const qm::model::ResourceType& type) {
  auto sel = FieldSelector::Parse(text, type.field_selectors);
  if (!sel.ok()) {
    if (sel.status().message().empty()) Crash("field selector error without a message");
    return;
  }
  (void)sel->Matches("", "", given);
  std::map<std::string, std::string> fields;
  std::string name;
  std::string nspace;
  std::set<std::string> seen;
  for (const auto& r : sel->requirements()) {
    if (!seen.insert(r.field).second) return;
    std::string value = r.equals ? r.value : r.value + "x";
    if (r.field == "metadata.name") {
      name = std::move(value);
    } else if (r.field == "metadata.namespace") {
      nspace = std::move(value);
    } else {
      fields[r.field] = std::move(value);
    }
  }
  if (!sel->Matches(name, nspace, fields)) {
    Crash("field selector does not match fields built to satisfy it: " + text);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  auto [selector, lines] =
      qm::fuzz::SplitOnce(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  const auto given = ParseLines(lines);
  if (data[0] % 2 == 0) {
    Labels(selector, given);
  } else {
    const auto& types = qm::model::AllResourceTypes();
    Fields(selector, given, types[(data[0] / 2) % types.size()]);
  }
  return 0;
}
