#include "store/pg/text.h"

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

}  // namespace qm::store::pg
