#include "agent/agent.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include <fstream>
#include <random>
#include <thread>
#include <variant>

#include "agent/cdi.h"
#include "common/status.h"
#include "qm/agent/v1/agent.grpc.pb.h"
#include "spdlog/spdlog.h"

namespace qm::agent {
namespace {

namespace v1 = ::qm::agent::v1;

// The Kubernetes limits on one ResourceSlice: 128 devices, 64 when a device consumes counters
// or has taints.
constexpr size_t kMaxDevicesPerSlice = 128;
constexpr size_t kMaxDevicesPerSliceWithCounters = 64;

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

// Errors after which a call may succeed if made again later (the session ends and the report
// stays pending); any other answer is final for that report.
bool Retryable(const absl::Status& st) {
  return absl::IsUnavailable(st) || absl::IsDeadlineExceeded(st) || absl::IsAborted(st) ||
         absl::IsCancelled(st) || absl::IsResourceExhausted(st) || absl::IsInternal(st) ||
         absl::IsUnknown(st) || absl::IsUnauthenticated(st);
}

std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

v1::NodeSystemInfo SystemInfo() {
  v1::NodeSystemInfo info;
  utsname u{};
  if (uname(&u) == 0) {
    info.set_operating_system(u.sysname[0] == 'L' ? "linux" : u.sysname);
    std::string arch = u.machine;
    info.set_architecture(arch == "x86_64" ? "amd64" : arch == "aarch64" ? "arm64" : arch);
    info.set_kernel_version(u.release);
  }
  std::ifstream os("/etc/os-release");
  for (std::string line; std::getline(os, line);) {
    if (line.rfind("PRETTY_NAME=", 0) == 0) {
      std::string v = line.substr(12);
      if (v.size() >= 2 && v.front() == '"') v = v.substr(1, v.size() - 2);
      info.set_os_image(v);
    }
  }
  info.set_machine_id(FirstLine("/etc/machine-id"));
  info.set_boot_id(FirstLine("/proc/sys/kernel/random/boot_id"));
  return info;
}

v1::AttributeValue AttributeProto(const model::AttributeValue& v) {
  v1::AttributeValue out;
  if (const auto* i = std::get_if<int64_t>(&v)) out.set_int_value(*i);
  if (const auto* b = std::get_if<bool>(&v)) out.set_bool_value(*b);
  if (const auto* s = std::get_if<std::string>(&v)) out.set_string_value(*s);
  if (const auto* ver = std::get_if<model::Version>(&v)) out.set_version_value(ver->value);
  return out;
}

v1::Device DeviceProto(const model::Device& d) {
  v1::Device out;
  out.set_name(d.name);
  for (const auto& [k, v] : d.attributes) (*out.mutable_attributes())[k] = AttributeProto(v);
  for (const auto& [k, c] : d.capacity) {
    v1::Capacity cap;
    cap.set_value(c.value.String());
    if (c.request_policy != nullptr) {
      auto* p = cap.mutable_request_policy();
      if (c.request_policy->default_value) {
        p->set_default_value(c.request_policy->default_value->String());
      }
      for (const auto& q : c.request_policy->valid_values) p->add_valid_values(q.String());
      if (c.request_policy->valid_range) {
        auto* r = p->mutable_valid_range();
        r->set_min(c.request_policy->valid_range->min.String());
        if (c.request_policy->valid_range->max)
          r->set_max(c.request_policy->valid_range->max->String());
        if (c.request_policy->valid_range->step) {
          r->set_step(c.request_policy->valid_range->step->String());
        }
      }
    }
    (*out.mutable_capacity())[k] = std::move(cap);
  }
  for (const auto& c : d.consumes_counters) {
    auto* cc = out.add_consumes_counters();
    cc->set_counter_set(c.counter_set);
    for (const auto& [k, q] : c.counters) (*cc->mutable_counters())[k] = q.String();
  }
  for (const auto& t : d.taints) {
    auto* pt = out.add_taints();
    pt->set_key(t.key);
    pt->set_value(t.value);
    pt->set_effect(t.effect);
  }
  out.set_allow_multiple_allocations(d.allow_multiple_allocations);
  return out;
}

// The node's pool: counters in a slice of their own (a slice holds devices or counters), the
// devices in as many slices as the limits require.
v1::Pool PoolProto(const Inventory& inv, const std::string& pool) {
  v1::Pool out;
  out.set_name(pool);
  bool counters = !inv.shared_counters.empty();
  for (const auto& d : inv.devices) {
    counters = counters || !d.consumes_counters.empty() || !d.taints.empty();
  }
  const size_t per_slice = counters ? kMaxDevicesPerSliceWithCounters : kMaxDevicesPerSlice;
  if (!inv.shared_counters.empty()) {
    v1::Slice* s = out.add_slices();
    for (const auto& set : inv.shared_counters) {
      auto* cs = s->add_shared_counters();
      cs->set_name(set.name);
      for (const auto& [k, q] : set.counters) (*cs->mutable_counters())[k] = q.String();
    }
  }
  for (size_t i = 0; i < inv.devices.size(); i += per_slice) {
    v1::Slice* s = out.add_slices();
    for (size_t j = i; j < std::min(inv.devices.size(), i + per_slice); ++j) {
      *s->add_devices() = DeviceProto(inv.devices[j]);
    }
  }
  if (out.slices_size() == 0) out.add_slices();  // a pool with no devices is still published
  return out;
}

}  // namespace

// One connection to the server.
class Agent::Session {
 public:
  Session(Agent& agent, std::shared_ptr<grpc::Channel> channel)
      : agent_(agent), stub_(v1::NodeAgent::NewStub(std::move(channel))) {}

