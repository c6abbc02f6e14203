#pragma once

#include <string>

namespace qm {

// Configures the process-wide spdlog logger once at start-up. `level` is one of trace, debug,
// info, warn, error, off; `format` is "text" (human-readable lines) or "json" (one JSON object
// per line with time, level and the message, escaped).
void ConfigureLogging(const std::string& level, const std::string& format);

}  // namespace qm
