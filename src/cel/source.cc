#include "cel/source.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

namespace qm::cel {
namespace {

constexpr size_t kMaxSnippetLength = 16384;  // cel-go's maxSnippetLength
constexpr std::string_view kDot = ".";
constexpr std::string_view kCaret = "^";
constexpr std::string_view kWideDot = "\uff0e";
constexpr std::string_view kWideCaret = "\uff3e";

// East Asian Wide (W) and Fullwidth (F) ranges of Unicode's EastAsianWidth.txt, reduced to the
// blocks that matter for a caret under an expression: CJK, Hangul, kana, fullwidth forms and the
// common emoji blocks. Everything else is one column wide.
bool IsWide(char32_t cp) {
  struct Range {
    char32_t lo, hi;
  };
  static constexpr Range kWide[] = {
      {0x1100, 0x115F},   {0x231A, 0x231B},   {0x2329, 0x232A},   {0x23E9, 0x23EC},
      {0x23F0, 0x23F0},   {0x23F3, 0x23F3},   {0x25FD, 0x25FE},   {0x2614, 0x2615},
      {0x2648, 0x2653},   {0x267F, 0x267F},   {0x2693, 0x2693},   {0x26A1, 0x26A1},
      {0x26AA, 0x26AB},   {0x26BD, 0x26BE},   {0x26C4, 0x26C5},   {0x26CE, 0x26CE},
      {0x26D4, 0x26D4},   {0x26EA, 0x26EA},   {0x26F2, 0x26F3},   {0x26F5, 0x26F5},
      {0x26FA, 0x26FA},   {0x26FD, 0x26FD},   {0x2705, 0x2705},   {0x270A, 0x270B},
      {0x2728, 0x2728},   {0x274C, 0x274C},   {0x274E, 0x274E},   {0x2753, 0x2755},
      {0x2757, 0x2757},   {0x2795, 0x2797},   {0x27B0, 0x27B0},   {0x27BF, 0x27BF},
      {0x2B1B, 0x2B1C},   {0x2B50, 0x2B50},   {0x2B55, 0x2B55},   {0x2E80, 0x303E},
      {0x3041, 0x33FF},   {0x3400, 0x4DBF},   {0x4E00, 0x9FFF},   {0xA000, 0xA4CF},
      {0xA960, 0xA97F},   {0xAC00, 0xD7A3},   {0xF900, 0xFAFF},   {0xFE10, 0xFE19},
      {0xFE30, 0xFE6F},   {0xFF00, 0xFF60},   {0xFFE0, 0xFFE6},   {0x16FE0, 0x18CFF},
      {0x1B000, 0x1B2FF}, {0x1F004, 0x1F004}, {0x1F0CF, 0x1F0CF}, {0x1F18E, 0x1F18E},
      {0x1F191, 0x1F19A}, {0x1F200, 0x1F2FF}, {0x1F300, 0x1F64F}, {0x1F680, 0x1F6FF},
      {0x1F7E0, 0x1F7EB}, {0x1F90C, 0x1F9FF}, {0x1FA70, 0x1FAFF}, {0x20000, 0x2FFFD},
      {0x30000, 0x3FFFD},
  };
  for (const Range& r : kWide) {
    if (cp < r.lo) return false;
    if (cp <= r.hi) return true;
  }
  return false;
}

}  // namespace

Source::Source(std::string text, std::string description)
    : text_(std::move(text)), description_(std::move(description)) {
  line_starts_.push_back(0);
  for (size_t i = 0; i < text_.size(); ++i) {
    if (text_[i] == '\n') line_starts_.push_back(i + 1);
  }
}

SourceLocation Source::GetLocation(size_t offset) const {
  offset = std::min(offset, text_.size());
  // The last line starting at or before `offset`.
  const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - 1;
  SourceLocation loc;
  loc.line = static_cast<int>(it - line_starts_.begin()) + 1;
  for (size_t i = *it; i < offset;) {
    size_t size;
    DecodeUtf8(text_, i, &size);
    i += size;
    ++loc.column;
  }
  return loc;
}

std::optional<std::string_view> Source::Snippet(int line) const {
  if (line < 1 || static_cast<size_t>(line) > line_starts_.size()) return std::nullopt;
  const size_t begin = line_starts_[line - 1];
  size_t end =
      static_cast<size_t>(line) < line_starts_.size() ? line_starts_[line] - 1 : text_.size();
  if (end > begin && text_[end - 1] == '\r') --end;
  return std::string_view(text_).substr(begin, end - begin);
}

std::string Source::DisplayIssue(const Issue& issue) const {
  const SourceLocation loc = GetLocation(issue.offset);
  std::string out = "ERROR: " + description_ + ":" + std::to_string(loc.line) + ":" +
                    std::to_string(loc.column) + ": " + SanitizeUtf8(issue.message);
  const std::optional<std::string_view> snippet = Snippet(loc.line);
  if (!snippet.has_value() || snippet->size() > kMaxSnippetLength) return out;
  std::string line;
  std::string carets;
  int column = 1;
  bool caret_done = false;
  for (size_t i = 0; i < snippet->size();) {
    size_t size;
    char32_t cp = DecodeUtf8(*snippet, i, &size);
    if (cp == '\t') cp = ' ';
    AppendUtf8(cp, &line);
    if (column < loc.column) {
      carets.append(IsWide(cp) ? kWideDot : kDot);
    } else if (column == loc.column) {
      carets.append(IsWide(cp) ? kWideCaret : kCaret);
      caret_done = true;
    }
    ++column;
    i += size;
  }
  if (!caret_done) carets.append(kCaret);  // the issue points past the end of the line
  out += "\n | " + line + "\n | " + carets;
  return out;
}

std::string Source::DisplayIssues(const std::vector<Issue>& issues) const {
  std::vector<const Issue*> sorted;
  sorted.reserve(issues.size());
  for (const Issue& issue : issues) sorted.push_back(&issue);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const Issue* a, const Issue* b) { return a->offset < b->offset; });
  std::string out;
  for (const Issue* issue : sorted) {
    if (!out.empty()) out += "\n";
    out += DisplayIssue(*issue);
  }
  return out;
}

}  // namespace qm::cel
