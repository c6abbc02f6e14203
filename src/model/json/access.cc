#include "model/json/access.h"

namespace qm::model::json {

const nlohmann::json& At(const nlohmann::json& j, const char* key) {
  static const nlohmann::json* null = new nlohmann::json();
  if (!j.is_object()) return *null;
  auto it = j.find(key);
  return it == j.end() ? *null : *it;
}

std::string Str(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = At(j, key);
  return v.is_string() ? v.get<std::string>() : "";
}

}  // namespace qm::model::json
