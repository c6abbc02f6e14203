#include "cel/ast.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

namespace qm::cel {
namespace {

int HeightOf(const std::unique_ptr<Expr>& e) { return e ? e->height() : -1; }

bool IsPlainIdentifier(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

void AppendHex(unsigned char c, std::string* out) {
  char buf[5];
  std::snprintf(buf, sizeof(buf), "\\x%02x", c);
  out->append(buf);
}

std::string FormatDouble(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "+inf" : "-inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string QuoteBytes(std::string_view value) {
  std::string out = "b\"";
  for (const char ch : value) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(ch);
    } else if (c >= 0x20 && c < 0x7f) {
      out.push_back(ch);
    } else {
      AppendHex(c, &out);
    }
  }
  out.push_back('"');
  return out;
}

class DebugPrinter {
 public:
  explicit DebugPrinter(const DebugStringOptions& options) : options_(options) {}

  void Print(const Expr& e) {
    switch (e.kind()) {
      case ExprKind::kConstant:
        PrintConstant(e.constant());
        break;
      case ExprKind::kIdent:
        out_ += e.ident().name;
        break;
      case ExprKind::kSelect: {
        const SelectExpr& s = e.select();
        Print(*s.operand);
        out_ += s.optional ? ".?" : ".";
        if (IsPlainIdentifier(s.field)) {
          out_ += s.field;
        } else {
          out_ += "`" + s.field + "`";
        }
        if (s.test_only) out_ += "~test-only";
        break;
      }
      case ExprKind::kCall: {
        const CallExpr& c = e.call();
        if (c.target) {
          Print(*c.target);
          out_ += ".";
        }
        out_ += c.function + "(";
        for (size_t i = 0; i < c.args.size(); ++i) {
          if (i > 0) out_ += ", ";
          Print(*c.args[i]);
        }
        out_ += ")";
        break;
      }
      case ExprKind::kList: {
        const ListExpr& l = e.list();
        out_ += "[";
        for (size_t i = 0; i < l.elements.size(); ++i) {
          if (i > 0) out_ += ", ";
          if (std::find(l.optional_indices.begin(), l.optional_indices.end(),
                        static_cast<int32_t>(i)) != l.optional_indices.end()) {
            out_ += "?";
          }
          Print(*l.elements[i]);
        }
        out_ += "]";
        break;
      }
      case ExprKind::kMap: {
        const MapExpr& m = e.map();
        out_ += "{";
        for (size_t i = 0; i < m.entries.size(); ++i) {
          if (i > 0) out_ += ", ";
          if (m.entries[i].optional) out_ += "?";
          Print(*m.entries[i].key);
          out_ += ": ";
          Print(*m.entries[i].value);
        }
        out_ += "}";
        break;
      }
      case ExprKind::kComprehension: {
        const ComprehensionExpr& c = e.comprehension();
        out_ += "__comprehension__(iter: " + c.iter_var;
        if (!c.iter_var2.empty()) out_ += ", iter2: " + c.iter_var2;
        out_ += ", range: ";
        Print(*c.iter_range);
        out_ += ", accu: " + c.accu_var + ", init: ";
        Print(*c.accu_init);
        out_ += ", cond: ";
        Print(*c.loop_condition);
        out_ += ", step: ";
        Print(*c.loop_step);
        out_ += ", result: ";
        Print(*c.result);
        out_ += ")";
        break;
      }
    }
    if (options_.ids) out_ += "#" + std::to_string(e.id());
    if (options_.offsets) out_ += "@" + std::to_string(e.offset());
  }

  std::string Take() { return std::move(out_); }

 private:
  void PrintConstant(const Constant& c) {
    switch (c.kind()) {
      case ConstantKind::kNull:
        out_ += "null";
        break;
      case ConstantKind::kBool:
        out_ += c.bool_value() ? "true" : "false";
        break;
      case ConstantKind::kInt:
        out_ += std::to_string(c.int_value());
        break;
      case ConstantKind::kUint:
        out_ += std::to_string(c.uint_value()) + "u";
        break;
      case ConstantKind::kDouble:
        out_ += FormatDouble(c.double_value());
        break;
      case ConstantKind::kString:
        out_ += QuoteString(c.string_value());
        break;
      case ConstantKind::kBytes:
        out_ += QuoteBytes(c.bytes_value());
        break;
    }
  }

  const DebugStringOptions& options_;
  std::string out_;
};

}  // namespace

Expr::Expr(int64_t id, size_t offset, Node node)
    : id_(id), offset_(offset), node_(std::move(node)) {
  int h = -1;
  if (const auto* s = std::get_if<SelectExpr>(&node_)) {
    h = HeightOf(s->operand);
  } else if (const auto* c = std::get_if<CallExpr>(&node_)) {
    h = HeightOf(c->target);
    for (const auto& a : c->args) h = std::max(h, HeightOf(a));
  } else if (const auto* l = std::get_if<ListExpr>(&node_)) {
    for (const auto& el : l->elements) h = std::max(h, HeightOf(el));
  } else if (const auto* m = std::get_if<MapExpr>(&node_)) {
    for (const auto& en : m->entries) h = std::max({h, HeightOf(en.key), HeightOf(en.value)});
  } else if (const auto* f = std::get_if<ComprehensionExpr>(&node_)) {
    h = std::max({HeightOf(f->iter_range), HeightOf(f->accu_init), HeightOf(f->loop_condition),
                  HeightOf(f->loop_step), HeightOf(f->result)});
  }
  height_ = h + 1;
}

Expr::~Expr() = default;

std::unique_ptr<Expr> ExprFactory::Finish(size_t offset, Expr::Node node) {
  return std::unique_ptr<Expr>(new Expr(++last_id_, offset, std::move(node)));
}

