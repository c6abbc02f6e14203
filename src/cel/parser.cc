#include "cel/parser.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "cel/lexer.h"
#include "cel/operators.h"

namespace qm::cel {
namespace {

using namespace lexing;  // NOLINT(google-build-using-namespace)

using ExprPtr = std::unique_ptr<Expr>;
using ExprList = std::vector<ExprPtr>;

// What ANTLR (and so cel-go) lists when an expression was expected.
constexpr std::string_view kExpectingExpr =
    "{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, "
    "STRING, BYTES, IDENTIFIER}";

// CEL's reserved words that the lexer returns as identifiers (true, false, null and in are
// keywords of their own).
bool IsReserved(std::string_view name) {
  static constexpr std::string_view kReserved[] = {
      "as",  "break", "const",   "continue",  "else",   "for", "function", "if",    "import",
      "let", "loop",  "package", "namespace", "return", "var", "void",     "while",
  };
  return std::find(std::begin(kReserved), std::end(kReserved), name) != std::end(kReserved);
}

// ------------------------------------------------------------------------------------------------
// Literal conversion.

// Parses the digits of an int or uint literal (decimal, or hex after "0x") into *out.
// Returns false on overflow.
bool ParseUnsigned(std::string_view text, uint64_t* out) {
  int base = 10;
  if (text.size() > 2 && text[0] == '0' && text[1] == 'x') {
    base = 16;
    text.remove_prefix(2);
  }
  const auto res = std::from_chars(text.data(), text.data() + text.size(), *out, base);
  return res.ec == std::errc() && res.ptr == text.data() + text.size();
}

// For a double literal that std::from_chars found out of range: true when its magnitude is too
// large (an error, as in Go's strconv.ParseFloat), false when it is too small (rounds to zero).
bool DoubleOverflows(std::string_view s) {
  size_t i = 0;
  int64_t int_digits = 0;  // significant digits before the point
  int64_t frac_zeros = 0;  // zeros right after the point when there are no int digits
  while (i < s.size() && IsDigit(s[i])) {
    if (s[i] != '0' || int_digits > 0) ++int_digits;
    ++i;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (int_digits == 0) {
      while (i < s.size() && s[i] == '0') ++frac_zeros, ++i;
    }
    while (i < s.size() && IsDigit(s[i])) ++i;
  }
  int64_t exp = 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    bool negative = false;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
    while (i < s.size() && IsDigit(s[i])) {
      exp = std::min<int64_t>(exp * 10 + (s[i++] - '0'), int64_t{1000000000});
    }
    if (negative) exp = -exp;
  }
  const int64_t magnitude = int_digits > 0 ? int_digits - 1 + exp : exp - frac_zeros - 1;
  return magnitude > 0;
}

// ------------------------------------------------------------------------------------------------
// Parser: recursive descent over the token vector, one function per precedence level. A syntax
// error is reported once and unwinds the parse (functions return nullptr); problems the parser
// can step over (reserved identifiers, bad literals, bad macro arguments) are reported and a
// placeholder node keeps the parse going, so several of them show at once.

enum class Quantifier { kAll, kExists, kExistsOne };

class Parser {
 public:
  Parser(std::string_view text, std::vector<Token> tokens, const ParserOptions& options,
         IssueSink* issues)
      : text_(text), tokens_(std::move(tokens)), options_(options), issues_(issues) {}

  ExprPtr ParseStart() {
    ExprPtr e = ParseExpr();
    if (!e) return nullptr;
    if (Cur().kind != Tok::kEof) return SyntaxError(Cur(), "<EOF>");
    return e;
  }

  int64_t last_id() const { return factory_.last_id(); }

 private:
  const Token& Cur() const { return tokens_[pos_]; }
  const Token& Peek(size_t k) const { return tokens_[std::min(pos_ + k, tokens_.size() - 1)]; }
  const Token& Advance() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  bool Accept(Tok kind) {
    if (Cur().kind != kind) return false;
    Advance();
    return true;
  }

  std::string TokenText(const Token& t) const {
    if (t.kind == Tok::kEof) return "<EOF>";
    return SanitizeUtf8(text_.substr(t.begin, t.end - t.begin));
  }