  ~Session() {
    Cancel();
    if (heartbeat_.joinable()) heartbeat_.join();
  }

  absl::Status Run();

  // The devices' health changed (a device event): report it from the heartbeat thread. Any
  // thread.
  void HealthChanged() {
    qm::MutexLock lock(&mu_);
    health_dirty_ = true;
    cv_.SignalAll();
  }

  // Ends the session: the watch stream and the heartbeat loop stop. Any thread.
  void Cancel() {
    qm::MutexLock lock(&mu_);
    cancelled_ = true;
    if (watch_ctx_ != nullptr) watch_ctx_->TryCancel();
    if (beats_ctx_ != nullptr) beats_ctx_->TryCancel();
    cv_.SignalAll();
  }

 private:
  void Setup(grpc::ClientContext* ctx, bool deadline = true) const {
    if (deadline)
      ctx->set_deadline(std::chrono::system_clock::now() + agent_.options_.call_timeout);
    if (!agent_.options_.token.empty()) {
      ctx->AddMetadata("authorization", "Bearer " + agent_.options_.token);
    }
  }
  const std::string& node() const { return agent_.options_.node_name; }

  // Makes a unary call (`call(ctx)` on a fresh context each time). A call the server turned
  // away for load (RESOURCE_EXHAUSTED: all its threads busy, as in a burst of reports after a
  // batch of bindings) is made again after 50 ms, 100 ms, ... up to 1 s (with jitter), for about
  // 5 s in all, instead of ending the session; Cancel ends the wait.
  template <typename Call>
  absl::Status Unary(Call call) ABSL_LOCKS_EXCLUDED(mu_) {
    std::chrono::milliseconds delay(50);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (;;) {
      grpc::ClientContext ctx;
      Setup(&ctx);
      absl::Status st = FromGrpc(call(&ctx));
      if (!absl::IsResourceExhausted(st)) return st;
      const auto jitter = std::chrono::milliseconds(
          std::chrono::steady_clock::now().time_since_epoch().count() % (delay.count() / 2 + 1));
      const auto wake = std::chrono::steady_clock::now() + delay + jitter;
      if (wake > give_up) return st;
      qm::MutexLock lock(&mu_);
      while (!cancelled_ && cv_.WaitUntil(&mu_, wake)) {
      }
      if (cancelled_) return st;
      delay = std::min(delay * 2, std::chrono::milliseconds(1000));
    }
  }

