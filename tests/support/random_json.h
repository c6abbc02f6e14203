#pragma once

// Random JSON trees for the tests that compare the JSON writer and reader with nlohmann
// (tests/unit/model/json): every value type, integers across int64 and uint64, floats, strings
// of every ASCII byte but NUL with some UTF-8 among them, and nesting up to five levels.

#include <cmath>
#include <cstdint>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

namespace qm::testing {

inline nlohmann::json RandomJson(std::mt19937& rng, int depth = 0) {
  std::uniform_int_distribution<int> kind(0, depth > 3 ? 6 : 8);
  switch (kind(rng)) {
    case 0:
      return nullptr;
    case 1:
      return rng() % 2 == 0;
    case 2:
      return static_cast<int64_t>(rng()) - (1LL << 31);
    case 3:
      return static_cast<uint64_t>(rng() % 1000);
    case 4:
      return static_cast<uint64_t>(rng()) << 32 | rng();
    case 5:
      return std::ldexp(static_cast<double>(rng()), static_cast<int>(rng() % 80) - 40);
    case 6: {
      std::string s;
      for (int n = rng() % 12; n > 0; --n) s.push_back(static_cast<char>(0x01 + rng() % 0x7f));
      if (rng() % 4 == 0) s += "\xc3\xa9\xf0\x9f\x98\x80";
      return s;
    }
    case 7: {
      nlohmann::json a = nlohmann::json::array();
      for (int n = rng() % 5; n > 0; --n) a.push_back(RandomJson(rng, depth + 1));
      return a;
    }
    default: {
      nlohmann::json o = nlohmann::json::object();
      for (int n = rng() % 5; n > 0; --n) {
        o["k" + std::to_string(rng() % 50)] = RandomJson(rng, depth + 1);
      }
      return o;
    }
  }
}

}  // namespace qm::testing
