#pragma once

// UTF-8 decoding and checks for text that comes from clients: CEL sources, request targets,
// header values and protobuf strings. JSON output (nlohmann) throws on invalid UTF-8, so text
// that ends up in a response or a stored object is checked or sanitized with these first.

#include <cstddef>
#include <string>
#include <string_view>

namespace qm {

// Decodes one UTF-8 code point at `text[pos]`. Returns the code point and sets *size to the
// number of bytes used; an invalid or truncated sequence yields U+FFFD with *size == 1.
// REQUIRES: pos < text.size().
char32_t DecodeUtf8(std::string_view text, size_t pos, size_t* size);

// Appends the UTF-8 encoding of `cp` to `out`; surrogates and values above U+10FFFF are encoded
// as U+FFFD.
void AppendUtf8(char32_t cp, std::string* out);

// Returns `text` with every invalid UTF-8 sequence replaced by U+FFFD.
std::string SanitizeUtf8(std::string_view text);

// True when `text` is well-formed UTF-8 (no overlong forms, surrogates or values past U+10FFFF).
bool IsValidUtf8(std::string_view text);

}  // namespace qm