  absl::Status Register(const Inventory& inv);
  absl::Status Publish(const Inventory& inv);
  absl::Status ReportHealth(const Inventory& inv);
  absl::Status ReportPending();
  absl::Status ReportPrepared(const PreparedClaim& claim, const std::string& error);
  absl::Status ReportUnprepared(const UnpreparedClaim& claim, const std::string& error);
  absl::Status Watch();
  absl::Status Handle(const v1::WatchAssignmentsResponse& msg);
  void HeartbeatLoop();
  // One heartbeat, on the Heartbeats stream (opened on the first beat, again after it ended),
  // or unary against a server without it. `interval`: what the server asked for, 0 if it did
  // not say. Heartbeat thread only.
  absl::Status Beat(int* interval);
  // Ends the heartbeat stream, if one is open, and returns how it ended.
  absl::Status CloseBeats();

  Agent& agent_;
  std::unique_ptr<v1::NodeAgent::Stub> stub_;
  std::string driver_;
  std::thread heartbeat_;
  qm::Mutex mu_;
  qm::CondVar cv_;
  int heartbeat_seconds_ ABSL_GUARDED_BY(mu_) = 10;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool health_dirty_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* watch_ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  // The heartbeat stream (heartbeat thread only; its context also under mu_ for Cancel).
  std::unique_ptr<grpc::ClientContext> beats_ctx_owned_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::HeartbeatRequest, v1::HeartbeatResponse>> beats_;
  grpc::ClientContext* beats_ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool unary_heartbeats_ = false;
  // As discovered at the start of the session (before the heartbeat thread starts).
  Inventory inventory_;
};

absl::Status Agent::Session::Run() {
  auto inv = agent_.source_->Discover();
  if (!inv.ok()) return inv.status();
  driver_ = inv->driver;
  inventory_ = *inv;
  {
    qm::MutexLock lock(&agent_.mu_);
    agent_.inventory_ = *inv;
  }
  agent_.preparer_->SetInventory(*inv);
  QM_RETURN_IF_ERROR(Register(*inv));
  QM_RETURN_IF_ERROR(Publish(*inv));
  QM_RETURN_IF_ERROR(ReportHealth(*inv));
  QM_RETURN_IF_ERROR(ReportPending());
  heartbeat_ = std::thread([this] { HeartbeatLoop(); });
  absl::Status st = Watch();
  Cancel();
  heartbeat_.join();
  return st;
}

absl::Status Agent::Session::Register(const Inventory& inv) {
  v1::RegisterRequest req;
  req.set_node_name(node());
  req.set_agent_version(agent_.options_.version);
  for (const auto& [k, v] : inv.node_labels) (*req.mutable_labels())[k] = v;
  for (const auto& [k, v] : inv.node_capacity) (*req.mutable_capacity())[k] = v;
  *req.mutable_node_info() = SystemInfo();
  v1::RegisterResponse resp;
  QM_RETURN_IF_ERROR(
      Unary([&](grpc::ClientContext* ctx) { return stub_->Register(ctx, req, &resp); }));
  if (resp.heartbeat_interval_seconds() > 0) {
    qm::MutexLock lock(&mu_);
    heartbeat_seconds_ = resp.heartbeat_interval_seconds();
  }
  spdlog::info("registered node {} ({} devices of {})", node(), inv.devices.size(), inv.driver);
  return absl::OkStatus();
}

absl::Status Agent::Session::Publish(const Inventory& inv) {
  v1::PublishResourcesRequest req;
  req.set_node_name(node());
  req.set_driver(inv.driver);
  *req.add_pools() = PoolProto(inv, node());
  v1::PublishResourcesResponse resp;
  QM_RETURN_IF_ERROR(
      Unary([&](grpc::ClientContext* ctx) { return stub_->PublishResources(ctx, req, &resp); }));
  for (const auto& p : resp.pools()) {
    spdlog::info("published pool {} generation {} ({} slices{})", p.name(), p.generation(),
                 p.slice_names_size(), resp.changed() ? "" : ", unchanged");
  }
  return absl::OkStatus();
}

absl::Status Agent::Session::ReportHealth(const Inventory& inv) {
  // As the device source found them (a simulate file may mark GPUs unhealthy), and what device
  // events (XID errors) said since the agent started.
  std::map<std::string, EventHealth> events;
  {
    qm::MutexLock lock(&agent_.mu_);
    events = agent_.event_unhealthy_;
  }
  v1::ReportHealthRequest req;
  req.set_node_name(node());
  req.set_driver(inv.driver);
  for (const auto& d : inv.devices) {
    auto* h = req.add_devices();
    h->set_pool(node());
    h->set_device(d.name);
    if (auto ev = events.find(d.name); ev != events.end()) {
      h->set_health(v1::HEALTH_UNHEALTHY);
      h->set_reason(ev->second.reason);
      h->set_message(ev->second.message);
    } else if (auto bad = inv.unhealthy.find(d.name); bad != inv.unhealthy.end()) {
      h->set_health(v1::HEALTH_UNHEALTHY);
      h->set_reason(bad->second);
    } else {
      h->set_health(v1::HEALTH_HEALTHY);
    }
  }
  v1::ReportHealthResponse resp;
  return Unary([&](grpc::ClientContext* ctx) { return stub_->ReportHealth(ctx, req, &resp); });
}

absl::Status Agent::Session::ReportPrepared(const PreparedClaim& claim, const std::string& error) {
  v1::ReportPreparedRequest req;
  req.set_node_name(node());
  req.set_driver(driver_);
  req.mutable_claim()->set_namespace_(claim.namespace_);
  req.mutable_claim()->set_name(claim.name);
  req.mutable_claim()->set_uid(claim.uid);
  req.set_allocation_id(claim.allocation_id);
  req.set_error(error);
  for (const auto& d : claim.devices) {
    auto* pd = req.add_devices();
    pd->set_request(d.request);
    pd->set_pool(d.pool);
    pd->set_device(d.device);
    pd->set_share_id(d.share_id);
    for (const auto& id : d.cdi_device_ids) pd->add_cdi_device_ids(id);
  }
  v1::ReportPreparedResponse resp;
  absl::Status st =
      Unary([&](grpc::ClientContext* ctx) { return stub_->ReportPrepared(ctx, req, &resp); });
  if (!st.ok() && !Retryable(st)) {
    // Final: the claim moved on (the watch brings what to do next) or the report is refused.
    spdlog::warn("report of claim {}/{} refused: {}", claim.namespace_, claim.name, st.ToString());
    return absl::OkStatus();
  }
  return st;
}

absl::Status Agent::Session::ReportUnprepared(const UnpreparedClaim& claim,
                                              const std::string& error) {
  v1::ReportUnpreparedRequest req;
  req.set_node_name(node());
  req.set_driver(driver_);
  req.mutable_claim()->set_namespace_(claim.namespace_);
  req.mutable_claim()->set_name(claim.name);
  req.mutable_claim()->set_uid(claim.uid);
  req.set_error(error);
  v1::ReportUnpreparedResponse resp;
  absl::Status st =
      Unary([&](grpc::ClientContext* ctx) { return stub_->ReportUnprepared(ctx, req, &resp); });
  if (!st.ok() && !Retryable(st)) {
    spdlog::warn("unprepare report of claim {}/{} refused: {}", claim.namespace_, claim.name,
                 st.ToString());
    return absl::OkStatus();
  }
  return st;
}

absl::Status Agent::Session::ReportPending() {
  Preparer& p = *agent_.preparer_;
  // Unprepares first: a claim unprepared and prepared again reports in that order.
  const auto unreported = p.data().unreported;
  for (const auto& [uid, claim] : unreported) {
    QM_RETURN_IF_ERROR(ReportUnprepared(claim, ""));
    QM_RETURN_IF_ERROR(p.MarkUnpreparedReported(uid));
  }
  const auto claims = p.data().claims;
  for (const auto& [uid, claim] : claims) {
    if (claim.reported) continue;
    QM_RETURN_IF_ERROR(ReportPrepared(claim, ""));
    QM_RETURN_IF_ERROR(p.MarkPreparedReported(uid));
  }
  return absl::OkStatus();
}

absl::Status Agent::Session::Handle(const v1::WatchAssignmentsResponse& msg) {
  Preparer& p = *agent_.preparer_;
  for (const auto& c : msg.unprepare()) {
    UnpreparedClaim claim{c.namespace_(), c.name(), c.uid()};
    if (auto held = p.data().claims.find(c.uid()); held != p.data().claims.end()) {
      claim.namespace_ = held->second.namespace_;
      claim.name = held->second.name;
    }
    absl::Status st = p.Unprepare(c.uid(), claim.namespace_, claim.name);
    if (!st.ok()) {
      spdlog::error("unprepare of claim {}/{} failed: {}", claim.namespace_, claim.name,
                    st.ToString());
      QM_RETURN_IF_ERROR(ReportUnprepared(claim, std::string(st.message())));
      continue;
    }
    spdlog::info("unprepared claim {}/{} ({})", claim.namespace_, claim.name, claim.uid);
    QM_RETURN_IF_ERROR(ReportUnprepared(claim, ""));
    QM_RETURN_IF_ERROR(p.MarkUnpreparedReported(c.uid()));
  }
  for (const auto& a : msg.prepare()) {
    ClaimAssignment ca;
    ca.namespace_ = a.claim().namespace_();
    ca.name = a.claim().name();
    ca.uid = a.claim().uid();
    ca.allocation_id = a.allocation_id();
    for (const auto& d : a.devices()) {
      if (d.driver() != driver_) continue;
      ClaimAssignment::Device dev{d.request(), d.driver(), d.pool(), d.device(), d.share_id(), {}};
      for (const auto& [k, v] : d.consumed_capacity()) dev.consumed_capacity[k] = v;
      ca.devices.push_back(std::move(dev));
    }
    for (const auto& c : a.configs()) {
      ca.configs.push_back(OpaqueConfig{
          c.source(), {c.requests().begin(), c.requests().end()}, c.driver(), c.parameters_json()});
    }
    PreparedClaim report;
    report.namespace_ = ca.namespace_;
    report.name = ca.name;
    report.uid = ca.uid;
    report.allocation_id = ca.allocation_id;
    std::string error;
    auto outcome = p.Prepare(ca);
    if (!outcome.ok()) {
      error = "prepare failed on node " + node() + ": " + std::string(outcome.status().message());
    } else if (!outcome->error.empty()) {
      error = outcome->error;
    } else {
      report.devices = outcome->devices;
    }
    if (error.empty()) {
      spdlog::info("{} claim {}/{} ({} devices)",
                   outcome->already_prepared ? "already prepared" : "prepared", ca.namespace_,
                   ca.name, report.devices.size());
    } else {
      spdlog::warn("claim {}/{} not prepared: {}", ca.namespace_, ca.name, error);
    }
    QM_RETURN_IF_ERROR(ReportPrepared(report, error));
    if (error.empty()) QM_RETURN_IF_ERROR(p.MarkPreparedReported(ca.uid));
  }
  return p.SetResourceVersion(msg.resource_version());
}

absl::Status Agent::Session::Watch() {
  const Preparer& p = *agent_.preparer_;
  v1::WatchAssignmentsRequest req;
  req.set_node_name(node());
  req.add_drivers(driver_);
  req.set_resource_version(p.data().resource_version);
  for (const auto& [uid, claim] : p.data().claims) {
    auto* ref = req.add_prepared();
    ref->mutable_claim()->set_namespace_(claim.namespace_);
    ref->mutable_claim()->set_name(claim.name);
    ref->mutable_claim()->set_uid(uid);
    ref->set_allocation_id(claim.allocation_id);
  }
  grpc::ClientContext ctx;
  Setup(&ctx, /*deadline=*/false);
  {
    qm::MutexLock lock(&mu_);
    if (cancelled_) return absl::CancelledError("stopping");
    watch_ctx_ = &ctx;
  }
  auto reader = stub_->WatchAssignments(&ctx, req);
  v1::WatchAssignmentsResponse msg;
  absl::Status handled;
  bool first = true;
  while (reader->Read(&msg)) {
    if (first) {
      spdlog::info("watching assignments from resource version {}", msg.resource_version());
      first = false;
    }
    try {
      handled = Handle(msg);
    } catch (const std::exception& e) {
      handled = absl::InternalError(std::string("unexpected exception: ") + e.what());
    }
    if (!handled.ok()) {
      ctx.TryCancel();
      break;
    }
  }
  absl::Status finished = FromGrpc(reader->Finish());
  {
    qm::MutexLock lock(&mu_);
    watch_ctx_ = nullptr;
  }
  if (!handled.ok()) return handled;
  return finished.ok() ? absl::UnavailableError("the server ended the assignment stream")
                       : finished;
}

void Agent::Session::HeartbeatLoop() {
  int failures = 0;
  qm::MutexLock lock(&mu_);
  while (!cancelled_) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(heartbeat_seconds_);
    while (!cancelled_ && !health_dirty_ && cv_.WaitUntil(&mu_, deadline)) {
    }
    if (cancelled_) break;
    if (health_dirty_) {
      health_dirty_ = false;
      mu_.Unlock();
      absl::Status st = ReportHealth(inventory_);
      mu_.Lock();
      if (!st.ok()) {
        // Reported again at the start of the next session.
        spdlog::warn("health report failed: {}; reconnecting", st.ToString());
        cancelled_ = true;
        if (watch_ctx_ != nullptr) watch_ctx_->TryCancel();
        break;
      }
      continue;
    }
    mu_.Unlock();
    int interval = 0;
    absl::Status st = Beat(&interval);
    mu_.Lock();
    if (st.ok()) {
      failures = 0;
      if (interval > 0) heartbeat_seconds_ = interval;
      continue;
    }
    spdlog::warn("heartbeat failed: {}", st.ToString());
    // The node was deleted, or the credentials changed, or the server keeps failing: start
    // over (re-register, re-publish, re-watch).
    if (absl::IsFailedPrecondition(st) || absl::IsUnauthenticated(st) ||
        absl::IsPermissionDenied(st) || ++failures >= 3) {
      cancelled_ = true;
      if (watch_ctx_ != nullptr) watch_ctx_->TryCancel();
      break;
    }
  }
  mu_.Unlock();
  CloseBeats().IgnoreError();  // the session is over either way
  mu_.Lock();
}

