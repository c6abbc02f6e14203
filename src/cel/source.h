#pragma once

// The text of a CEL expression and the user-facing rendering of problems found in it.
//
// Problems in the user's expression (syntax errors, type errors) are data: an Issue is a message
// and the byte offset it points at. Source turns offsets into line:column and renders issues in
// the format Kubernetes shows for CEL (cel-go's common.Error.ToDisplayString):
//
//   ERROR: <input>:1:5: Syntax error: mismatched input '<EOF>' expecting ...
//    | 1 + (
//    | ....^
//
// The same words are used for the REST API and the UI.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/utf8.h"

namespace qm::cel {

// One problem found in an expression. `offset` is a byte offset into Source::text(); an offset
// at text().size() points just past the end (e.g. "unexpected end of input").
struct Issue {
  std::string message;
  size_t offset = 0;

  friend bool operator==(const Issue&, const Issue&) = default;
};

// A position for display: 1-based line, 1-based column counted in Unicode code points from the
// start of the line (an invalid UTF-8 byte counts as one code point, as in cel-go).
struct SourceLocation {
  int line = 1;
  int column = 1;

  friend bool operator==(const SourceLocation&, const SourceLocation&) = default;
};

// An immutable expression text plus a line index. Thread-compatible and cheap to query:
// GetLocation() is O(log lines + line length). The text may be any bytes (invalid UTF-8 is
// tolerated everywhere; it renders as U+FFFD).
class Source {
 public:
  // `description` names the source in rendered issues; Kubernetes uses "<input>".
  explicit Source(std::string text, std::string description = "<input>");

  const std::string& text() const { return text_; }
  const std::string& description() const { return description_; }

  // Line and column of a byte offset. Offsets past the end are clamped to text().size().
  SourceLocation GetLocation(size_t offset) const;

  // The text of a 1-based line without its line terminator ("\n", or "\r\n"); nullopt when the
  // line does not exist.
  std::optional<std::string_view> Snippet(int line) const;

  // Renders one issue as cel-go does: "ERROR: <description>:<line>:<column>: <message>", then
  // " | " + the source line (tabs shown as spaces) and " | " + one '.' per code point before the
  // column + '^'. East Asian wide and fullwidth characters use the fullwidth forms U+FF0E and
  // U+FF3E so the caret stays aligned in a monospace font. Lines longer than 16384 bytes are not
  // echoed. Invalid UTF-8 in the line is shown as U+FFFD, so the result is always valid UTF-8.
  std::string DisplayIssue(const Issue& issue) const;

  // Renders all issues, ordered by position (stable for equal positions), joined by "\n".
  std::string DisplayIssues(const std::vector<Issue>& issues) const;

 private:
  std::string text_;
  std::string description_;
  std::vector<size_t> line_starts_;  // byte offset of the first byte of each line
};

// The UTF-8 helpers live in common/utf8.h; CEL code names them unqualified.
using qm::AppendUtf8;
using qm::DecodeUtf8;
using qm::SanitizeUtf8;

}  // namespace qm::cel
