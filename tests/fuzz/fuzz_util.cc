// Linked into every target built by run_fuzzers.sh: silences the server's logs, which would
// otherwise cost more than the code under test and bury libFuzzer's output.
#include "spdlog/spdlog.h"

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  spdlog::set_level(spdlog::level::off);
  return 0;
}