  ABSL_ATTRIBUTE_NOINLINE ExprPtr SyntaxError(const Token& t, std::string_view expecting) {
    issues_->Syntax(t.begin,
                    "mismatched input '" + TokenText(t) + "' expecting " + std::string(expecting));
    return nullptr;
  }

  ABSL_ATTRIBUTE_NOINLINE ExprPtr RecursionError(size_t offset) {
    issues_->Add(offset, "expression recursion limit exceeded: " +
                             std::to_string(options_.max_recursion_depth));
    return nullptr;
  }

  // Fails the parse when `e` has grown taller than the recursion limit.
  ExprPtr CheckHeight(ExprPtr e) {
    if (e && e->height() > options_.max_recursion_depth) return RecursionError(e->offset());
    return e;
  }

  // Reports a problem the parse can continue past.
  void Report(size_t offset, std::string message) { issues_->Add(offset, std::move(message)); }

  // A stand-in for a node that could not be built; the parse result is discarded anyway.
  ExprPtr Placeholder(size_t offset) { return factory_.NewConstant(offset, Constant::Null()); }

  template <typename... Args>
  ExprPtr Call(size_t offset, std::string_view function, Args... args) {
    ExprList list;
    (list.push_back(std::move(args)), ...);
    return factory_.NewCall(offset, std::string(function), std::move(list));
  }

  // The recursion for one level of nesting, e.g. `(` ... `)`, is ParseExpr -> ParseLogical ->
  // ParseBinary -> ParseUnary -> ParsePrimary -> ParseExpr: the precedence levels share frames
  // so that the recursion limit bounds stack use tightly.

  // expr: or ('?' or ':' expr)?   (the middle operand is an ||-expression, as in CEL.g4)
  ExprPtr ParseExpr() {
    if (depth_ >= options_.max_recursion_depth) return RecursionError(Cur().begin);
    ++depth_;
    ExprPtr e = ParseLogical();
    if (e && Cur().kind == Tok::kQuestion) {
      const size_t offset = Advance().begin;
      ExprPtr if_true = ParseLogical();
      ExprPtr if_false;
      if (if_true) {
        if (Accept(Tok::kColon)) {
          if_false = ParseExpr();
        } else {
          SyntaxError(Cur(), "':'");
        }
      }
      e = if_false ? Call(offset, op::kConditional, std::move(e), std::move(if_true),
                          std::move(if_false))
                   : nullptr;
    }
    --depth_;
    return CheckHeight(std::move(e));
  }

  // or: and ('||' and)*   and: binary ('&&' binary)*
  // Both chains become balanced trees (as cel-go's balancingLogicManager), so chains of any
  // length stay shallow.
  ExprPtr ParseLogical() {
    ExprList or_terms, and_terms;
    std::vector<size_t> or_ops, and_ops;
    while (true) {
      ExprPtr term = ParseBinary(kRelationPrecedence);
      if (!term) return nullptr;
      and_terms.push_back(std::move(term));
      if (Cur().kind == Tok::kAnd) {
        and_ops.push_back(Advance().begin);
        continue;
      }
      or_terms.push_back(Balanced(op::kLogicalAnd, and_terms, and_ops));
      and_terms.clear();
      and_ops.clear();
      if (Cur().kind != Tok::kOr) break;
      or_ops.push_back(Advance().begin);
    }
    return Balanced(op::kLogicalOr, or_terms, or_ops);
  }

  // Joins terms[i] and terms[i + 1] with ops[i] into a balanced tree.
  ExprPtr Balanced(std::string_view function, ExprList& terms, const std::vector<size_t>& ops) {
    if (ops.empty()) return std::move(terms[0]);
    return BalancedRange(function, terms, ops, 0, ops.size() - 1);
  }

