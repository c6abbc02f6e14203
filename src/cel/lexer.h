#pragma once

// CEL's lexer (lexer.cc), used by the parser (parser.cc) and included by nothing else: the
// tokens, and the sink both report syntax errors into.

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cel/parser.h"

namespace qm::cel::lexing {

inline bool IsDigit(int c) { return c >= '0' && c <= '9'; }

enum class Tok : uint8_t {
  kEof,
  kIdent,
  kEscIdent,  // `field name` (only valid after '.')
  kInt,
  kUint,
  kDouble,
  kString,
  kBytes,
  kTrue,
  kFalse,
  kNull,
  kIn,
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  kAnd,
  kOr,
  kLBracket,
  kRBracket,
  kLBrace,
  kRBrace,
  kLParen,
  kRParen,
  kDot,
  kComma,
  kMinus,
  kBang,
  kQuestion,
  kColon,
  kPlus,
  kStar,
  kSlash,
  kPercent,
};

struct Token {
  Tok kind = Tok::kEof;
  size_t begin = 0;  // byte offsets into the source text
  size_t end = 0;
  // Identifier name, decoded string/bytes value, or the text of a number.
  std::string value;
};

// Collects issues up to the reporting limit. At the limit one marker issue is added and the
// sink reports full(); lexer and parser then stop.
class IssueSink {
 public:
  explicit IssueSink(int limit) : limit_(std::max(limit, 1)) {}

  void Add(size_t offset, std::string message) {
    if (full_) return;
    if (static_cast<int>(issues_.size()) >= limit_) {
      issues_.push_back(
          {"Syntax error: More than " + std::to_string(limit_) + " syntax errors", offset});
      full_ = true;
      return;
    }
    issues_.push_back({std::move(message), offset});
  }
  void Syntax(size_t offset, std::string_view message) {
    Add(offset, "Syntax error: " + std::string(message));
  }

  bool full() const { return full_; }
  bool empty() const { return issues_.empty(); }
  std::vector<Issue> Take() { return std::move(issues_); }

 private:
  const int limit_;
  bool full_ = false;
  std::vector<Issue> issues_;
};

// The whole input as tokens ending in kEof. Unrecognized characters are reported and dropped,
// as ANTLR's lexer does, so the parser still sees the rest. A string with a bad escape or
// without its closing quote is reported and still yields a token, so one mistake gives one
// message.
std::vector<Token> Lex(std::string_view text, IssueSink* issues);

}  // namespace qm::cel::lexing
