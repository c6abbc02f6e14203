#include "cel/lexer.h"

namespace qm::cel::lexing {
namespace {

bool IsHex(int c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool IsLetter(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
int HexValue(int c) {
  if (IsDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

// ------------------------------------------------------------------------------------------------
// Lexer: the whole input becomes a token vector ending in kEof. Unrecognized characters are
// reported and dropped, as ANTLR's lexer does, so the parser still sees the rest. A string with a
// bad escape or without its closing quote is reported and still yields a token, so one mistake
// gives one message.

class Lexer {
 public:
  Lexer(std::string_view text, IssueSink* issues) : text_(text), issues_(issues) {}

  std::vector<Token> Run() {
    std::vector<Token> tokens;
    while (!issues_->full()) {
      SkipSpaceAndComments();
      if (pos_ >= text_.size()) break;
      Token tok;
      if (Next(&tok)) tokens.push_back(std::move(tok));
    }
    tokens.push_back(Token{Tok::kEof, text_.size(), text_.size(), {}});
    return tokens;
  }

 private:
  // The byte at `i` (0..255), or -1 past the end.
  int Ch(size_t i) const { return i < text_.size() ? static_cast<unsigned char>(text_[i]) : -1; }

  void SkipSpaceAndComments() {
    while (pos_ < text_.size()) {
      const int c = Ch(pos_);
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f') {
        ++pos_;
      } else if (c == '/' && Ch(pos_ + 1) == '/') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else {
        return;
      }
    }
  }

  // The text of [begin, end) for a message, as valid UTF-8.
  std::string Text(size_t begin, size_t end) const {
    return SanitizeUtf8(text_.substr(begin, std::min(end, text_.size()) - begin));
  }

  // Offset just past the code point at `i`.
  size_t NextCodePoint(size_t i) const {
    size_t size = 1;
    if (i < text_.size()) DecodeUtf8(text_, i, &size);
    return i + size;
  }

  // The end of an escape sequence's text for a message: through the character at `bad` when it
  // is visible and does not end the literal, else just before it.
  size_t ShownEnd(size_t bad) const {
    const int c = Ch(bad);
    if (c < 0x20 || c == '"' || c == '\'' || c == 0x7f) return bad;
    return NextCodePoint(bad);
  }

  void RecognitionError(size_t begin, size_t end) {
    issues_->Syntax(begin, "token recognition error at: '" + Text(begin, end) + "'");
  }

  bool Next(Token* tok) {
    const size_t start = pos_;
    const int c = Ch(pos_);
    tok->begin = start;
    if (c == 'r' || c == 'R') {
      if (Ch(pos_ + 1) == '"' || Ch(pos_ + 1) == '\'') {
        return LexString(start, pos_ + 1, /*raw=*/true, /*bytes=*/false, tok);
      }
    } else if (c == 'b' || c == 'B') {
      if (Ch(pos_ + 1) == '"' || Ch(pos_ + 1) == '\'') {
        return LexString(start, pos_ + 1, /*raw=*/false, /*bytes=*/true, tok);
      }
      if ((Ch(pos_ + 1) == 'r' || Ch(pos_ + 1) == 'R') &&
          (Ch(pos_ + 2) == '"' || Ch(pos_ + 2) == '\'')) {
        return LexString(start, pos_ + 2, /*raw=*/true, /*bytes=*/true, tok);
      }
    }
    if (IsDigit(c) || (c == '.' && IsDigit(Ch(pos_ + 1)))) return LexNumber(tok);
    if (IsLetter(c) || c == '_') return LexIdent(tok);
    if (c == '"' || c == '\'') return LexString(start, pos_, /*raw=*/false, /*bytes=*/false, tok);
    if (c == '`') return LexEscapedIdent(tok);

    const auto single = [&](Tok kind) {
      tok->kind = kind;
      tok->end = ++pos_;
      return true;
    };
    const auto pair = [&](int second, Tok both, Tok one) {
      if (Ch(pos_ + 1) == second) {
        tok->kind = both;
        pos_ += 2;
        tok->end = pos_;
        return true;
      }
      return single(one);
    };
    // '=', '&' and '|' exist only doubled. Like ANTLR, report the lone character together with
    // the one that broke the token, and drop both.
    const auto doubled = [&](int ch, Tok kind) {
      if (Ch(pos_ + 1) == ch) {
        tok->kind = kind;
        pos_ += 2;
        tok->end = pos_;
        return true;
      }
      const size_t end = pos_ + 1 < text_.size() ? NextCodePoint(pos_ + 1) : pos_ + 1;
      RecognitionError(start, Ch(pos_ + 1) >= 0x20 ? end : pos_ + 1);
      pos_ = end;
      return false;
    };
    switch (c) {
      case '(':
        return single(Tok::kLParen);
      case ')':
        return single(Tok::kRParen);
      case '[':
        return single(Tok::kLBracket);
      case ']':
        return single(Tok::kRBracket);
      case '{':
        return single(Tok::kLBrace);
      case '}':
        return single(Tok::kRBrace);
      case ',':
        return single(Tok::kComma);
      case '.':
        return single(Tok::kDot);
      case '?':
        return single(Tok::kQuestion);
      case ':':
        return single(Tok::kColon);
      case '+':
        return single(Tok::kPlus);
      case '-':
        return single(Tok::kMinus);
      case '*':
        return single(Tok::kStar);
      case '/':
        return single(Tok::kSlash);
      case '%':
        return single(Tok::kPercent);
      case '!':
        return pair('=', Tok::kNe, Tok::kBang);
      case '<':
        return pair('=', Tok::kLe, Tok::kLt);
      case '>':
        return pair('=', Tok::kGe, Tok::kGt);
      case '=':
        return doubled('=', Tok::kEq);
      case '&':
        return doubled('&', Tok::kAnd);
      case '|':
        return doubled('|', Tok::kOr);
      default: {
        const size_t end = NextCodePoint(pos_);
        RecognitionError(start, end);
        pos_ = end;
        return false;
      }
    }
  }

  bool LexIdent(Token* tok) {
    size_t i = pos_;
    while (IsLetter(Ch(i)) || IsDigit(Ch(i)) || Ch(i) == '_') ++i;
    tok->value.assign(text_.substr(pos_, i - pos_));
    tok->end = i;
    pos_ = i;
    if (tok->value == "true") {
      tok->kind = Tok::kTrue;
    } else if (tok->value == "false") {
      tok->kind = Tok::kFalse;
    } else if (tok->value == "null") {
      tok->kind = Tok::kNull;
    } else if (tok->value == "in") {
      tok->kind = Tok::kIn;
    } else {
      tok->kind = Tok::kIdent;
    }
    return true;
  }

  // `name` with letters, digits and _ . - / and space, as cel-go's ESC_IDENTIFIER.
  bool LexEscapedIdent(Token* tok) {
    const size_t start = pos_;
    size_t i = pos_ + 1;
    while (true) {
      const int c = Ch(i);
      if (c == '`' && i > start + 1) {
        tok->kind = Tok::kEscIdent;
        tok->value.assign(text_.substr(start + 1, i - start - 1));
        tok->end = pos_ = i + 1;
        return true;
      }
      if (IsLetter(c) || IsDigit(c) || c == '_' || c == '.' || c == '-' || c == '/' || c == ' ') {
        ++i;
        continue;
      }
      const size_t end = c < 0 ? i : NextCodePoint(i);
      RecognitionError(start, end);
      pos_ = end;
      return false;
    }
  }

  // Numbers, by longest match as in CEL.g4:
  //   NUM_FLOAT  DIGIT+ '.' DIGIT+ EXP? | DIGIT+ EXP | '.' DIGIT+ EXP?
  //   NUM_INT    DIGIT+ | '0x' HEX+          NUM_UINT  NUM_INT [uU]
  bool LexNumber(Token* tok) {
    const size_t start = pos_;
    size_t i = pos_;
    if (Ch(i) == '0' && Ch(i + 1) == 'x' && IsHex(Ch(i + 2))) {
      i += 2;
      while (IsHex(Ch(i))) ++i;
      tok->kind = Tok::kInt;
    } else {
      bool is_double = false;
      while (IsDigit(Ch(i))) ++i;
      if (Ch(i) == '.' && IsDigit(Ch(i + 1))) {
        i += 1;
        while (IsDigit(Ch(i))) ++i;
        is_double = true;
      }
      if (Ch(i) == 'e' || Ch(i) == 'E') {
        size_t j = i + 1;
        if (Ch(j) == '+' || Ch(j) == '-') ++j;
        if (IsDigit(Ch(j))) {
          while (IsDigit(Ch(j))) ++j;
          i = j;
          is_double = true;
        }
      }
      tok->kind = is_double ? Tok::kDouble : Tok::kInt;
    }
    if (tok->kind == Tok::kInt && (Ch(i) == 'u' || Ch(i) == 'U')) {
      tok->kind = Tok::kUint;
      tok->value.assign(text_.substr(start, i - start));  // without the suffix
      ++i;
    } else {
      tok->value.assign(text_.substr(start, i - start));
    }
    tok->end = pos_ = i;
    return true;
  }

  // A string or bytes literal whose opening quote is at `quote`; `start` is where the token
  // begins (at its r/b prefix, if any). Single-quoted forms end at the matching quote and may
  // not contain a newline; triple-quoted forms may. Raw forms keep backslashes. Newlines in the
  // text are normalized to "\n" as cel-go does; invalid UTF-8 becomes U+FFFD.
  bool LexString(size_t start, size_t quote, bool raw, bool bytes, Token* tok) {
    const int q = Ch(quote);
    const bool triple = Ch(quote + 1) == q && Ch(quote + 2) == q;
    size_t i = quote + (triple ? 3 : 1);
    std::string value;
    bool terminated = false;
    while (i < text_.size()) {
      const int c = Ch(i);
      if (triple) {
        if (c == q && Ch(i + 1) == q && Ch(i + 2) == q) {
          i += 3;
          terminated = true;
          break;
        }
      } else {
        if (c == q) {
          i += 1;
          terminated = true;
          break;
        }
        if (c == '\n' || c == '\r') break;
      }
      if (c == '\\' && !raw) {
        i = LexEscape(i, bytes, &value);
        continue;
      }
      if (c == '\r') {
        value.push_back('\n');
        i += Ch(i + 1) == '\n' ? 2 : 1;
        continue;
      }
      size_t size;
      const char32_t cp = DecodeUtf8(text_, i, &size);
      if (cp == 0xFFFD && size == 1) {
        AppendUtf8(cp, &value);
      } else {
        value.append(text_.substr(i, size));
      }
      i += size;
    }
    if (!terminated) issues_->Syntax(start, "unterminated string literal");
    tok->kind = bytes ? Tok::kBytes : Tok::kString;
    tok->value = std::move(value);
    tok->end = pos_ = i;
    return true;
  }

  // Decodes the escape sequence at text_[i] == '\\' into `out`; returns the offset after it.
  // In strings \x and octal escapes denote code points; in bytes they denote octets, and \u and
  // \U are not allowed.
  size_t LexEscape(size_t i, bool bytes, std::string* out) {
    const int e = Ch(i + 1);
    const auto invalid = [&](size_t end, std::string_view why) {
      issues_->Syntax(i, "invalid escape sequence '" + Text(i, end) + "'" + std::string(why));
      return i + 1;  // resume right after the backslash
    };
    if (e < 0 || e == '\n' || e == '\r') {
      // Only a dangling backslash: the missing quote is reported by the caller.
      if (e < 0) return i + 1;
      return invalid(i + 1, "");
    }
    switch (e) {
      case 'a':
        out->push_back('\a');
        return i + 2;
      case 'b':
        out->push_back('\b');
        return i + 2;
      case 'f':
        out->push_back('\f');
        return i + 2;
      case 'n':
        out->push_back('\n');
        return i + 2;
      case 'r':
        out->push_back('\r');
        return i + 2;
      case 't':
        out->push_back('\t');
        return i + 2;
      case 'v':
        out->push_back('\v');
        return i + 2;
      case '\\':
      case '\'':
      case '"':
      case '`':
      case '?':
        out->push_back(static_cast<char>(e));
        return i + 2;
      default:
        break;
    }
    if (e >= '0' && e <= '3') {
      for (size_t k = 2; k <= 3; ++k) {
        if (Ch(i + k) < '0' || Ch(i + k) > '7') return invalid(ShownEnd(i + k), "");
      }
      const int v = (e - '0') * 64 + (Ch(i + 2) - '0') * 8 + (Ch(i + 3) - '0');
      if (bytes) {
        out->push_back(static_cast<char>(v));
      } else {
        AppendUtf8(static_cast<char32_t>(v), out);
      }
      return i + 4;
    }
    size_t digits = 0;
    if (e == 'x' || e == 'X') {
      digits = 2;
    } else if (e == 'u') {
      digits = 4;
    } else if (e == 'U') {
      digits = 8;
    } else {
      return invalid(ShownEnd(i + 1), "");
    }
    char32_t v = 0;
    for (size_t k = 0; k < digits; ++k) {
      const int h = Ch(i + 2 + k);
      if (!IsHex(h)) return invalid(ShownEnd(i + 2 + k), "");
      v = v * 16 + static_cast<char32_t>(HexValue(h));
    }
    const size_t end = i + 2 + digits;
    if (digits == 2) {
      if (bytes) {
        out->push_back(static_cast<char>(v));
      } else {
        AppendUtf8(v, out);
      }
      return end;
    }
    if (bytes) return invalid(end, ": \\u and \\U are not allowed in bytes literals");
    if (v > 0x10FFFF) return invalid(end, ": code point out of range");
    // A lone surrogate becomes U+FFFD, as in cel-go (Go's utf8.EncodeRune).
    AppendUtf8(v, out);
    return end;
  }

  std::string_view text_;
  IssueSink* issues_;
  size_t pos_ = 0;
};

}  // namespace

std::vector<Token> Lex(std::string_view text, IssueSink* issues) {
  return Lexer(text, issues).Run();
}

}  // namespace qm::cel::lexing