  ExprPtr BalancedRange(std::string_view function, ExprList& terms, const std::vector<size_t>& ops,
                        size_t lo, size_t hi) {
    const size_t mid = (lo + hi + 1) / 2;
    ExprPtr left =
        mid == lo ? std::move(terms[mid]) : BalancedRange(function, terms, ops, lo, mid - 1);
    ExprPtr right =
        mid == hi ? std::move(terms[mid + 1]) : BalancedRange(function, terms, ops, mid + 1, hi);
    return Call(ops[mid], function, std::move(left), std::move(right));
  }

  // Binary operators below && by precedence: relations < additive < multiplicative; all
  // left-associative.
  static constexpr int kRelationPrecedence = 1;

  struct BinaryOp {
    int precedence = 0;  // 0: not a binary operator
    std::string_view function;
  };

  static BinaryOp BinaryOpFor(Tok kind) {
    switch (kind) {
      case Tok::kLt:
        return {1, op::kLess};
      case Tok::kLe:
        return {1, op::kLessEquals};
      case Tok::kGt:
        return {1, op::kGreater};
      case Tok::kGe:
        return {1, op::kGreaterEquals};
      case Tok::kEq:
        return {1, op::kEquals};
      case Tok::kNe:
        return {1, op::kNotEquals};
      case Tok::kIn:
        return {1, op::kIn};
      case Tok::kPlus:
        return {2, op::kAdd};
      case Tok::kMinus:
        return {2, op::kSubtract};
      case Tok::kStar:
        return {3, op::kMultiply};
      case Tok::kSlash:
        return {3, op::kDivide};
      case Tok::kPercent:
        return {3, op::kModulo};
      default:
        return {};
    }
  }

  // Precedence climbing over the binary operators of precedence >= min_precedence.
  ExprPtr ParseBinary(int min_precedence) {
    ExprPtr lhs = ParseUnary();
    while (lhs) {
      const BinaryOp binary = BinaryOpFor(Cur().kind);
      if (binary.precedence == 0 || binary.precedence < min_precedence) break;
      const size_t offset = Advance().begin;
      ExprPtr rhs = ParseBinary(binary.precedence + 1);
      if (!rhs) return nullptr;
      lhs = CheckHeight(Call(offset, binary.function, std::move(lhs), std::move(rhs)));
    }
    return lhs;
  }

  // unary: member | '!'+ member | '-'+ member. As in CEL.g4, a single '-' right before an int or
  // double literal is part of the literal.
  ExprPtr ParseUnary() {
    const Token& first = Cur();
    if (first.kind != Tok::kBang && first.kind != Tok::kMinus) return ParseMember();
    if (first.kind == Tok::kMinus && (Peek(1).kind == Tok::kInt || Peek(1).kind == Tok::kDouble)) {
      Advance();
      ExprPtr literal = ParseNumber(Advance(), /*negative=*/true, first.begin);
      return ParseMemberSuffix(std::move(literal));
    }
    size_t count = 0;
    while (Accept(first.kind)) ++count;
    ExprPtr operand = ParseMember();
    if (!operand || count % 2 == 0) return operand;
    return Call(first.begin, first.kind == Tok::kBang ? op::kLogicalNot : op::kNegate,
                std::move(operand));
  }

  // member: primary followed by selections, calls and indexes. The suffix loop runs after
  // ParsePrimary has returned, so it adds no frame to the nesting recursion.
  ExprPtr ParseMember() {
    ExprPtr primary = ParsePrimary();
    if (!primary) return nullptr;
    return ParseMemberSuffix(std::move(primary));
  }

  static bool IsQualifiedName(const Expr& e) {
    const Expr* cur = &e;
    while (cur->kind() == ExprKind::kSelect && !cur->select().optional &&
           !cur->select().test_only) {
      cur = cur->select().operand.get();
    }
    return cur->kind() == ExprKind::kIdent;
  }

