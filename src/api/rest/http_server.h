#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "api/rest/rest_api.h"
#include "store/store.h"

namespace qm::api {

class Metrics;

struct HttpServerOptions {
  std::string address = "127.0.0.1:8080";  // port 0 picks a free one
};

// The HTTP/1.1 front door: routes health, metrics and everything else to RestApi, streams
// watches with chunked encoding, writes one log line per request. Thread-safe.
class HttpServer {
 public:
  HttpServer(RestApi& api, store::Store& store, Metrics& metrics, HttpServerOptions options);
  ~HttpServer();

  // Binds and starts serving in background threads. InvalidArgument for a bad address,
  // Unavailable when the port cannot be bound.
  absl::Status Start();
  // Stops accepting, lets in-flight requests finish, closes open watches.
  void Shutdown();
  // The bound port (after Start).
  int port() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qm::api
