#pragma once

// Read-only access to hub-version JSON without copies, for the controllers that read objects the
// codecs stored: a missing member, or a member of something that is not an object, reads as
// null (or "").

#include <string>

#include "nlohmann/json.hpp"

namespace qm::model::json {

// Member `key` of `j`, or a null value.
const nlohmann::json& At(const nlohmann::json& j, const char* key);

// Member `key` of `j` when it is a string, else "".
std::string Str(const nlohmann::json& j, const char* key);

}  // namespace qm::model::json
