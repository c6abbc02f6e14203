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

}  // namespace qm::store::pg