  // member: member '.' '?'? IDENT | member '.' IDENT '(' args ')' | member '[' '?'? expr ']'
  ABSL_ATTRIBUTE_NOINLINE ExprPtr ParseMemberSuffix(ExprPtr e) {
    while (e) {
      const Token& t = Cur();
      if (t.kind == Tok::kDot) {
        Advance();
        bool optional = false;
        if (Cur().kind == Tok::kQuestion) {
          Advance();
          optional = true;
          if (!options_.enable_optional_syntax) Report(t.begin, "unsupported syntax '.?'");
        }
        if (Cur().kind != Tok::kIdent && Cur().kind != Tok::kEscIdent) {
          return SyntaxError(Cur(), "IDENTIFIER");
        }
        const Token& id = Advance();
        if (id.kind == Tok::kIdent && !optional && Cur().kind == Tok::kLParen) {
          const size_t open = Advance().begin;
          ExprList args;
          if (!ParseArgs(&args)) return nullptr;
          e = ReceiverCallOrMacro(open, id.value, std::move(e), std::move(args));
        } else {
          e = factory_.NewSelect(t.begin, std::move(e), id.value, optional);
        }
      } else if (t.kind == Tok::kLBracket) {
        Advance();
        bool optional = false;
        if (Cur().kind == Tok::kQuestion) {
          Advance();
          optional = true;
          if (!options_.enable_optional_syntax) Report(t.begin, "unsupported syntax '[?'");
        }
        ExprPtr index = ParseExpr();
        if (!index) return nullptr;
        if (!Accept(Tok::kRBracket)) return SyntaxError(Cur(), "']'");
        e = Call(t.begin, optional ? op::kOptIndex : op::kIndex, std::move(e), std::move(index));
      } else if (t.kind == Tok::kLBrace && IsQualifiedName(*e)) {
        issues_->Add(t.begin, "message construction is not supported");
        return nullptr;
      } else {
        break;
      }
      e = CheckHeight(std::move(e));
    }
    return e;
  }

  ExprPtr ParsePrimary() {
    const Token& t = Cur();
    switch (t.kind) {
      case Tok::kDot:
        Advance();
        if (Cur().kind != Tok::kIdent) return SyntaxError(Cur(), "IDENTIFIER");
        return ParseIdentOrCall(/*leading_dot=*/true);
      case Tok::kIdent:
        return ParseIdentOrCall(/*leading_dot=*/false);
      case Tok::kLParen: {
        Advance();
        ExprPtr e = ParseExpr();
        if (!e) return nullptr;
        if (!Accept(Tok::kRParen)) return SyntaxError(Cur(), "')'");
        return e;
      }
      case Tok::kLBracket:
        return ParseList();
      case Tok::kLBrace:
        return ParseMap();
      case Tok::kInt:
      case Tok::kUint:
      case Tok::kDouble:
        return ParseNumber(Advance(), /*negative=*/false, t.begin);
      case Tok::kString:
        Advance();
        return factory_.NewConstant(t.begin, Constant::String(t.value));
      case Tok::kBytes:
        Advance();
        return factory_.NewConstant(t.begin, Constant::Bytes(t.value));
      case Tok::kTrue:
      case Tok::kFalse:
        Advance();
        return factory_.NewConstant(t.begin, Constant::Bool(t.kind == Tok::kTrue));
      case Tok::kNull:
        Advance();
        return factory_.NewConstant(t.begin, Constant::Null());
      default:
        return SyntaxError(t, kExpectingExpr);
    }
  }

  ABSL_ATTRIBUTE_NOINLINE ExprPtr ParseIdentOrCall(bool leading_dot) {
    const Token& id = Advance();
    if (IsReserved(id.value)) Report(id.begin, "reserved identifier: " + id.value);
    std::string name = leading_dot ? "." + id.value : id.value;
    if (Cur().kind != Tok::kLParen) return factory_.NewIdent(id.begin, std::move(name));
    const size_t open = Advance().begin;
    ExprList args;
    if (!ParseArgs(&args)) return nullptr;
    return GlobalCallOrMacro(open, std::move(name), std::move(args));
  }

  // args: (expr (',' expr)*)? ')' -- the '(' has been consumed.
  bool ParseArgs(ExprList* args) {
    if (Accept(Tok::kRParen)) return true;
    while (true) {
      ExprPtr arg = ParseExpr();
      if (!arg) return false;
      args->push_back(std::move(arg));
      if (Accept(Tok::kComma)) continue;
      if (Accept(Tok::kRParen)) return true;
      SyntaxError(Cur(), "{')', ','}");
      return false;
    }
  }