absl::Status Agent::Session::Beat(int* interval) {
  v1::HeartbeatRequest req;
  req.set_node_name(node());
  v1::HeartbeatResponse resp;
  if (!unary_heartbeats_) {
    const bool opening = beats_ == nullptr;
    if (opening) {
      auto ctx = std::make_unique<grpc::ClientContext>();
      Setup(ctx.get(), /*deadline=*/false);
      {
        qm::MutexLock lock(&mu_);
        if (cancelled_) return absl::CancelledError("the session ended");
        beats_ctx_ = ctx.get();
      }
      beats_ = stub_->Heartbeats(ctx.get());
      beats_ctx_owned_ = std::move(ctx);
    }
    // The server answers the first beat of a stream; later ones only show up as the stream's
    // end, when it refuses one.
    if (beats_->Write(req) && (!opening || beats_->Read(&resp))) {
      if (opening) *interval = resp.heartbeat_interval_seconds();
      return absl::OkStatus();
    }
    absl::Status st = CloseBeats();
    if (!absl::IsUnimplemented(st)) {
      return st.ok() ? absl::UnavailableError("the server ended the heartbeat stream") : st;
    }
    spdlog::info("the server has no Heartbeats stream; sending unary heartbeats");
    unary_heartbeats_ = true;
  }
  grpc::ClientContext ctx;
  Setup(&ctx);
  QM_RETURN_IF_ERROR(FromGrpc(stub_->Heartbeat(&ctx, req, &resp)));
  *interval = resp.heartbeat_interval_seconds();
  return absl::OkStatus();
}

