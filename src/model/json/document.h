#pragma once

// A stored object's body, parsed once, for the controllers that keep bodies between changes and
// write edited copies back (the scheduler). They hold Documents and change them only through the
// named edits of model/json/edits.h, so that the JSON itself stays inside the codec; unknown
// fields ride along untouched, as Kubernetes round-trips them.

#include <memory>
#include <string>
#include <string_view>

#include "model/json/write.h"
#include "model/object.h"
#include "nlohmann/json.hpp"

namespace qm::model::json {

class Document {
 public:
  // An empty object.
  Document() : value_(nlohmann::json::object()) {}
  // `value` itself; an empty object when it is not an object.
  explicit Document(nlohmann::json value);

  // `text` parsed; an empty object when it is not a JSON object.
  static Document Parse(std::string_view text);

  // The JSON, for the codec's own functions.
  const nlohmann::json& value() const { return value_; }
  nlohmann::json& value() { return value_; }

  // The compact text the store keeps.
  std::string Dump() const { return Write(value_); }

  bool operator==(const Document& other) const { return value_ == other.value_; }

 private:
  nlohmann::json value_;
};

// Documents are shared between the views that hold them and the commits that write them; an
// edit copies first.
using SharedDocument = std::shared_ptr<const Document>;

// Keeps `doc`, which must be what `obj.body` parses to, as the object's parsed body
// (Object::parsed).
void KeepParsed(Object& obj, SharedDocument doc);

// The parsed body kept with `obj` when it was kept for the text `obj.body` holds now; null
// otherwise (never kept, or `body` replaced since).
const SharedDocument* ParsedBody(const Object& obj);

}  // namespace qm::model::json
