#include "api/rest/audit_api.h"

#include "absl/strings/numbers.h"
#include "api/rest/request_gate.h"
#include "api/rest/status.h"
#include "common/clock.h"
#include "common/utf8.h"
#include "nlohmann/json.hpp"

namespace qm::api {
namespace {

using nlohmann::json;

HttpResponse Error(const HttpError& e) {
  return HttpResponse{e.code, "application/json", ResponseText(e.status), {}};
}

std::string Query(const HttpRequest& req, const char* key) {
  auto it = req.query.find(key);
  return it == req.query.end() ? "" : it->second;
}

}  // namespace

store::AuditRecord AuditRecordFor(const HttpRequest& req, int code) {
  service::AuthzAttributes a = RequestAttributes(req);
  store::AuditRecord r;
  r.time = std::chrono::system_clock::now();
  r.request_id = req.request_id;
  r.user = req.user ? req.user->name : "system:anonymous";
  if (req.user) r.groups = req.user->groups;
  r.verb = a.verb;
  r.api_group = a.api_group;
  r.resource = a.resource_request ? a.resource : a.path;
  r.subresource = a.subresource;
  r.namespace_ = a.namespace_name;
  r.name = a.name;
  r.code = code;
  r.source = req.remote_address;
  r.user_agent = SanitizeUtf8(req.user_agent.substr(0, 256));  // the cut may split a character
  return r;
}

HttpResponse HandleAuditQuery(store::Store& store, const HttpRequest& req) {
  if (req.method != "GET") {
    return Error(MakeError(405, "MethodNotAllowed",
                           "the server does not allow this method on the requested resource"));
  }
  store::AuditQuery q;
  q.user = Query(req, "user");
  q.resource = Query(req, "resource");
  q.namespace_ = Query(req, "namespace");
  q.name = Query(req, "name");
  for (const auto& [key, out] :
       {std::pair<const char*, std::optional<std::chrono::system_clock::time_point>*>{"since",
                                                                                      &q.since},
        {"until", &q.until}}) {
    std::string v = Query(req, key);
    if (v.empty()) continue;
    std::chrono::system_clock::time_point t;
    if (!ParseRfc3339(v, &t)) {
      return Error(MakeError(400, "BadRequest",
                             std::string(key) + " must be an RFC 3339 time, got \"" + v + "\""));
    }
    *out = t;
  }
  if (std::string v = Query(req, "limit"); !v.empty()) {
    if (!absl::SimpleAtoi(v, &q.limit) || q.limit < 1) {
      return Error(MakeError(400, "BadRequest", "limit must be a positive integer"));
    }
  }
  q.limit = std::min<int64_t>(q.limit, 5000);
  if (std::string v = Query(req, "continue"); !v.empty()) {
    if (!absl::SimpleAtoi(v, &q.after_id) || q.after_id < 0) {
      return Error(MakeError(400, "BadRequest", "invalid continue token"));
    }
  }
  auto records = store.QueryAudit(q);
  if (!records.ok()) return Error(ToHttpError(records.status(), StatusDetails{}));
  json items = json::array();
  for (const auto& r : *records) {
    items.push_back({{"id", r.id},
                     {"time", FormatRfc3339(r.time)},
                     {"requestID", r.request_id},
                     {"user", {{"username", r.user}, {"groups", r.groups}}},
                     {"verb", r.verb},
                     {"apiGroup", r.api_group},
                     {"resource", r.resource},
                     {"subresource", r.subresource},
                     {"namespace", r.namespace_},
                     {"name", r.name},
                     {"code", r.code},
                     {"sourceAddress", r.source},
                     {"userAgent", r.user_agent}});
  }
  json meta = json::object();
  if (static_cast<int64_t>(records->size()) == q.limit) {
    meta["continue"] = std::to_string(records->back().id);
  }
  json out = {{"kind", "AuditEventList"},
              {"apiVersion", "audit.quartermaster.io/v1"},
              {"metadata", meta},
              {"items", items}};
  return HttpResponse{200, "application/json", ResponseText(out), {}};
}

}  // namespace qm::api
