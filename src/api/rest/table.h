#pragma once

#include <chrono>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/resource_types.h"

namespace qm::api {

// Server-side printing (`Accept: ...;as=Table`) with the columns the real apiserver uses.

// The columnDefinitions for `type`.
nlohmann::json TableColumns(const model::ResourceType& type);

// One row for a full object (in any served version; only hub-compatible fields are read).
nlohmann::json TableRow(const model::ResourceType& type, const nlohmann::json& obj,
                        std::chrono::system_clock::time_point now);

// A Table with the given rows. `with_columns` false leaves columnDefinitions out (watch events
// after the first).
nlohmann::json MakeTable(const model::ResourceType& type, nlohmann::json rows,
                         const std::string& resource_version, const std::string& continue_token,
                         bool with_columns);

}  // namespace qm::api
