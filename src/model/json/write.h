#pragma once

// The compact JSON text of a tree, as nlohmann::json::dump() writes it, byte for byte (keys in
// the tree's order, the same escapes, numbers as dump() formats them), in a fraction of its
// time. Every stored body, spec digest and column is written by it, so that text written before
// and after it compares equal (a spec digest that changed by itself would bump generations).
//
// dump() goes through a virtual call per character and an UTF-8 decoder per byte; this writer
// copies runs of plain bytes whole. Floating-point numbers, binary values and strings that are
// not valid UTF-8 are rare and left to dump() (the last throws as dump() does).

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"

namespace qm::model::json {

// `value` as compact text: the same as value.dump().
std::string Write(const nlohmann::json& value);

// Appends Write(value) to `out`.
void AppendJson(const nlohmann::json& value, std::string* out);

// Appends Write(nlohmann::json(s)): `s` quoted and escaped.
void AppendJsonString(std::string_view s, std::string* out);

// Write(nlohmann::json(map)), without building the tree (labels, annotations, selectable
// fields).
std::string WriteStringMap(const std::map<std::string, std::string>& map);

// Write(nlohmann::json(list)), without building the tree (finalizers, a user's groups).
std::string WriteStringList(const std::vector<std::string>& list);

}  // namespace qm::model::json
