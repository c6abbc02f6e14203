#include "cel/compiler.h"

#include <algorithm>
#include <vector>

#include "cel/parser.h"
#include "cel/source.h"

namespace qm::cel {
namespace {

constexpr const char* kDeviceFields[] = {"driver", "attributes", "capacity",
                                         "allowMultipleAllocations"};
// Identifiers the standard environment declares: type names and namespaces used as call
// targets (`optional.none()`, `sets.contains(...)`).
constexpr const char* kDeclared[] = {"device",   "int",  "uint",    "double",    "bool", "string",
                                     "bytes",    "list", "map",     "null_type", "type", "dyn",
                                     "optional", "sets", "strings", "lists",     "math", "cel"};

class EnvironmentCheck {
 public:
  explicit EnvironmentCheck(std::vector<Issue>* issues) : issues_(issues) {}

  void Walk(const Expr& e) {
    switch (e.kind()) {
      case ExprKind::kConstant:
        return;
      case ExprKind::kIdent:
        CheckName(e.ident().name, e.offset());
        return;
      case ExprKind::kSelect: {
        const SelectExpr& s = e.select();
        if (s.operand->kind() == ExprKind::kIdent && s.operand->ident().name == "device" &&
            !InScope("device")) {
          if (std::find_if(std::begin(kDeviceFields), std::end(kDeviceFields), [&](const char* f) {
                return s.field == f;
              }) == std::end(kDeviceFields)) {
            issues_->push_back(Issue{"undefined field '" + s.field + "'", e.offset()});
          }
          return;
        }
        Walk(*s.operand);
        return;
      }
      case ExprKind::kCall: {
        const CallExpr& c = e.call();
        // Namespaced functions (`optional.of`, `sets.contains`) name their namespace as target.
        if (c.target != nullptr) Walk(*c.target);
        for (const auto& a : c.args) Walk(*a);
        return;
      }
      case ExprKind::kList:
        for (const auto& el : e.list().elements) Walk(*el);
        return;
      case ExprKind::kMap:
        for (const auto& entry : e.map().entries) {
          Walk(*entry.key);
          Walk(*entry.value);
        }
        return;
      case ExprKind::kComprehension: {
        const ComprehensionExpr& c = e.comprehension();
        Walk(*c.iter_range);
        Walk(*c.accu_init);
        scopes_.push_back({c.iter_var, c.iter_var2, c.accu_var});
        Walk(*c.loop_condition);
        Walk(*c.loop_step);
        scopes_.back() = {c.accu_var};
        Walk(*c.result);
        scopes_.pop_back();
        return;
      }
    }
  }

 private:
  bool InScope(const std::string& name) const {
    for (const auto& scope : scopes_) {
      if (std::find(scope.begin(), scope.end(), name) != scope.end()) return true;
    }
    return false;
  }

  void CheckName(std::string name, size_t offset) {
    if (!name.empty() && name[0] == '.') name.erase(0, 1);
    if (InScope(name)) return;
    for (const char* d : kDeclared) {
      if (name == d) return;
    }
    issues_->push_back(Issue{"undeclared reference to '" + name + "' (in container '')", offset});
  }

  std::vector<Issue>* issues_;
  std::vector<std::vector<std::string>> scopes_;
};

// The type name of a root that is a literal, or "" when it may be bool.
std::string LiteralType(const Expr& root) {
  switch (root.kind()) {
    case ExprKind::kList:
      return "list(dyn)";
    case ExprKind::kMap:
      return "map(dyn, dyn)";
    case ExprKind::kConstant:
      switch (root.constant().kind()) {
        case ConstantKind::kBool:
          return "";
        case ConstantKind::kNull:
          return "null_type";
        case ConstantKind::kInt:
          return "int";
        case ConstantKind::kUint:
          return "uint";
        case ConstantKind::kDouble:
          return "double";
        case ConstantKind::kString:
          return "string";
        case ConstantKind::kBytes:
          return "bytes";
      }
      return "";
    default:
      return "";
  }
}

}  // namespace

CompileResult CompileSelector(const std::string& expression) {
  Source source(expression);
  ParseResult parsed = Parse(source);
  CompileResult out;
  if (parsed.ast == nullptr) {
    out.error = source.DisplayIssues(parsed.issues);
    return out;
  }
  std::vector<Issue> issues;
  EnvironmentCheck(&issues).Walk(parsed.ast->root());
  if (!issues.empty()) {
    out.error = source.DisplayIssues(issues);
    return out;
  }
  if (std::string type = LiteralType(parsed.ast->root()); !type.empty()) {
    out.error = "must evaluate to bool or the unknown type, not " + type;
    return out;
  }
  out.ast = std::move(parsed.ast);
  return out;
}

}  // namespace qm::cel
