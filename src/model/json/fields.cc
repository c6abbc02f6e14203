#include "model/json/fields.h"

#include "model/json/write.h"

namespace qm::model::json {
namespace {

using nlohmann::json;

const json* Member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

// A scalar as field selectors compare it; "" for objects, arrays and null.
std::string ScalarText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number()) return v.dump();
  return "";
}

}  // namespace

std::map<std::string, std::string> SelectableFields(const model::ResourceType& type,
                                                    const json& hub) {
  std::map<std::string, std::string> fields;
  for (const auto& path : type.field_selectors) {
    const json* cur = &hub;
    size_t start = 0;
    bool found = true;
    while (found && start <= path.size()) {
      size_t dot = path.find('.', start);
      std::string part =
          path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      if (!cur->is_object() || !cur->contains(part)) {
        found = false;
        break;
      }
      cur = &(*cur)[part];
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    if (found) fields[path] = ScalarText(*cur);
  }
  // Events select on "source" by the reporting component, as the apiserver does.
  if (type.group.empty() && type.kind == "Event") {
    const json* source = Member(hub, "source");
    const json* component = source != nullptr ? Member(*source, "component") : nullptr;
    fields["source"] = component != nullptr ? ScalarText(*component) : "";
  }
  return fields;
}

std::string SpecDigestOf(const nlohmann::json& hub) {
  if (!hub.is_object()) return "";
  auto spec = hub.find("spec");
  if (spec == hub.end() || spec->is_null()) return "";
  return model::SpecDigest(Write(*spec));
}

}  // namespace qm::model::json
