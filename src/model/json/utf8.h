#pragma once

// UTF-8 well-formedness for the JSON reader and writer (read.h, write.h).

#include <cstddef>

namespace qm::model::json {

// The length of the well-formed UTF-8 sequence at `p` (of `left` bytes, at least one), 0 if
// there is none: Unicode's table of well-formed sequences, which nlohmann's lexer and dump()
// also follow (no overlong forms, no surrogates, nothing past U+10FFFF).
inline size_t Utf8SequenceLength(const unsigned char* p, size_t left) {
  auto cont = [&](size_t i, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
    return i < left && p[i] >= lo && p[i] <= hi;
  };
  const unsigned char c = p[0];
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return cont(1) && cont(2) ? 3 : 0;
  if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
  if (c == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

}  // namespace qm::model::json