  // list: '[' ('?'? expr (',' '?'? expr)*)? ','? ']'
  ABSL_ATTRIBUTE_NOINLINE ExprPtr ParseList() {
    const size_t offset = Advance().begin;
    ExprList elements;
    std::vector<int32_t> optional_indices;
    if (Cur().kind == Tok::kComma && Peek(1).kind == Tok::kRBracket) {
      Advance();
    } else if (Cur().kind != Tok::kRBracket) {
      while (true) {
        if (Cur().kind == Tok::kQuestion) {
          const size_t q = Advance().begin;
          if (!options_.enable_optional_syntax) Report(q, "unsupported syntax '?'");
          optional_indices.push_back(static_cast<int32_t>(elements.size()));
        }
        ExprPtr e = ParseExpr();
        if (!e) return nullptr;
        elements.push_back(std::move(e));
        if (!Accept(Tok::kComma) || Cur().kind == Tok::kRBracket) break;
      }
    }
    if (!Accept(Tok::kRBracket)) return SyntaxError(Cur(), "{']', ','}");
    return factory_.NewList(offset, std::move(elements), std::move(optional_indices));
  }

  // map: '{' ('?'? expr ':' expr (',' '?'? expr ':' expr)*)? ','? '}'
  ABSL_ATTRIBUTE_NOINLINE ExprPtr ParseMap() {
    const size_t offset = Advance().begin;
    std::vector<MapEntry> entries;
    if (Cur().kind == Tok::kComma && Peek(1).kind == Tok::kRBrace) {
      Advance();
    } else if (Cur().kind != Tok::kRBrace) {
      while (true) {
        bool optional = false;
        if (Cur().kind == Tok::kQuestion) {
          const size_t q = Advance().begin;
          optional = true;
          if (!options_.enable_optional_syntax) Report(q, "unsupported syntax '?'");
        }
        ExprPtr key = ParseExpr();
        if (!key) return nullptr;
        if (Cur().kind != Tok::kColon) return SyntaxError(Cur(), "':'");
        const size_t colon = Advance().begin;
        ExprPtr value = ParseExpr();
        if (!value) return nullptr;
        entries.push_back(factory_.NewMapEntry(colon, std::move(key), std::move(value), optional));
        if (!Accept(Tok::kComma) || Cur().kind == Tok::kRBrace) break;
      }
    }
    if (!Accept(Tok::kRBrace)) return SyntaxError(Cur(), "{'}', ','}");
    return factory_.NewMap(offset, std::move(entries));
  }

  ABSL_ATTRIBUTE_NOINLINE ExprPtr ParseNumber(const Token& t, bool negative, size_t offset) {
    const std::string_view text = t.value;
    if (t.kind == Tok::kDouble) {
      double v = 0;
      const auto res = std::from_chars(text.data(), text.data() + text.size(), v);
      if (res.ec == std::errc::result_out_of_range) {
        if (DoubleOverflows(text)) {
          Report(offset, "invalid double literal");
          return Placeholder(offset);
        }
        v = 0;
      } else if (res.ec != std::errc() || res.ptr != text.data() + text.size()) {
        Report(offset, "invalid double literal");
        return Placeholder(offset);
      }
      return factory_.NewConstant(offset, Constant::Double(negative ? -v : v));
    }
    uint64_t magnitude = 0;
    const bool ok = ParseUnsigned(text, &magnitude);
    if (t.kind == Tok::kUint) {
      if (!ok) {
        Report(offset, "invalid uint literal");
        return Placeholder(offset);
      }
      return factory_.NewConstant(offset, Constant::Uint(magnitude));
    }
    constexpr uint64_t kMaxInt = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    if (!ok || magnitude > kMaxInt + (negative ? 1 : 0)) {
      Report(offset, "invalid int literal");
      return Placeholder(offset);
    }
    const int64_t v =
        negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
    return factory_.NewConstant(offset, Constant::Int(v));
  }

