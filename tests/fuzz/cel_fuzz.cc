// libFuzzer target for the CEL front end: any byte string must parse into a tree or into issues,
// render without crashing, and never hang or leak. Built and run by run_cel_fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cel/ast.h"
#include "cel/parser.h"
#include "cel/source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  qm::cel::Source source(text);
  qm::cel::ParseResult result = qm::cel::Parse(source);
  if (result.ast != nullptr) {
    // Every node kind renders (walks the whole tree).
    if (qm::cel::DebugString(result.ast->root()).empty()) __builtin_trap();
  } else {
    std::string issues = source.DisplayIssues(result.issues);
    if (issues.empty()) __builtin_trap();  // a failed parse must say why
  }
  return 0;
}
