#include "api/rest/validator.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/quantity.h"
#include "model/field_error.h"

namespace qm::api::validation {

using model::Quote;

const json& EmptyObject() {
  static const json* empty = new json(json::object());
  return *empty;
}

const json* Get(const json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);  // nlohmann 3.11 compares object keys transparently
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

const json& ObjectOrEmpty(const json* value) {
  return value != nullptr && value->is_object() ? *value : EmptyObject();
}

bool IsInt64(const json& v) {
  return v.is_number_integer() &&
         !(v.is_number_unsigned() &&
           v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
}

std::string KeyString(const json& obj, std::string_view key) {
  const json* v = Get(obj, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

bool SameValue(const json* a, const json* b) {
  if (a == nullptr || b == nullptr) return a == b;
  return *a == *b;
}

std::string Render(const json& v) {
  if (v.is_string()) return Quote(v.get<std::string>());
  if (v.is_null()) return Quote("null");
  return v.dump();
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    if (pos == std::string::npos) {
      parts.push_back(s.substr(start));
      return parts;
    }
    parts.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

std::string TruncateKey(const std::string& key, size_t max_len) {
  max_len = std::max<size_t>(max_len, 16);
  if (key.size() <= max_len) return key;
  const size_t remaining = max_len - 3;
  return key.substr(0, (remaining + 1) / 2) + "..." + key.substr(key.size() - remaining / 2);
}

bool IsOneOf(const std::string& v, const std::vector<std::string>& allowed) {
  return std::find(allowed.begin(), allowed.end(), v) != allowed.end();
}

void Validator::TypeError(const json& value, const Path& p, const char* type) {
  Add(model::Invalid(p.str(), Render(value), std::string("must be of type ") + type));
}

const json& Validator::Object(const json* value, const Path& p) {
  if (value == nullptr || value->is_null()) return EmptyObject();
  if (!value->is_object()) {
    TypeError(*value, p, "object");
    return EmptyObject();
  }
  return *value;
}

std::optional<std::string> Validator::OptString(const json& obj, std::string_view key,
                                                const Path& p) {
  const json* v = Get(obj, key);
  if (v == nullptr) return std::nullopt;
  return ItemString(*v, p);
}

std::string Validator::String(const json& obj, std::string_view key, const Path& p) {
  return OptString(obj, key, p).value_or("");
}

std::optional<std::string> Validator::ItemString(const json& v, const Path& p) {
  if (v.is_string()) return v.get<std::string>();
  TypeError(v, p, "string");
  return std::nullopt;
}

std::vector<std::string> Validator::StringItems(const json* list, const Path& p) {
  std::vector<std::string> out;
  if (list == nullptr) return out;
  for (size_t i = 0; i < list->size(); ++i) {
    if (auto s = ItemString((*list)[i], p.Index(i))) out.push_back(*s);
  }
  return out;
}

std::vector<std::string> Validator::StringList(const json& obj, std::string_view key,
                                               const Path& p) {
  return StringItems(OptArray(obj, key, p), p);
}

std::optional<int64_t> Validator::OptInt(const json& obj, std::string_view key, const Path& p) {
  const json* v = Get(obj, key);
  if (v == nullptr) return std::nullopt;
  if (IsInt64(*v)) return v->get<int64_t>();
  TypeError(*v, p, "integer");
  return std::nullopt;
}

std::optional<bool> Validator::OptBool(const json& obj, std::string_view key, const Path& p) {
  const json* v = Get(obj, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_boolean()) return v->get<bool>();
  TypeError(*v, p, "boolean");
  return std::nullopt;
}

const json* Validator::OptArray(const json& obj, std::string_view key, const Path& p) {
  const json* v = Get(obj, key);
  if (v == nullptr) return nullptr;
  if (v->is_array()) return v;
  TypeError(*v, p, "array");
  return nullptr;
}

const json* Validator::OptObject(const json& obj, std::string_view key, const Path& p) {
  const json* v = Get(obj, key);
  if (v == nullptr) return nullptr;
  if (v->is_object()) return v;
  TypeError(*v, p, "object");
  return nullptr;
}

const json* Validator::List(const json& obj, std::string_view key, const Path& p, size_t max) {
  const json* list = OptArray(obj, key, p);
  if (list != nullptr && list->size() > max) {
    Add(model::TooMany(p.str(), list->size(), max));
    return nullptr;
  }
  return list;
}

void Validator::Unique(const std::vector<std::optional<std::string>>& keys, const Path& p,
                       bool quote) {
  std::set<std::string> seen;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!keys[i].has_value()) continue;
    if (!seen.insert(*keys[i]).second) {
      Add(model::Duplicate(p.Index(i).str(), quote ? Quote(*keys[i]) : *keys[i]));
    }
  }
}

std::optional<Quantity> Validator::QuantityAt(const json* value, const Path& p) {
  if (value == nullptr || value->is_null()) return std::nullopt;
  std::string text;
  if (value->is_string()) {
    text = value->get<std::string>();
  } else if (value->is_number()) {
    text = value->dump();
  } else {
    TypeError(*value, p, "quantity");
    return std::nullopt;
  }
  absl::StatusOr<Quantity> q = ParseQuantity(text);
  if (!q.ok()) {
    Add(model::Invalid(p.str(), Quote(text), std::string(q.status().message())));
    return std::nullopt;
  }
  return *q;
}

}  // namespace qm::api::validation