  // ----------------------------------------------------------------------------------------------
  // Macros (see the table in cel/ast.h). Each expander owns the call's pieces; synthesized nodes
  // sit at the call's '(' offset.

  // The name of a plain identifier argument (no leading dot), or nullptr.
  static const std::string* SimpleName(const Expr& e) {
    if (e.kind() != ExprKind::kIdent || e.ident().name.front() == '.') return nullptr;
    return &e.ident().name;
  }

  ExprPtr MacroError(const Expr& at, std::string message) {
    Report(at.offset(), std::move(message));
    return Placeholder(at.offset());
  }

  ExprPtr Accu(size_t offset) { return factory_.NewIdent(offset, std::string(kAccumulatorVar)); }

  ABSL_ATTRIBUTE_NOINLINE ExprPtr GlobalCallOrMacro(size_t offset, std::string name,
                                                    ExprList args) {
    if (options_.enable_macros && name == "has" && args.size() == 1) {
      ExprPtr& arg = args[0];
      if (arg->kind() != ExprKind::kSelect || arg->select().optional) {
        return MacroError(*arg, "invalid argument to has() macro");
      }
      std::string field;
      ExprPtr operand = ExprFactory::TakeSelectOperand(std::move(arg), &field);
      return factory_.NewPresenceTest(offset, std::move(operand), std::move(field));
    }
    return factory_.NewCall(offset, std::move(name), std::move(args));
  }

  ABSL_ATTRIBUTE_NOINLINE ExprPtr ReceiverCallOrMacro(size_t offset, const std::string& name,
                                                      ExprPtr target, ExprList args) {
    const size_t n = args.size();
    if (options_.enable_macros) {
      if (n == 2 && name == "all") return ExpandQuantifier(offset, Quantifier::kAll, target, args);
      if (n == 2 && name == "exists") {
        return ExpandQuantifier(offset, Quantifier::kExists, target, args);
      }
      if (n == 2 && name == "exists_one") {
        return ExpandQuantifier(offset, Quantifier::kExistsOne, target, args);
      }
      if ((n == 2 || n == 3) && name == "map") return ExpandMap(offset, target, args);
      if (n == 2 && name == "filter") return ExpandFilter(offset, target, args);
      if (n == 3 && name == "bind" && target->kind() == ExprKind::kIdent &&
          target->ident().name == "cel") {
        return ExpandBind(offset, args);
      }
      if (options_.enable_two_var_comprehensions) {
        if (n == 3 && name == "all") return ExpandTwoVar(offset, name, target, args);
        if (n == 3 && name == "exists") return ExpandTwoVar(offset, name, target, args);
        if (n == 3 && (name == "existsOne" || name == "exists_one")) {
          return ExpandTwoVar(offset, name, target, args);
        }
        if ((n == 3 || n == 4) &&
            (name == "transformList" || name == "transformMap" || name == "transformMapEntry")) {
          return ExpandTwoVar(offset, name, target, args);
        }
      }
      if (options_.enable_optional_syntax && n == 2 && (name == "optMap" || name == "optFlatMap")) {
        return ExpandOptMap(offset, name, target, args);
      }
    }
    return factory_.NewMemberCall(offset, name, std::move(target), std::move(args));
  }

  ExprPtr Fold(size_t offset, Quantifier kind, std::string iter_var, std::string iter_var2,
               ExprPtr range, ExprPtr predicate) {
    ExprPtr init, cond, step, result;
    switch (kind) {
      case Quantifier::kAll:
        init = factory_.NewConstant(offset, Constant::Bool(true));
        cond = Call(offset, op::kNotStrictlyFalse, Accu(offset));
        step = Call(offset, op::kLogicalAnd, Accu(offset), std::move(predicate));
        result = Accu(offset);
        break;
      case Quantifier::kExists:
        init = factory_.NewConstant(offset, Constant::Bool(false));
        cond = Call(offset, op::kNotStrictlyFalse, Call(offset, op::kLogicalNot, Accu(offset)));
        step = Call(offset, op::kLogicalOr, Accu(offset), std::move(predicate));
        result = Accu(offset);
        break;
      case Quantifier::kExistsOne:
        init = factory_.NewConstant(offset, Constant::Int(0));
        cond = factory_.NewConstant(offset, Constant::Bool(true));
        step = Call(
            offset, op::kConditional, std::move(predicate),
            Call(offset, op::kAdd, Accu(offset), factory_.NewConstant(offset, Constant::Int(1))),
            Accu(offset));
        result =
            Call(offset, op::kEquals, Accu(offset), factory_.NewConstant(offset, Constant::Int(1)));
        break;
    }
    return factory_.NewComprehension(offset, std::move(iter_var), std::move(iter_var2),
                                     std::move(range), std::string(kAccumulatorVar),
                                     std::move(init), std::move(cond), std::move(step),
                                     std::move(result));
  }

