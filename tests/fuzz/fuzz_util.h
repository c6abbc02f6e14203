#pragma once

// Shared pieces of the REST-layer libFuzzer targets (built by run_fuzzers.sh): input splitting,
// an in-memory API server built fresh for every input (fixed clock, counting uids, so an input
// replays the same way), and the oracle every answer must satisfy.
//
// Findings: a sanitizer report, a hang or memory blow-up, an exception that escapes (the
// transport's last-resort catches would log it and answer 500 or drop the connection without an
// answer; libstdc++ prints its type and message and the stack still shows where it was thrown),
// a 5xx answer (client input must be answered with a 4xx), or a broken invariant checked by a
// target (printed as "FUZZ FINDING", then abort). libFuzzer saves the input either way.
// With QM_FUZZ_ALLOW_5XX=1 in the environment, these internal errors (an exception while serving
// a request, a 5xx, a protobuf body that does not serialize) are printed once per kind and the
// run goes on, to look past a known one; sanitizer reports and broken invariants still abort.
// QM_FUZZ_VERBOSE=1 prints every request the REST API answers.

#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/rest/auth_endpoints.h"
#include "api/rest/rest_api.h"
#include "common/clock.h"
#include "common/id_generator.h"
#include "nlohmann/json.hpp"
#include "service/authorizer.h"
#include "service/object_service.h"
#include "service/watch_hub.h"
#include "store/memory_store.h"

namespace qm::fuzz {

inline constexpr std::string_view kSeparator = "\n---\n";
// HMAC key of the ServiceAccount tokens the in-memory server issues and verifies.
inline constexpr char kServiceAccountKey[] = "fuzz-service-account-key-0123456789abcdef";

// Splits `in` at the first kSeparator: {before, after}; after is empty when there is none.
inline std::pair<std::string, std::string> SplitOnce(std::string_view in) {
  auto at = in.find(kSeparator);
  if (at == std::string_view::npos) return {std::string(in), ""};
  return {std::string(in.substr(0, at)), std::string(in.substr(at + kSeparator.size()))};
}

inline std::string Printable(std::string_view s, size_t max = 512) {
  std::string out;
  for (char c : s.substr(0, max)) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", u);
      out += buf;
    }
  }
  if (s.size() > max) out += "...";
  return out;
}

// Prints the finding and the request that caused it, then aborts (libFuzzer saves the input).
[[noreturn]] inline void Crash(const std::string& what, const api::HttpRequest* req = nullptr) {
  std::fprintf(stderr, "\n==== FUZZ FINDING: %s\n", Printable(what, 2048).c_str());
  if (req != nullptr) {
    std::fprintf(stderr, "  request: %s %s content-type=%s body=%s\n",
                 Printable(req->method).c_str(), Printable(req->path).c_str(),
                 Printable(req->content_type).c_str(), Printable(req->body).c_str());
  }
  std::fflush(stderr);
  std::abort();
}

inline bool Allow5xx() {
  static const bool allow = std::getenv("QM_FUZZ_ALLOW_5XX") != nullptr;
  return allow;
}

// QM_FUZZ_VERBOSE=1: print every request and answer (to see what a seed or a crash does).
inline bool Verbose() {
  static const bool verbose = std::getenv("QM_FUZZ_VERBOSE") != nullptr;
  return verbose;
}

// The input being run, for reports (set by the targets that call InternalError).
inline std::string_view& CurrentInput() {
  static std::string_view* input = new std::string_view;
  return *input;
}

// A 5xx or an exception from RestApi: aborts unless QM_FUZZ_ALLOW_5XX is set. Then it is
// printed once per kind (the message without hex digits and non-ASCII bytes, so positions and
// byte values do not count), with the input in hex to reproduce it without the variable.
inline void InternalError(const std::string& what, const api::HttpRequest& req) {
  if (!Allow5xx()) Crash("internal error: " + what, &req);
  static std::mutex* mu = new std::mutex;
  static std::set<std::string>* seen = new std::set<std::string>;
  std::string kind;
  for (char c : what.substr(0, 120)) {
    if (static_cast<unsigned char>(c) < 0x80 && !std::isxdigit(static_cast<unsigned char>(c))) {
      kind += c;
    }
  }
  std::lock_guard<std::mutex> lock(*mu);
  if (!seen->insert(kind).second) return;
  std::string hex;
  for (unsigned char c : CurrentInput().substr(0, 2048)) {
    char buf[3];
    std::snprintf(buf, sizeof(buf), "%02x", c);
    hex += buf;
  }
  std::fprintf(stderr, "FUZZ internal error (continuing): %s [%s %s] input: %s\n",
               Printable(what, 200).c_str(), Printable(req.method).c_str(),
               Printable(req.path, 200).c_str(), hex.c_str());
}

