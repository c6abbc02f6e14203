#pragma once

#include <string>
#include <utility>
#include <vector>

namespace qm::store::pg {

// The SQL files of migrations/, embedded at build time: (file name, SQL), sorted by name.
const std::vector<std::pair<std::string, std::string>>& EmbeddedMigrations();

}  // namespace qm::store::pg
