#include "api/grpc/grpc_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/server_credentials.h>

#include <deque>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <thread>

#include "api/grpc/node_agent_api.h"
#include "auth/pki.h"
#include "common/id_generator.h"
#include "common/mutex.h"
#include "common/status.h"
#include "qm/agent/v1/agent.grpc.pb.h"
#include "spdlog/spdlog.h"

namespace qm::api::nodeapi {
namespace {

// The one table from absl::Status to gRPC: the codes are the same numbers by design. Internal
// errors never carry their text to the client (as the REST API's 500s): it is logged under the
// request id instead.
grpc::Status ToGrpc(const absl::Status& st, const std::string& request_id) {
  if (st.ok()) return grpc::Status::OK;
  const auto code = static_cast<grpc::StatusCode>(st.code());
  if (st.code() == absl::StatusCode::kInternal || st.code() == absl::StatusCode::kUnknown ||
      st.code() == absl::StatusCode::kDataLoss) {
    spdlog::error("request_id={} node-agent call failed: {}", request_id, st.ToString());
    return grpc::Status(code, "internal error; see the server log for request id " + request_id);
  }
  return grpc::Status(code, std::string(st.message()));
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

// Lets someone else (an assignment feed, the heartbeat writer, Shutdown) wake, resume or end a
// stream's reactor without outliving it: the reactor clears the function before it is deleted,
// and the others only ever call through this object.
class Resumer {
 public:
  explicit Resumer(std::function<void(const absl::Status&)> fn) : fn_(std::move(fn)) {}
  void Resume(const absl::Status& st) {
    qm::MutexLock lock(&mu_);
    if (fn_) fn_(st);
  }
  void Clear() {
    qm::MutexLock lock(&mu_);
    fn_ = nullptr;
  }

 private:
  qm::Mutex mu_;
  std::function<void(const absl::Status&)> fn_ ABSL_GUARDED_BY(mu_);
};

// Writes the Node's Ready condition for heartbeat streams, on its own thread: a reactor's
// callbacks run on gRPC's threads, which must not wait on the database.
class HeartbeatWriter {
 public:
  explicit HeartbeatWriter(NodeAgentApi& api) : api_(api) {
    thread_ = std::thread([this] { Run(); });
  }
  ~HeartbeatWriter() { Stop(); }

  void Submit(Caller caller, std::string node, std::shared_ptr<Resumer> done) {
    qm::MutexLock lock(&mu_);
    if (stopping_) {
      done->Resume(absl::UnavailableError("the server is shutting down"));
      return;
    }
    jobs_.push_back({std::move(caller), std::move(node), std::move(done)});
    cv_.Signal();
  }

  // Ends the thread; what is still queued gets UNAVAILABLE. Idempotent.
  void Stop() {
    {
      qm::MutexLock lock(&mu_);
      stopping_ = true;
      cv_.SignalAll();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct Job {
    Caller caller;
    std::string node;
    std::shared_ptr<Resumer> done;
  };

  void Run() {
    qm::MutexLock lock(&mu_);
    while (true) {
      while (!stopping_ && jobs_.empty()) cv_.Wait(&mu_);
      if (jobs_.empty()) return;
      Job job = std::move(jobs_.front());
      jobs_.pop_front();
      absl::Status st = absl::UnavailableError("the server is shutting down");
      if (!stopping_) {
        mu_.Unlock();
        try {
          st = api_.WriteHeartbeat(job.caller, job.node);
        } catch (const std::exception& e) {
          spdlog::error("request_id={} node-agent Heartbeats: unexpected exception: {}",
                        job.caller.request_id, e.what());
          st = absl::InternalError(e.what());
        }
        mu_.Lock();
      }
      mu_.Unlock();
      job.done->Resume(st);
      mu_.Lock();
    }
  }

  NodeAgentApi& api_;
  qm::Mutex mu_;
  qm::CondVar cv_;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

class GrpcServer::Impl final
    : public v1::NodeAgent::WithCallbackMethod_Heartbeats<
          v1::NodeAgent::WithCallbackMethod_WatchAssignments<v1::NodeAgent::Service>> {
 public:
  Impl(NodeAgentApi& api, const auth::Authenticator& authn, GrpcServerOptions options)
      : api_(api), authn_(authn), options_(std::move(options)) {}

  absl::Status Start();
  void Shutdown(std::chrono::milliseconds grace);
  int port() const { return port_; }
  uint64_t unexpected_errors() const { return unexpected_.load(); }
  bool stopping() const { return stopping_.load(); }
  NodeAgentApi& api() { return api_; }

  // The caller of a call: a verified client certificate and/or a bearer token, through the
  // same authenticator as REST. Unauthenticated without valid credentials.
  absl::StatusOr<Caller> Authenticate(grpc::ServerContextBase* ctx) const;
  void Unexpected(const std::string& request_id, const char* where) noexcept;

  grpc::Status Register(grpc::ServerContext* ctx, const v1::RegisterRequest* req,
                        v1::RegisterResponse* resp) override {
    return Call(ctx, resp, "Register", [&](const Caller& c) { return api_.Register(c, *req); });
  }
  grpc::Status PublishResources(grpc::ServerContext* ctx, const v1::PublishResourcesRequest* req,
                                v1::PublishResourcesResponse* resp) override {
    return Call(ctx, resp, "PublishResources",
                [&](const Caller& c) { return api_.PublishResources(c, *req); });
  }
  grpc::Status ReportPrepared(grpc::ServerContext* ctx, const v1::ReportPreparedRequest* req,
                              v1::ReportPreparedResponse* resp) override {
    return Call(ctx, resp, "ReportPrepared",
                [&](const Caller& c) { return api_.ReportPrepared(c, *req); });
  }
  grpc::Status ReportUnprepared(grpc::ServerContext* ctx, const v1::ReportUnpreparedRequest* req,
                                v1::ReportUnpreparedResponse* resp) override {
    return Call(ctx, resp, "ReportUnprepared",
                [&](const Caller& c) { return api_.ReportUnprepared(c, *req); });
  }
  grpc::Status ReportHealth(grpc::ServerContext* ctx, const v1::ReportHealthRequest* req,
                            v1::ReportHealthResponse* resp) override {
    return Call(ctx, resp, "ReportHealth",
                [&](const Caller& c) { return api_.ReportHealth(c, *req); });
  }
  grpc::Status Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                         v1::HeartbeatResponse* resp) override {
    return Call(ctx, resp, "Heartbeat", [&](const Caller& c) { return api_.Heartbeat(c, *req); });
  }
  grpc::ServerWriteReactor<v1::WatchAssignmentsResponse>* WatchAssignments(
      grpc::CallbackServerContext* ctx, const v1::WatchAssignmentsRequest* req) override;
  grpc::ServerBidiReactor<v1::HeartbeatRequest, v1::HeartbeatResponse>* Heartbeats(
      grpc::CallbackServerContext* ctx) override;

  HeartbeatWriter& heartbeat_writer() { return heartbeat_writer_; }
  const GrpcServerOptions& options() const { return options_; }
  // The open Heartbeats streams, so that Shutdown can end them (false: shutting down, end it).
  bool AddStream(const std::shared_ptr<Resumer>& stream) {
    qm::MutexLock lock(&streams_mu_);
    if (stopping_.load()) return false;
    streams_.insert(stream);
    return true;
  }
  void RemoveStream(const std::shared_ptr<Resumer>& stream) {
    qm::MutexLock lock(&streams_mu_);
    streams_.erase(stream);
  }

 private:
  // Authenticates, runs `fn` and maps its outcome; the last-resort catch of unary calls.
  template <typename Resp, typename Fn>
  grpc::Status Call(grpc::ServerContext* ctx, Resp* resp, const char* method, Fn fn) {
    std::string request_id = RandomUuid();
    if (stopping_.load()) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down");
    }
    try {
      auto caller = Authenticate(ctx);
      if (!caller.ok()) return ToGrpc(caller.status(), request_id);
      caller->request_id = request_id;
      auto result = fn(*caller);
      if (!result.ok()) {
        if (absl::IsInvalidArgument(result.status()) || absl::IsPermissionDenied(result.status())) {
          spdlog::info("request_id={} {} by {}: {}", request_id, method, caller->user.name,
                       result.status().ToString());
        }
        return ToGrpc(result.status(), request_id);
      }
      *resp = std::move(*result);
      return grpc::Status::OK;
    } catch (...) {
      Unexpected(request_id, method);
      return grpc::Status(grpc::StatusCode::INTERNAL,
                          "internal error; see the server log for request id " + request_id);
    }
  }

  NodeAgentApi& api_;
  const auth::Authenticator& authn_;
  const GrpcServerOptions options_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> unexpected_{0};
  HeartbeatWriter heartbeat_writer_{api_};
  qm::Mutex streams_mu_;
  std::set<std::shared_ptr<Resumer>> streams_ ABSL_GUARDED_BY(streams_mu_);
};

namespace {

// Ends a callback stream once, and never while a write is in flight: a status that comes during
// a write is sent from that write's OnWriteDone. Guarded by the reactor's mutex; `R` is the
// reactor (ServerWriteReactor or ServerBidiReactor), whose Finish it calls.
class FinishGate {
 public:
  // Before each StartWrite.
  void Writing() { writing_ = true; }
  bool writing() const { return writing_; }
  // Finished, or about to be once the write in flight is done.
  bool finished() const { return finished_ || pending_.has_value(); }

  template <typename R>
  void Finish(R* reactor, grpc::Status status) {
    if (finished()) return;
    if (writing_) {
      pending_ = std::move(status);
      return;
    }
    finished_ = true;
    reactor->Finish(std::move(status));
  }

  // From OnWriteDone. True when the stream is finished now (the status that waited was sent, or
  // the write failed because the client went away): the reactor has nothing more to do.
  template <typename R>
  bool WriteDone(R* reactor, bool ok) {
    writing_ = false;
    if (pending_.has_value()) {
      finished_ = true;
      reactor->Finish(std::move(*pending_));
      pending_.reset();
      return true;
    }
    if (!ok) Finish(reactor, grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
    return finished();
  }

 private:
  bool writing_ = false;
  bool finished_ = false;
  std::optional<grpc::Status> pending_;
};

// One WatchAssignments stream: writes the feed's messages one at a time, as they come, and
// finishes when the feed ends or the client goes. Lock order: the Resumer, then this reactor's mu_,
// then the feed's (the feed never holds its lock while waking us).
class WatchReactor final : public grpc::ServerWriteReactor<v1::WatchAssignmentsResponse> {
 public:
  WatchReactor(GrpcServer::Impl& server, grpc::CallbackServerContext* ctx,
               const v1::WatchAssignmentsRequest& request) {
    const std::string request_id = RandomUuid();
    if (server.stopping()) {
      gate_.Finish(this,
                   grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down"));
      return;
    }
    try {
      auto caller = server.Authenticate(ctx);
      if (!caller.ok()) {
        gate_.Finish(this, ToGrpc(caller.status(), request_id));
        return;
      }
      caller->request_id = request_id;
      auto feed = server.api().WatchAssignments(*caller, request);
      if (!feed.ok()) {
        gate_.Finish(this, ToGrpc(feed.status(), request_id));
        return;
      }
      feed_ = *feed;
      waker_ = std::make_shared<Resumer>([this](const absl::Status&) { Wake(); });
      feed_->SetNotify([w = waker_] { w->Resume(absl::OkStatus()); });
      spdlog::debug("request_id={} node {} watches its assignments", request_id, feed_->node());
    } catch (...) {
      server.Unexpected(request_id, "WatchAssignments");
      gate_.Finish(this,
                   grpc::Status(grpc::StatusCode::INTERNAL,
                                "internal error; see the server log for request id " + request_id));
      return;
    }
    Wake();
  }

  void Wake() {
    qm::MutexLock lock(&mu_);
    if (!gate_.writing()) NextLocked();
  }

  void OnWriteDone(bool ok) override {
    qm::MutexLock lock(&mu_);
    if (gate_.WriteDone(this, ok)) return;
    NextLocked();
  }

  void OnCancel() override {
    qm::MutexLock lock(&mu_);
    gate_.Finish(this, grpc::Status::CANCELLED);
  }

  void OnDone() override {
    if (waker_) waker_->Clear();
    if (feed_) feed_->Close();
    delete this;
  }

 private:
  void NextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (gate_.finished() || feed_ == nullptr) return;
    if (feed_->Pop(&msg_)) {
      gate_.Writing();
      StartWrite(&msg_);
      return;
    }
    if (auto ended = feed_->Ended()) gate_.Finish(this, ToGrpc(*ended, ""));
  }

  qm::Mutex mu_;
  std::shared_ptr<AssignmentFeed> feed_;  // set by the constructor
  std::shared_ptr<Resumer> waker_;        // set by the constructor
  v1::WatchAssignmentsResponse msg_ ABSL_GUARDED_BY(mu_);
  FinishGate gate_ ABSL_GUARDED_BY(mu_);
};

// One Heartbeats stream: checks the caller on the first beat (and again every
// options().heartbeat_recheck), notes each beat in memory on gRPC's thread, hands the rare
// Ready write to the HeartbeatWriter and reads the next beat only after it. Answers the first
// beat; ends with the status of the first beat that fails.
class HeartbeatReactor final
    : public grpc::ServerBidiReactor<v1::HeartbeatRequest, v1::HeartbeatResponse> {
 public:
  HeartbeatReactor(GrpcServer::Impl& server, grpc::CallbackServerContext* ctx)
      : server_(server), ctx_(ctx) {
    self_ = std::make_shared<Resumer>([this](const absl::Status& st) { Resume(st); });
    qm::MutexLock lock(&mu_);
    if (!server_.AddStream(self_)) {
      FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down"));
      return;
    }
    registered_ = true;
    reading_ = true;
    StartRead(&req_);
  }

  void OnReadDone(bool ok) override {
    qm::MutexLock lock(&mu_);
    reading_ = false;
    if (gate_.finished()) return;
    if (!ok) {  // the agent closed its side, or went away
      FinishLocked(grpc::Status::OK);
      return;
    }
    try {
      if (absl::Status st = CheckLocked(); !st.ok()) {
        FinishLocked(ToGrpc(st, request_id_));
        return;
      }
      if (server_.api().NoteHeartbeat(node_)) {
        server_.heartbeat_writer().Submit(caller_, node_, self_);
        return;  // Resume goes on
      }
    } catch (...) {
      server_.Unexpected(request_id_, "Heartbeats");
      FinishLocked(
          grpc::Status(grpc::StatusCode::INTERNAL,
                       "internal error; see the server log for request id " + request_id_));
      return;
    }
    NextLocked();
  }

  void OnWriteDone(bool ok) override {
    qm::MutexLock lock(&mu_);
    if (gate_.WriteDone(this, ok)) return;
    if (!reading_) {
      reading_ = true;
      StartRead(&req_);
    }
  }

  void OnCancel() override {
    qm::MutexLock lock(&mu_);
    FinishLocked(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    self_->Clear();
    if (registered_) server_.RemoveStream(self_);
    delete this;
  }

 private:
  // After a Ready write (or from Shutdown, with UNAVAILABLE).
  void Resume(const absl::Status& st) {
    qm::MutexLock lock(&mu_);
    if (gate_.finished()) return;
    if (!st.ok()) {
      FinishLocked(ToGrpc(st, request_id_));
      return;
    }
    NextLocked();
  }

  // The first beat names the node and checks the caller; later ones must name the same node.
  absl::Status CheckLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const auto now = std::chrono::steady_clock::now();
    if (!node_.empty() && req_.node_name() != node_) {
      return absl::InvalidArgumentError("node_name: Invalid value: \"" + req_.node_name() +
                                        "\": this stream heartbeats for node \"" + node_ + "\"");
    }
    if (!node_.empty() && now - checked_ < server_.options().heartbeat_recheck) {
      return absl::OkStatus();
    }
    request_id_ = RandomUuid();
    auto caller = server_.Authenticate(ctx_);
    if (!caller.ok()) return caller.status();
    caller->request_id = request_id_;
    QM_RETURN_IF_ERROR(server_.api().CheckHeartbeat(*caller, req_.node_name()));
    caller_ = std::move(*caller);
    node_ = req_.node_name();
    checked_ = now;
    return absl::OkStatus();
  }

  // Answers the first beat, then reads the next.
  void NextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!answered_) {
      answered_ = true;
      resp_.set_heartbeat_interval_seconds(server_.api().heartbeat_interval_seconds());
      gate_.Writing();
      StartWrite(&resp_);
      return;
    }
    reading_ = true;
    StartRead(&req_);
  }

  void FinishLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    gate_.Finish(this, std::move(status));
  }

  GrpcServer::Impl& server_;
  grpc::CallbackServerContext* const ctx_;
  std::shared_ptr<Resumer> self_;  // set by the constructor
  bool registered_ = false;        // set by the constructor
  qm::Mutex mu_;
  v1::HeartbeatRequest req_ ABSL_GUARDED_BY(mu_);
  v1::HeartbeatResponse resp_ ABSL_GUARDED_BY(mu_);
  std::string node_ ABSL_GUARDED_BY(mu_);
  Caller caller_ ABSL_GUARDED_BY(mu_);
  std::string request_id_ ABSL_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point checked_ ABSL_GUARDED_BY(mu_);
  bool answered_ ABSL_GUARDED_BY(mu_) = false;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  FinishGate gate_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

grpc::ServerBidiReactor<v1::HeartbeatRequest, v1::HeartbeatResponse>* GrpcServer::Impl::Heartbeats(
    grpc::CallbackServerContext* ctx) {
  return new HeartbeatReactor(*this, ctx);
}

grpc::ServerWriteReactor<v1::WatchAssignmentsResponse>* GrpcServer::Impl::WatchAssignments(
    grpc::CallbackServerContext* ctx, const v1::WatchAssignmentsRequest* req) {
  return new WatchReactor(*this, ctx, *req);
}

absl::StatusOr<Caller> GrpcServer::Impl::Authenticate(grpc::ServerContextBase* ctx) const {
  auth::Credentials creds;
  const auto& md = ctx->client_metadata();
  if (auto it = md.find("authorization"); it != md.end()) {
    std::string value(it->second.data(), it->second.size());
    constexpr char kBearer[] = "Bearer ";
    if (value.rfind(kBearer, 0) == 0) creds.bearer_token = value.substr(sizeof(kBearer) - 1);
  }
  if (auto ac = ctx->auth_context(); ac != nullptr && ac->IsPeerAuthenticated()) {
    auto pems = ac->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
    if (!pems.empty()) {
      auto subject = auth::SubjectOfCertificatePem(std::string(pems[0].data(), pems[0].size()));
      if (subject.ok()) {
        creds.client_certificate = auth::PeerCertificate{subject->first, subject->second};
      } else {
        creds.untrusted_client_certificate = true;
      }
    }
  }
  auto user = authn_.Authenticate(creds);
  if (!user.ok()) return absl::UnauthenticatedError(std::string(user.status().message()));
  if (!user->has_value()) {
    return absl::UnauthenticatedError(
        "credentials required: a client certificate or an `authorization: Bearer` token");
  }
  Caller caller;
  caller.user = **user;
  caller.peer = ctx->peer();
  if (auto it = md.find("user-agent"); it != md.end()) {
    caller.user_agent = std::string(it->second.data(), it->second.size());
  }
  return caller;
}

void GrpcServer::Impl::Unexpected(const std::string& request_id, const char* where) noexcept {
  unexpected_.fetch_add(1);
  try {
    try {
      throw;
    } catch (const std::exception& e) {
      spdlog::error("request_id={} node-agent {}: unexpected exception: {}", request_id, where,
                    e.what());
    } catch (...) {
      spdlog::error("request_id={} node-agent {}: unexpected exception", request_id, where);
    }
  } catch (...) {
  }
}

absl::Status GrpcServer::Impl::Start() {
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (options_.tls_cert_file.empty()) {
    creds = grpc::InsecureServerCredentials();
  } else {
    auto cert = ReadFile(options_.tls_cert_file);
    if (!cert.ok()) return cert.status();
    auto key = ReadFile(options_.tls_key_file);
    if (!key.ok()) return key.status();
    grpc::SslServerCredentialsOptions ssl(options_.client_ca_file.empty()
                                              ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                              : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
    if (!options_.client_ca_file.empty()) {
      auto ca = ReadFile(options_.client_ca_file);
      if (!ca.ok()) return ca.status();
      ssl.pem_root_certs = *ca;
    }
    ssl.pem_key_cert_pairs.push_back({*key, *cert});
    creds = grpc::SslServerCredentials(ssl);
  }
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options_.address, creds, &port_);
  builder.RegisterService(this);
  builder.SetMaxReceiveMessageSize(options_.max_message_bytes);
  builder.SetMaxSendMessageSize(options_.max_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                             static_cast<int>(options_.keepalive_time.count()));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             static_cast<int>(options_.keepalive_timeout.count()));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             static_cast<int>(options_.min_client_ping_interval.count()));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  grpc::ResourceQuota quota("qm-node-agent");
  quota.SetMaxThreads(options_.max_threads);
  builder.SetResourceQuota(quota);
  // gRPC's sync server ends a thread that finds more than MAX_POLLERS others waiting for work
  // and starts one when none is: with the default (2) a steady stream of calls made and ended
  // threads all the time (clone, an 8 MB stack mapped and unmapped per burst).
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS,
                              options_.min_pollers);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
                              options_.max_pollers);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    server_.reset();
    return absl::UnavailableError("cannot serve gRPC on " + options_.address);
  }
  return absl::OkStatus();
}

void GrpcServer::Impl::Shutdown(std::chrono::milliseconds grace) {
  std::set<std::shared_ptr<Resumer>> streams;
  {
    qm::MutexLock lock(&streams_mu_);
    if (stopping_.exchange(true)) return;
    streams.swap(streams_);
  }
  for (const auto& stream : streams) {
    stream->Resume(absl::UnavailableError("the server is shutting down"));
  }
  heartbeat_writer_.Stop();
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now() + grace);
  server_->Wait();
}

GrpcServer::GrpcServer(NodeAgentApi& api, const auth::Authenticator& authenticator,
                       GrpcServerOptions options)
    : impl_(std::make_unique<Impl>(api, authenticator, std::move(options))) {}

GrpcServer::~GrpcServer() { Shutdown(); }

absl::Status GrpcServer::Start() { return impl_->Start(); }
void GrpcServer::Shutdown(std::chrono::milliseconds grace) { impl_->Shutdown(grace); }
int GrpcServer::port() const { return impl_->port(); }
uint64_t GrpcServer::unexpected_errors() const { return impl_->unexpected_errors(); }

}  // namespace qm::api::nodeapi
