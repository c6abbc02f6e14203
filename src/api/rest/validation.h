#pragma once

#include <nlohmann/json.hpp>

#include "model/field_error.h"
#include "model/resource_types.h"

namespace qm::api {

// Validates an object already converted to the hub version (v1) and defaulted.
//
// `obj` is the whole object (apiVersion, kind, metadata, spec, status). `old` is the stored
// object on update and nullptr on create. Checks the metadata (name format for the kind,
// label and annotation syntax), every name format and limit of the DRA object model, and on
// update the immutable fields. Returns the problems with field paths in the hub version.
model::FieldErrors ValidateObject(const model::ResourceType& type, const nlohmann::json& obj,
                                  const nlohmann::json* old);

// Validates a write through the /status subresource: `obj` carries the new status, `old` the
// stored object.
model::FieldErrors ValidateStatusUpdate(const model::ResourceType& type, const nlohmann::json& obj,
                                        const nlohmann::json& old);

}  // namespace qm::api
