#pragma once

// The values field selectors and indexes use ("spec.nodeName" -> "gpu-node-a"), computed from an
// object's hub-version JSON. One function for every writer: the REST codecs and the controllers
// that write objects themselves.

#include <map>
#include <string>

#include "model/object.h"
#include "model/resource_types.h"
#include "nlohmann/json.hpp"

namespace qm::model::json {

// Field-selector values of a hub-shape object (spec/status...) besides metadata.name and
// metadata.namespace, which selectors read from the object's metadata (FieldSelector::Matches):
// every stored object would otherwise hold its name twice.
std::map<std::string, std::string> SelectableFields(const ResourceType& type,
                                                    const nlohmann::json& hub);

// The spec digest of a hub-shape object (model::SpecDigest of its canonical "spec"; "" when it
// has none).
std::string SpecDigestOf(const nlohmann::json& hub);

}  // namespace qm::model::json