// What every answer must be: a real status code, never 5xx for client input, and a JSON body
// that parses whenever it says it is JSON.
inline void CheckResponse(const api::HttpRequest& req, const api::HttpResponse& r) {
  if (r.code < 100 || r.code > 599) Crash("status code " + std::to_string(r.code), &req);
  if (r.code >= 500) {
    InternalError("answered " + std::to_string(r.code) + ": " + r.body, req);
    return;
  }
  if (r.content_type.find("json") != std::string::npos && !nlohmann::json::accept(r.body)) {
    Crash("response body is not JSON: " + r.body, &req);
  }
}

class FixedClock final : public Clock {
 public:
  std::chrono::system_clock::time_point Now() const override {
    return std::chrono::system_clock::time_point(std::chrono::seconds(1800000000));
  }
};

class CountingIds final : public IdGenerator {
 public:
  std::string NewUid() override {
    char buf[40];
    std::snprintf(buf, sizeof(buf), "00000000-0000-4000-8000-%012llx",
                  static_cast<unsigned long long>(++next_));
    return buf;
  }

 private:
  uint64_t next_ = 0;
};

// Collects a watch stream; every chunk must be one JSON event line.
class CheckingSink final : public api::WatchSink {
 public:
  explicit CheckingSink(const api::HttpRequest& req) : req_(req) {}
  void Begin(const std::vector<std::string>& warnings) override {}
  bool Write(const std::string& chunk) override {
    if (chunk.empty() || chunk.back() != '\n' ||
        !nlohmann::json::accept(chunk.substr(0, chunk.size() - 1))) {
      Crash("watch event is not a JSON line: " + chunk, &req_);
    }
    return ++events_ < 64;
  }
  void End() override {}

 private:
  const api::HttpRequest req_;
  int events_ = 0;
};

// The REST API over an in-memory store, wired as server/main.cc wires it: the default namespace,
// the review and token endpoints, and an authorizer with the bootstrap RBAC policy. The watch hub
// is not started: lists read the store and a watch replays synchronously into its sink.
class InMemoryApi {
 public:
  InMemoryApi()
      : hub_(store_, service::WatchHubOptions{}),
        objects_(store_, clock_, ids_, nullptr),
        endpoints_(objects_, authorizer_, clock_, api::AuthEndpointsOptions{kServiceAccountKey}),
        api_(objects_, hub_, clock_) {
    api_.SetAuthEndpoints(&endpoints_);
    api_.SetAuthorizer(&authorizer_);
    if (!api_.EnsureDefaultNamespace().ok()) Crash("cannot create the default namespace");
  }

  // RestApi::Handle under the oracle. An exception escapes (see above) unless
  // QM_FUZZ_ALLOW_5XX is set.
  api::HttpResponse Handle(const api::HttpRequest& req) {
    api::HttpResponse r;
    if (!Allow5xx()) {
      r = api_.Handle(req);
    } else {
      try {
        r = api_.Handle(req);
      } catch (const std::exception& e) {
        InternalError(std::string("RestApi::Handle threw: ") + e.what(), req);
        return api::HttpResponse{500, "application/json", "{}", {}};
      }
    }
    if (Verbose()) {
      std::fprintf(stderr, "%s %s -> %d %s\n", Printable(req.method).c_str(),
                   Printable(req.path).c_str(), r.code, Printable(r.body, 300).c_str());
    }
    CheckResponse(req, r);
    return r;
  }

  // RestApi::StartWatch under the same oracle.
  void Watch(const api::HttpRequest& req) {
    std::optional<api::HttpResponse> r;
    if (!Allow5xx()) {
      r = api_.StartWatch(req, std::make_shared<CheckingSink>(req));
    } else {
      try {
        r = api_.StartWatch(req, std::make_shared<CheckingSink>(req));
      } catch (const std::exception& e) {
        InternalError(std::string("RestApi::StartWatch threw: ") + e.what(), req);
        return;
      }
    }
    if (r.has_value()) CheckResponse(req, *r);
  }

  const Clock& clock() const { return clock_; }
  service::ObjectService& objects() { return objects_; }
  const service::Authorizer& authorizer() const { return authorizer_; }

 private:
  store::MemoryStore store_;
  FixedClock clock_;
  CountingIds ids_;
  service::Authorizer authorizer_;
  service::WatchHub hub_;
  service::ObjectService objects_;
  api::AuthEndpoints endpoints_;
  api::RestApi api_;
};

// The JSON object in `body`, or null when it is not one.
inline nlohmann::json ParseObject(const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  return j.is_object() ? j : nlohmann::json();
}

}  // namespace qm::fuzz
