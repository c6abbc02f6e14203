#pragma once

// JSON text parsed into a tree, as nlohmann::json::parse(text, nullptr, false) parses it: the
// same tree (value types included: non-negative integers unsigned, negative ones signed), a
// discarded value where parse() fails. It is write.h's counterpart for the text the service
// reads most: request bodies and stored bodies.
//
// parse() reads through a lexer that records every token and a SAX handler; this reader builds
// the tree directly, and members of an object written in key order (as Write writes them) go in
// at the end of the map without a search. Anything it does not read itself (a byte-order mark,
// \u escapes, floating-point numbers, integers of more than 18 digits, nesting deeper than 256,
// and every error) is handed to parse() whole, so that it is parsed, or fails, as before.

#include <string_view>

#include "nlohmann/json.hpp"

namespace qm::model::json {

// `text` parsed; a discarded value (is_discarded()) when it is not one JSON value.
nlohmann::json Read(std::string_view text);

}  // namespace qm::model::json
