#pragma once

// Precompiled by run_fuzzers.sh and force-included into every file it compiles: the heavy
// third-party and standard headers most of src/ includes (about 2 s of a 5-20 s compile under
// the sanitizers). Only headers whose meaning does not depend on what precedes them.

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