  ExprPtr ExpandQuantifier(size_t offset, Quantifier kind, ExprPtr& target, ExprList& args) {
    const std::string* var = SimpleName(*args[0]);
    if (var == nullptr) return MacroError(*args[0], "argument must be a simple name");
    return Fold(offset, kind, *var, "", std::move(target), std::move(args[1]));
  }

  // A list-building fold: step @result + [value], filtered by `filter` when given.
  ExprPtr ListFold(size_t offset, std::string iter_var, std::string iter_var2, ExprPtr range,
                   ExprPtr filter, ExprPtr value) {
    ExprList element;
    element.push_back(std::move(value));
    ExprPtr step =
        Call(offset, op::kAdd, Accu(offset), factory_.NewList(offset, std::move(element)));
    if (filter)
      step = Call(offset, op::kConditional, std::move(filter), std::move(step), Accu(offset));
    return factory_.NewComprehension(
        offset, std::move(iter_var), std::move(iter_var2), std::move(range),
        std::string(kAccumulatorVar), factory_.NewList(offset, {}),
        factory_.NewConstant(offset, Constant::Bool(true)), std::move(step), Accu(offset));
  }

  ExprPtr ExpandMap(size_t offset, ExprPtr& target, ExprList& args) {
    const std::string* var = SimpleName(*args[0]);
    if (var == nullptr) return MacroError(*args[0], "argument is not an identifier");
    ExprPtr filter = args.size() == 3 ? std::move(args[1]) : nullptr;
    return ListFold(offset, *var, "", std::move(target), std::move(filter), std::move(args.back()));
  }

  ExprPtr ExpandFilter(size_t offset, ExprPtr& target, ExprList& args) {
    const std::string* var = SimpleName(*args[0]);
    if (var == nullptr) return MacroError(*args[0], "argument is not an identifier");
    std::string name = *var;
    return ListFold(offset, std::move(name), "", std::move(target), std::move(args[1]),
                    std::move(args[0]));
  }

  // cel.bind(var, init, body): a fold over an empty list whose accumulator is `var`.
  ExprPtr Bind(size_t offset, std::string var, ExprPtr init, ExprPtr body) {
    ExprPtr step = factory_.NewIdent(offset, var);
    return factory_.NewComprehension(offset, std::string(kUnusedIterVar), "",
                                     factory_.NewList(offset, {}), std::move(var), std::move(init),
                                     factory_.NewConstant(offset, Constant::Bool(false)),
                                     std::move(step), std::move(body));
  }

  ExprPtr ExpandBind(size_t offset, ExprList& args) {
    const std::string* var = SimpleName(*args[0]);
    if (var == nullptr) {
      return MacroError(*args[0], "cel.bind() variable names must be simple identifiers");
    }
    return Bind(offset, *var, std::move(args[1]), std::move(args[2]));
  }