absl::Status Agent::Session::CloseBeats() {
  if (beats_ == nullptr) return absl::OkStatus();
  {
    qm::MutexLock lock(&mu_);
    if (cancelled_) beats_ctx_->TryCancel();
  }
  beats_->WritesDone();
  v1::HeartbeatResponse ignored;
  while (beats_->Read(&ignored)) {
  }
  absl::Status st = FromGrpc(beats_->Finish());
  {
    qm::MutexLock lock(&mu_);
    beats_ctx_ = nullptr;
  }
  beats_.reset();
  beats_ctx_owned_.reset();
  return st;
}

// ---- Agent ---------------------------------------------------------------------------------

Agent::Agent(AgentOptions options, std::unique_ptr<DeviceSource> source)
    : options_(std::move(options)),
      source_(std::move(source)),
      checkpoint_(options_.state_dir + "/checkpoint.json") {}

Agent::~Agent() { Stop(); }

absl::Status Agent::Init() {
  for (const auto* dir : {&options_.state_dir, &options_.cdi_dir}) {
    if (mkdir(dir->c_str(), dir == &options_.state_dir ? 0700 : 0755) != 0 && errno != EEXIST) {
      return absl::FailedPreconditionError("cannot create " + *dir + ": " + std::strerror(errno));
    }
  }
  auto data = checkpoint_.Load(options_.node_name);
  if (!data.ok()) return absl::FailedPreconditionError(std::string(data.status().message()));
  data_ = std::move(*data);
  preparer_ = std::make_unique<Preparer>(options_.node_name, options_.node_name, options_.cdi_dir,
                                         &data_, &checkpoint_);
  // Per-claim MPS pipe directories live with the agent's state (outside the CDI directory,
  // which only holds specs).
  preparer_->SetMpsRoot(options_.state_dir + "/mps");
  mps_ = std::make_unique<MpsControl>(options_.mps_control_binary);
  preparer_->SetMpsControl(mps_.get());
  if (!options_.nvidia_smi.empty()) {
    timeslicer_ =
        std::make_unique<TimeSlicer>(options_.nvidia_smi, options_.state_dir + "/nvidia-smi.out");
    preparer_->SetTimeSlicer(timeslicer_.get());
  }
  // MIG instances of placements (the dynamic MIG strategy) are made and destroyed by the source
  // that publishes them.
  preparer_->SetMigInstances(source_->mig_instances());
  QM_RETURN_IF_ERROR(preparer_->Recover());
  QM_RETURN_IF_ERROR(checkpoint_.Save(data_));
  spdlog::info("checkpoint {}: {} prepared claims, resource version {}", checkpoint_.path(),
               data_.claims.size(), data_.resource_version);
  return absl::OkStatus();
}

