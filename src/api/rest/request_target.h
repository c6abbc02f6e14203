#pragma once

// The request target of an HTTP request ("/api/v1/namespaces/a/pods?watch=1") as the REST API
// sees it: a percent-decoded path and decoded query parameters. Shared by the transport and the
// request fuzzer, so what is fuzzed is what is served.

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "api/rest/rest_api.h"

namespace qm::api {

// Sets req->path (percent-decoded; '+' stays '+', as Go's url.PathUnescape) and req->query
// (percent-decoded, '+' is a space, as in a form; a repeated key keeps its last value) from
// `target`. InvalidArgument when the decoded path or a query key or value is not UTF-8: such
// bytes could not be quoted back in a JSON error, and no name or selector may hold them.
absl::Status ParseRequestTarget(std::string_view target, HttpRequest* req);

// Fills `req` from a parsed HTTP request, moving its body: method, target (as above), content
// type, accept, user agent (invalid UTF-8 replaced: it is only recorded), the Impersonate-*
// headers (names lowercased), and sets *bearer_token from `Authorization: Bearer` (nullopt
// without one). The transport
// adds the rest (request id, remote address, user). InvalidArgument, with everything still
// filled in, when the target or an Impersonate-* value is not UTF-8: the request gets a 400.
absl::Status FromHttpMessage(boost::beast::http::request<boost::beast::http::string_body>&& msg,
                             HttpRequest* req, std::optional<std::string>* bearer_token);

}  // namespace qm::api
