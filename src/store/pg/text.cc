#include "store/pg/text.h"

#include <cstring>

namespace qm::store::pg {

int64_t Micros(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

std::string TextArray(const std::vector<std::string>& items) {
  // Sized first, then written without a capacity check per character: the bodies of a batch's
  // writes pass through here, and JSON text is full of quotes to escape.
  size_t size = 2 + (items.empty() ? 0 : items.size() - 1);
  for (const std::string& item : items) {
    size += item.size() + 2;
    for (char ch : item) size += (ch == '"' || ch == '\\') ? 1 : 0;
  }
  std::string out(size, '\0');
  char* p = out.data();
  *p++ = '{';
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) *p++ = ',';
    *p++ = '"';
    for (char ch : items[i]) {
      if (ch == '"' || ch == '\\') *p++ = '\\';
      *p++ = ch;
    }
    *p++ = '"';
  }
  *p = '}';
  return out;
}

namespace {

void PutInt32(char*& p, uint32_t v) {
  *p++ = static_cast<char>(v >> 24);
  *p++ = static_cast<char>(v >> 16);
  *p++ = static_cast<char>(v >> 8);
  *p++ = static_cast<char>(v);
}

constexpr uint32_t kTextOid = 25;  // pg_type.oid of text

}  // namespace

std::string BinaryTextArray(const std::vector<std::string>& items) {
  // ndim, flags (no nulls), element type; then, with one dimension, its size and lower bound.
  size_t size = 12 + (items.empty() ? 0 : 8);
  for (const std::string& item : items) size += 4 + item.size();
  std::string out(size, '\0');
  char* p = out.data();
  PutInt32(p, items.empty() ? 0 : 1);
  PutInt32(p, 0);
  PutInt32(p, kTextOid);
  if (!items.empty()) {
    PutInt32(p, static_cast<uint32_t>(items.size()));
    PutInt32(p, 1);
  }
  for (const std::string& item : items) {
    PutInt32(p, static_cast<uint32_t>(item.size()));
    if (!item.empty()) {
      std::memcpy(p, item.data(), item.size());
      p += item.size();
    }
  }
  return out;
}

}  // namespace qm::store::pg