void Agent::Sleep(std::chrono::milliseconds d) {
  qm::MutexLock lock(&mu_);
  const auto deadline = std::chrono::steady_clock::now() + d;
  while (!stopping_.load() && cv_.WaitUntil(&mu_, deadline)) {
  }
}

absl::Status Agent::RunSession() {
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (options_.insecure) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options_.ca_pem;
    ssl.pem_cert_chain = options_.cert_pem;
    ssl.pem_private_key = options_.key_pem;
    creds = grpc::SslCredentials(ssl);
  }
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetMaxReceiveMessageSize(16 * 1024 * 1024);
  args.SetMaxSendMessageSize(16 * 1024 * 1024);
  args.SetUserAgentPrefix("qm-agent/" + options_.version);
  auto channel = grpc::CreateCustomChannel(options_.server, creds, args);
  Session session(*this, channel);
  {
    qm::MutexLock lock(&mu_);
    if (stopping_) return absl::CancelledError("stopping");
    current_ = &session;
  }
  sessions_.fetch_add(1);
  absl::Status st;
  try {
    st = session.Run();
  } catch (const std::exception& e) {
    st = absl::InternalError(std::string("unexpected exception: ") + e.what());
  }
  {
    qm::MutexLock lock(&mu_);
    current_ = nullptr;
  }
  return st;
}

