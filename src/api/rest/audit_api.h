#pragma once

// The audit trail over REST, for automation and the web UI:
//   GET /apis/audit.quartermaster.io/v1/events?user=&resource=&namespace=&name=
//       &since=RFC3339&until=RFC3339&limit=N&continue=TOKEN
// Oldest first; `limit` (default 500, at most 5000) per page and `metadata.continue` for the
// next one. Authorized like any resource request (list events in group audit.quartermaster.io;
// cluster-admin has it, grant it with a ClusterRole).

#include <string>

#include "api/rest/rest_api.h"
#include "store/store.h"

namespace qm::api {

inline constexpr char kAuditEventsPath[] = "/apis/audit.quartermaster.io/v1/events";

// 200 with an AuditEventList; 400 for a bad filter; 405 for other methods.
HttpResponse HandleAuditQuery(store::Store& store, const HttpRequest& req);

// The record of `req` (with its user, attributes and source) answered with `code`.
store::AuditRecord AuditRecordFor(const HttpRequest& req, int code);

}  // namespace qm::api
