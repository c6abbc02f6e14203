#pragma once

// How the PostgreSQL store spells values in statement parameters.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace qm::store::pg {

// Microseconds since the Unix epoch (the store's timestamps travel as these).
int64_t Micros(std::chrono::system_clock::time_point t);

// A PostgreSQL array literal with every element quoted.
std::string TextArray(const std::vector<std::string>& items);

// A one-dimensional text[] in PostgreSQL's binary format (what array_send writes: dimensions,
// element type, then each element's length and bytes), for a parameter sent in binary. The
// server copies the elements as they are, where a literal is read character by character and
// unquoted: the writer's bodies and metadata go this way.
std::string BinaryTextArray(const std::vector<std::string>& items);

}  // namespace qm::store::pg