void Agent::OnDeviceEvent(const DeviceEvent& event) {
  qm::MutexLock lock(&mu_);
  auto change = ClassifyEvent(event, inventory_, options_.ignored_xids);
  if (!change) {
    spdlog::info("device event on {} (type {:#x}, data {}) changes no device's health",
                 event.gpu_uuid, event.type, event.data);
    return;
  }
  bool changed = false;
  for (const auto& name : change->devices) {
    spdlog::warn("device {} unhealthy: {} ({})", name, change->reason, change->message);
    auto [it, inserted] =
        event_unhealthy_.try_emplace(name, EventHealth{change->reason, change->message});
    changed = changed || inserted;
  }
  if (changed && current_ != nullptr) current_->HealthChanged();
}

void Agent::WatchHealth() {
  std::chrono::milliseconds backoff = options_.min_backoff;
  while (!stopping_) {
    absl::Status st =
        source_->WatchEvents([this](const DeviceEvent& e) { OnDeviceEvent(e); }, stopping_);
    if (stopping_) return;
    if (absl::IsUnimplemented(st)) {
      spdlog::info("no device health events: {}", std::string(st.message()));
      return;
    }
    spdlog::warn("watching device events failed: {}; again in {} ms", st.ToString(),
                 backoff.count());
    Sleep(backoff);
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

void Agent::Run() {
  std::thread health([this] { WatchHealth(); });
  RunSessions();
  health.join();
}

void Agent::RunSessions() {
  std::mt19937 rng(std::random_device{}());
  std::chrono::milliseconds backoff = options_.min_backoff;
  int behind = 0;
  while (!stopping_) {
    const auto start = std::chrono::steady_clock::now();
    absl::Status st = RunSession();
    if (stopping_) break;
    if (std::chrono::steady_clock::now() - start > options_.max_backoff) {
      backoff = options_.min_backoff;
    }
    // A server that never reaches our resource version has lost its data (a new database):
    // after a few tries, resynchronise from scratch rather than wait forever.
    if (absl::IsUnavailable(st) &&
        st.message().find("has not caught up") != std::string_view::npos && ++behind >= 3) {
      spdlog::warn("the server stays behind resource version {}; resynchronising from scratch",
                   data_.resource_version);
      data_.resource_version = 0;
      if (auto saved = checkpoint_.Save(data_); !saved.ok()) spdlog::error("{}", saved.ToString());
      behind = 0;
    }
    std::uniform_int_distribution<int64_t> jitter(backoff.count() / 2, backoff.count());
    const std::chrono::milliseconds wait(jitter(rng));
    spdlog::warn("session ended: {}; reconnecting to {} in {} ms", st.ToString(), options_.server,
                 wait.count());
    Sleep(wait);
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

void Agent::Stop() {
  qm::MutexLock lock(&mu_);
  stopping_ = true;
  if (current_ != nullptr) current_->Cancel();
  cv_.SignalAll();
}

}  // namespace qm::agent
