#include "cel/compiler.h"

#include <string>
#include <vector>

#include "cel/checker.h"
#include "cel/parser.h"
#include "cel/source.h"

namespace qm::cel {

CompileResult CompileSelector(const std::string& expression) {
  Source source(expression);
  ParseResult parsed = Parse(source);
  CompileResult out;
  if (parsed.ast == nullptr) {
    out.error = source.DisplayIssues(parsed.issues);
    return out;
  }
  CheckResult checked = Check(*parsed.ast);
  if (!checked.issues.empty()) {
    out.error = source.DisplayIssues(checked.issues);
    return out;
  }
  if (checked.result_type.kind != TypeKind::kBool && checked.result_type.kind != TypeKind::kDyn) {
    out.error = "must evaluate to bool or the unknown type, not " + FormatType(checked.result_type);
    return out;
  }
  if (checked.estimated_cost > kMaxSelectorCost) {
    out.error = std::string(kCostLimitMessage) + " (estimated cost " +
                std::to_string(checked.estimated_cost) + ", limit " +
                std::to_string(kMaxSelectorCost) + ")";
    return out;
  }
  out.ast = std::move(parsed.ast);
  out.constants = std::make_shared<const ConstantTable>(*out.ast);
  return out;
}

}  // namespace qm::cel