std::unique_ptr<Expr> ExprFactory::NewConstant(size_t offset, Constant value) {
  return Finish(offset, std::move(value));
}

std::unique_ptr<Expr> ExprFactory::NewIdent(size_t offset, std::string name) {
  return Finish(offset, IdentExpr{std::move(name)});
}

std::unique_ptr<Expr> ExprFactory::NewSelect(size_t offset, std::unique_ptr<Expr> operand,
                                             std::string field, bool optional) {
  return Finish(offset, SelectExpr{std::move(operand), std::move(field), false, optional});
}

std::unique_ptr<Expr> ExprFactory::NewPresenceTest(size_t offset, std::unique_ptr<Expr> operand,
                                                   std::string field) {
  return Finish(offset, SelectExpr{std::move(operand), std::move(field), true, false});
}

std::unique_ptr<Expr> ExprFactory::NewCall(size_t offset, std::string function,
                                           std::vector<std::unique_ptr<Expr>> args) {
  return Finish(offset, CallExpr{std::move(function), nullptr, std::move(args)});
}

std::unique_ptr<Expr> ExprFactory::NewMemberCall(size_t offset, std::string function,
                                                 std::unique_ptr<Expr> target,
                                                 std::vector<std::unique_ptr<Expr>> args) {
  return Finish(offset, CallExpr{std::move(function), std::move(target), std::move(args)});
}

std::unique_ptr<Expr> ExprFactory::NewList(size_t offset,
                                           std::vector<std::unique_ptr<Expr>> elements,
                                           std::vector<int32_t> optional_indices) {
  return Finish(offset, ListExpr{std::move(elements), std::move(optional_indices)});
}

MapEntry ExprFactory::NewMapEntry(size_t offset, std::unique_ptr<Expr> key,
                                  std::unique_ptr<Expr> value, bool optional) {
  return MapEntry{++last_id_, offset, std::move(key), std::move(value), optional};
}

std::unique_ptr<Expr> ExprFactory::NewMap(size_t offset, std::vector<MapEntry> entries) {
  return Finish(offset, MapExpr{std::move(entries)});
}

std::unique_ptr<Expr> ExprFactory::NewComprehension(
    size_t offset, std::string iter_var, std::string iter_var2, std::unique_ptr<Expr> iter_range,
    std::string accu_var, std::unique_ptr<Expr> accu_init, std::unique_ptr<Expr> loop_condition,
    std::unique_ptr<Expr> loop_step, std::unique_ptr<Expr> result) {
  return Finish(offset, ComprehensionExpr{std::move(iter_var), std::move(iter_var2),
                                          std::move(iter_range), std::move(accu_var),
                                          std::move(accu_init), std::move(loop_condition),
                                          std::move(loop_step), std::move(result)});
}

std::unique_ptr<Expr> ExprFactory::Copy(const Expr& e) {
  const auto copy_all = [this](const std::vector<std::unique_ptr<Expr>>& v) {
    std::vector<std::unique_ptr<Expr>> out;
    out.reserve(v.size());
    for (const auto& x : v) out.push_back(Copy(*x));
    return out;
  };
  switch (e.kind()) {
    case ExprKind::kConstant:
      return NewConstant(e.offset(), e.constant());
    case ExprKind::kIdent:
      return NewIdent(e.offset(), e.ident().name);
    case ExprKind::kSelect: {
      const SelectExpr& s = e.select();
      auto operand = Copy(*s.operand);
      return Finish(e.offset(), SelectExpr{std::move(operand), s.field, s.test_only, s.optional});
    }
    case ExprKind::kCall: {
      const CallExpr& c = e.call();
      auto target = c.target ? Copy(*c.target) : nullptr;
      auto args = copy_all(c.args);
      return Finish(e.offset(), CallExpr{c.function, std::move(target), std::move(args)});
    }
    case ExprKind::kList: {
      auto elements = copy_all(e.list().elements);
      return NewList(e.offset(), std::move(elements), e.list().optional_indices);
    }
    case ExprKind::kMap: {
      std::vector<MapEntry> entries;
      for (const MapEntry& en : e.map().entries) {
        auto key = Copy(*en.key);
        auto value = Copy(*en.value);
        entries.push_back(NewMapEntry(en.offset, std::move(key), std::move(value), en.optional));
      }
      return NewMap(e.offset(), std::move(entries));
    }
    case ExprKind::kComprehension: {
      const ComprehensionExpr& c = e.comprehension();
      auto range = Copy(*c.iter_range);
      auto init = Copy(*c.accu_init);
      auto cond = Copy(*c.loop_condition);
      auto step = Copy(*c.loop_step);
      auto result = Copy(*c.result);
      return NewComprehension(e.offset(), c.iter_var, c.iter_var2, std::move(range), c.accu_var,
                              std::move(init), std::move(cond), std::move(step), std::move(result));
    }
  }
  return nullptr;  // unreachable: the switch covers every kind
}

std::unique_ptr<Expr> ExprFactory::TakeSelectOperand(std::unique_ptr<Expr> select,
                                                     std::string* field) {
  SelectExpr& s = *std::get_if<SelectExpr>(&select->node_);
  *field = std::move(s.field);
  return std::move(s.operand);
}

std::string DebugString(const Expr& expr, const DebugStringOptions& options) {
  DebugPrinter printer(options);
  printer.Print(expr);
  return printer.Take();
}

std::string QuoteString(std::string_view value) {
  std::string out = "\"";
  for (const char ch : value) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          AppendHex(c, &out);
        } else {
          out.push_back(ch);  // printable ASCII and UTF-8 sequences
        }
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace qm::cel