  ExprPtr ExpandTwoVar(size_t offset, const std::string& name, ExprPtr& target, ExprList& args) {
    const std::string* key = SimpleName(*args[0]);
    if (key == nullptr) {
      return MacroError(*args[0], "first variable name must be a simple identifier");
    }
    const std::string* value = SimpleName(*args[1]);
    if (value == nullptr) {
      return MacroError(*args[1], "second variable name must be a simple identifier");
    }
    if (*key == *value) return MacroError(*args[1], "duplicate variable name: " + *key);
    const std::string k = *key;
    const std::string v = *value;
    if (name == "all")
      return Fold(offset, Quantifier::kAll, k, v, std::move(target), std::move(args[2]));
    if (name == "exists") {
      return Fold(offset, Quantifier::kExists, k, v, std::move(target), std::move(args[2]));
    }
    if (name == "existsOne" || name == "exists_one") {
      return Fold(offset, Quantifier::kExistsOne, k, v, std::move(target), std::move(args[2]));
    }
    ExprPtr filter = args.size() == 4 ? std::move(args[2]) : nullptr;
    ExprPtr transform = std::move(args.back());
    if (name == "transformList") {
      return ListFold(offset, k, v, std::move(target), std::move(filter), std::move(transform));
    }
    // transformMap: cel.@mapInsert(@result, k, f); transformMapEntry: cel.@mapInsert(@result, f).
    ExprPtr step =
        name == "transformMap"
            ? Call(offset, op::kMapInsert, Accu(offset), std::move(args[0]), std::move(transform))
            : Call(offset, op::kMapInsert, Accu(offset), std::move(transform));
    if (filter)
      step = Call(offset, op::kConditional, std::move(filter), std::move(step), Accu(offset));
    return factory_.NewComprehension(
        offset, k, v, std::move(target), std::string(kAccumulatorVar), factory_.NewMap(offset, {}),
        factory_.NewConstant(offset, Constant::Bool(true)), std::move(step), Accu(offset));
  }

  // o.optMap(x, f)     -> o.hasValue() ? optional.of(cel.bind(x, o.value(), f)) : optional.none()
  // o.optFlatMap(x, f) -> o.hasValue() ? cel.bind(x, o.value(), f) : optional.none()
  ExprPtr ExpandOptMap(size_t offset, const std::string& name, ExprPtr& target, ExprList& args) {
    const std::string* var = SimpleName(*args[0]);
    if (var == nullptr) {
      return MacroError(*args[0], name + "() variable name must be a simple identifier");
    }
    ExprPtr value =
        factory_.NewMemberCall(offset, std::string(op::kValue), factory_.Copy(*target), {});
    ExprPtr has_value =
        factory_.NewMemberCall(offset, std::string(op::kHasValue), std::move(target), {});
    ExprPtr bound = Bind(offset, *var, std::move(value), std::move(args[1]));
    if (name == "optMap") bound = Call(offset, op::kOptionalOf, std::move(bound));
    return Call(offset, op::kConditional, std::move(has_value), std::move(bound),
                Call(offset, op::kOptionalNone));
  }

  std::string_view text_;
  std::vector<Token> tokens_;
  const ParserOptions& options_;
  IssueSink* issues_;
  ExprFactory factory_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

ParseResult Parse(const Source& source, const ParserOptions& options) {
  ParseResult result;
  const std::string& text = source.text();
  int64_t code_points = 0;
  for (size_t i = 0; i < text.size(); ++code_points) {
    size_t size;
    DecodeUtf8(text, i, &size);
    i += size;
  }
  if (code_points > options.expression_size_code_point_limit) {
    result.issues.push_back(
        {"expression code point size exceeds limit: size: " + std::to_string(code_points) +
             ", limit " + std::to_string(options.expression_size_code_point_limit),
         0});
    return result;
  }
  ParserOptions opts = options;
  opts.max_recursion_depth = std::max(opts.max_recursion_depth, 1);

  IssueSink issues(opts.error_reporting_limit);
  std::vector<Token> tokens = Lex(text, &issues);
  ExprPtr root;
  int64_t max_id = 0;
  if (!issues.full()) {
    Parser parser(text, std::move(tokens), opts, &issues);
    root = parser.ParseStart();
    max_id = parser.last_id();
  }
  if (root == nullptr && issues.empty()) {
    // Every failing path reports; this guards the "ast xor issues" contract regardless.
    issues.Add(0, "Syntax error: unable to parse expression");
  }
  result.issues = issues.Take();
  if (result.issues.empty()) result.ast = std::make_unique<Ast>(std::move(root), max_id);
  return result;
}

}  // namespace qm::cel
