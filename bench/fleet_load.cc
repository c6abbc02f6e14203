// Fleet load driver (issue 11, "Benchmarks"): N simulated node agents in one process, spread
// over many gRPC channels, against one running server, as qm-agent talks to it.
//
//  1. Register + PublishResources of every node (8 GPUs each, attributes as qm-agent's
//     simulator publishes them): wall time until all are stored.
//  2. Heartbeats: every node every --heartbeat-interval seconds, spread evenly, on one
//     Heartbeats stream per node as qm-agent sends them (--heartbeat-stream false: unary
//     Heartbeat calls, as agents before the stream), for
//     --heartbeat-seconds; the server process's CPU time over that window from /proc/<pid>/stat
//     (--server-pid), and PostgreSQL's (--postmaster-pid: it and its children) alongside.
//     Heartbeats go on in the background for the rest of the run.
//  3. (--pods N > 0) Every node opens its WatchAssignments stream; N pods with one-GPU claims
//     from a template are created over 64 connections (the 5000pods_500nodes shape); each
//     assignment is prepared as qm-agent does it (a CDI spec written atomically with fsync in
//     the node's own directory under --cdi-dir, as each node has its own /var/run/cdi; then
//     ReportPrepared). A claim watch gives, per claim, when it was seen
//     allocated (the binding) and Ready; reported: bind -> CDI written and bind -> claim Ready
//     p50/p99, and pods/s from the first creation to the last binding.
//
//   fleet_load --url https://127.0.0.1:PORT --token-file DATA/admin.token --ca-file DATA/pki/ca.crt
//              --grpc HOST:PORT [--nodes 5000] [--gpus 8] [--channels 64] [--concurrency 32]
//              [--heartbeat-interval 10] [--heartbeat-seconds 60] [--heartbeat-stream true]
//              [--server-pid PID]
//              [--postmaster-pid PID] [--pods 0] [--cdi-dir DIR] [--prepare true]
//
// The admin credential acts for every node (docs/agents.md, "The gRPC API").
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dirent.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "http_client.h"
#include "qm/agent/v1/agent.grpc.pb.h"

namespace {

namespace v1 = qm::agent::v1;
using nlohmann::json;
using qm::bench::ClientConfig;
using qm::bench::Connection;
using qm::bench::Percentile;
using Clock = std::chrono::steady_clock;

constexpr char kDriver[] = "gpu.nvidia.com";
constexpr char kNamespace[] = "fleet-bench";

struct Args {
  ClientConfig client;
  std::string grpc_addr;
  int nodes = 5000;
  int gpus = 8;
  int channels = 64;
  int concurrency = 32;
  double heartbeat_interval = 10;
  double heartbeat_seconds = 60;
  bool heartbeat_stream = true;  // the Heartbeats stream, as qm-agent; false: unary Heartbeat
  int server_pid = 0;
  int postmaster_pid = 0;
  int pods = 0;
  std::string cdi_dir = "/tmp/qm-fleet-cdi";
  bool prepare = true;
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

std::string NodeName(int i) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "fleet-%05d", i);
  return buf;
}

// utime + stime of a process, in clock ticks (0 when it is gone).
long long CpuTicks(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t close = s.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream in(s.substr(close + 2));
  std::string field;
  long long utime = 0, stime = 0;
  for (int i = 3; in >> field; ++i) {
    if (i == 14) utime = std::stoll(field);
    if (i == 15) {
      stime = std::stoll(field);
      break;
    }
  }
  return utime + stime;
}

int ParentOf(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t close = s.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream in(s.substr(close + 2));
  std::string state;
  int ppid = 0;
  in >> state >> ppid;
  return ppid;
}

// CPU ticks of the postmaster and its children (the backends, the WAL writer, ...).
long long PostgresTicks(int postmaster) {
  if (postmaster == 0) return 0;
  long long total = CpuTicks(postmaster);
  DIR* d = opendir("/proc");
  if (d == nullptr) return total;
  while (dirent* e = readdir(d)) {
    int pid = std::atoi(e->d_name);
    if (pid > 0 && ParentOf(pid) == postmaster) total += CpuTicks(pid);
  }
  closedir(d);
  return total;
}

class Fleet {
 public:
  explicit Fleet(const Args& a) : a_(a) {
    std::ifstream ca(a.client.ca_file);
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs.assign((std::istreambuf_iterator<char>(ca)),
                              std::istreambuf_iterator<char>());
    auto creds = a.client.tls ? grpc::SslCredentials(ssl) : grpc::InsecureChannelCredentials();
    for (int i = 0; i < a.channels; ++i) {
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one TCP connection per channel
      args.SetInt("qm.fleet.channel", i);
      args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
      clients_.push_back(
          v1::NodeAgent::NewStub(grpc::CreateCustomChannel(a.grpc_addr, creds, args)));
    }
  }

  v1::NodeAgent::Stub& Client(int node) { return *clients_[node % clients_.size()]; }

  // Calls wait for their channel to connect (up to the deadline) instead of failing at once when
  // a connection attempt failed, as qm-agent retries them: now and then one of the 64 channels
  // failed its first attempt, and its nodes' registrations failed with it.
  void Prepare(grpc::ClientContext& ctx) const {
    ctx.AddMetadata("authorization", "Bearer " + a_.client.token);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    ctx.set_wait_for_ready(true);
  }

  grpc::Status Register(int node) {
    v1::RegisterRequest req;
    req.set_node_name(NodeName(node));
    req.set_agent_version("fleet-load");
    (*req.mutable_labels())["nvidia.com/gpu.present"] = "true";
    (*req.mutable_labels())["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-80GB";
    (*req.mutable_labels())["nvidia.com/gpu.count"] = std::to_string(a_.gpus);
    (*req.mutable_capacity())["nvidia.com/gpu"] = std::to_string(a_.gpus);
    req.mutable_node_info()->set_operating_system("linux");
    req.mutable_node_info()->set_architecture("amd64");
    v1::RegisterResponse resp;
    grpc::ClientContext ctx;
    Prepare(ctx);
    return Client(node).Register(&ctx, req, &resp);
  }

  grpc::Status Publish(int node) {
    v1::PublishResourcesRequest req;
    req.set_node_name(NodeName(node));
    req.set_driver(kDriver);
    v1::Pool* pool = req.add_pools();
    pool->set_name(NodeName(node));
    v1::Slice* slice = pool->add_slices();
    for (int g = 0; g < a_.gpus; ++g) {
      v1::Device* d = slice->add_devices();
      d->set_name("gpu-" + std::to_string(g));
      auto& attrs = *d->mutable_attributes();
      attrs["type"].set_string_value("gpu");
      char uuid[64];
      std::snprintf(uuid, sizeof(uuid), "GPU-%08x-0000-4000-8000-%012x", node, g);
      attrs["uuid"].set_string_value(uuid);
      attrs["productName"].set_string_value("NVIDIA A100-SXM4-80GB");
      attrs["architecture"].set_string_value("Ampere");
      attrs["cudaComputeCapability"].set_version_value("8.0.0");
      attrs["driverVersion"].set_version_value("560.35.3");
      attrs["index"].set_int_value(g);
      attrs["resource.kubernetes.io/pcieRoot"].set_string_value("pci0000:00");
      (*d->mutable_capacity())["memory"].set_value("80Gi");
    }
    v1::PublishResourcesResponse resp;
    grpc::ClientContext ctx;
    Prepare(ctx);
    return Client(node).PublishResources(&ctx, req, &resp);
  }

  // One beat on the node's Heartbeats stream (opened on its first beat, which the server
  // answers; opened again after a failure), as qm-agent sends them.
  bool StreamBeat(int node) {
    BeatStream& b = *beat_streams_[node];
    std::lock_guard<std::mutex> lock(b.mu);
    v1::HeartbeatRequest req;
    req.set_node_name(NodeName(node));
    const bool opening = b.stream == nullptr;
    if (opening) {
      b.ctx = std::make_unique<grpc::ClientContext>();
      b.ctx->AddMetadata("authorization", "Bearer " + a_.client.token);
      b.stream = Client(node).Heartbeats(b.ctx.get());
    }
    v1::HeartbeatResponse resp;
    if (b.stream->Write(req) && (!opening || b.stream->Read(&resp))) return true;
    b.ctx->TryCancel();
    while (b.stream->Read(&resp)) {
    }
    grpc::Status st = b.stream->Finish();
    if (hb_failed_ < 5) std::fprintf(stderr, "heartbeat stream: %s\n", st.error_message().c_str());
    b.stream.reset();
    return false;
  }

  grpc::Status Heartbeat(int node) {
    v1::HeartbeatRequest req;
    req.set_node_name(NodeName(node));
    v1::HeartbeatResponse resp;
    grpc::ClientContext ctx;
    Prepare(ctx);
    return Client(node).Heartbeat(&ctx, req, &resp);
  }

  // Heartbeats of every node every interval, evenly spread, until Stop.
  void StartHeartbeats() {
    for (int n = static_cast<int>(beat_streams_.size()); n < a_.nodes; ++n) {
      beat_streams_.push_back(std::make_unique<BeatStream>());
    }
    hb_start_ = Clock::now();
    const auto step = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(a_.heartbeat_interval / a_.nodes));
    for (int t = 0; t < 8; ++t) {
      hb_threads_.emplace_back([this, step] {
        while (!stop_) {
          const long long k = hb_next_++;
          const auto due = hb_start_ + step * k;
          std::this_thread::sleep_until(due);
          if (stop_) return;
          const int node = static_cast<int>(k % a_.nodes);
          if (a_.heartbeat_stream ? StreamBeat(node) : Heartbeat(node).ok()) {
            ++hb_ok_;
          } else {
            ++hb_failed_;
          }
        }
      });
    }
  }
  void StopHeartbeats() {
    stop_ = true;
    for (auto& t : hb_threads_) t.join();
    for (auto& b : beat_streams_) {
      if (b->stream == nullptr) continue;
      b->stream->WritesDone();
      v1::HeartbeatResponse ignored;
      while (b->stream->Read(&ignored)) {
      }
      b->stream->Finish();
      b->stream.reset();
    }
  }

  struct BeatStream {
    std::mutex mu;
    std::unique_ptr<grpc::ClientContext> ctx;
    std::unique_ptr<grpc::ClientReaderWriter<v1::HeartbeatRequest, v1::HeartbeatResponse>> stream;
  };
  std::vector<std::unique_ptr<BeatStream>> beat_streams_;

  std::atomic<long long> hb_ok_{0}, hb_failed_{0};

  // ---- assignments ----
  struct Times {
    Clock::time_point received, cdi_written, reported;
  };

  void Enqueue(int node, v1::Assignment a, Clock::time_point received) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      work_.push_back({node, std::move(a), received});
    }
    cv_.notify_one();
  }

  void StartPreparers() {
    // One directory per node, as every node has its own /var/run/cdi: 500 simulated nodes
    // writing into one directory would contend for its lock, which no real node does.
    mkdir(a_.cdi_dir.c_str(), 0755);
    for (int n = 0; n < a_.nodes; ++n) mkdir(NodeCdiDir(n).c_str(), 0755);
    for (int t = 0; t < a_.concurrency; ++t) {
      preparers_.emplace_back([this] {
        for (;;) {
          Work w;
          {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait(lock, [&] { return !work_.empty() || stop_preparers_; });
            if (work_.empty()) return;
            w = std::move(work_.front());
            work_.pop_front();
          }
          PrepareOne(w);
        }
      });
    }
  }
  void StopPreparers() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_preparers_ = true;
    }
    cv_.notify_all();
    for (auto& t : preparers_) t.join();
  }

  std::map<std::string, Times> times() {
    std::lock_guard<std::mutex> lock(mu_);
    return times_;
  }
  std::atomic<int> report_failures_{0};

  // One node's assignment stream (gRPC's callback API: no thread per stream).
  class Feed : public grpc::ClientReadReactor<v1::WatchAssignmentsResponse> {
   public:
    Feed(Fleet* fleet, int node) : fleet_(fleet), node_(node) {
      ctx_.AddMetadata("authorization", "Bearer " + fleet->a_.client.token);
      req_.set_node_name(NodeName(node));
      req_.add_drivers(kDriver);
      fleet->Client(node).async()->WatchAssignments(&ctx_, &req_, this);
      StartRead(&msg_);
      StartCall();
    }
    void OnReadDone(bool ok) override {
      if (!ok) return;
      const auto now = Clock::now();
      for (const auto& a : msg_.prepare()) fleet_->Enqueue(node_, a, now);
      if (msg_.resource_version() > 0) ++fleet_->stream_messages_;
      StartRead(&msg_);
    }
    void OnDone(const grpc::Status& s) override {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
      status_ = s;
      cv_.notify_all();
    }
    void Cancel() { ctx_.TryCancel(); }
    void Wait() {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return done_; });
    }

   private:
    Fleet* fleet_;
    int node_;
    grpc::ClientContext ctx_;
    v1::WatchAssignmentsRequest req_;
    v1::WatchAssignmentsResponse msg_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool done_ = false;
    grpc::Status status_;
  };

  void OpenFeeds() {
    for (int n = 0; n < a_.nodes; ++n) feeds_.push_back(std::make_unique<Feed>(this, n));
  }
  void CloseFeeds() {
    for (auto& f : feeds_) f->Cancel();
    for (auto& f : feeds_) f->Wait();
  }
  std::atomic<long long> stream_messages_{0};

 private:
  struct Work {
    int node = 0;
    v1::Assignment a;
    Clock::time_point received;
  };

  std::string NodeCdiDir(int node) const { return a_.cdi_dir + "/" + NodeName(node); }

  // As qm-agent's preparer: the spec to a temporary file, fsync, rename; then the report.
  void PrepareOne(const Work& w) {
    const std::string& uid = w.a.claim().uid();
    // The spec is written as text (uids and device names are [a-z0-9-]): the driver shares the
    // cores with the server, and building it as a JSON tree cost more than the write.
    std::string spec = R"({"cdiVersion":"0.6.0","kind":"k8s.gpu.nvidia.com/claim","devices":[)";
    std::vector<std::string> ids;
    for (const auto& d : w.a.devices()) {
      if (!ids.empty()) spec += ',';
      spec += R"({"containerEdits":{"deviceNodes":[{"path":"/dev/nvidia0"}]},"name":")" + uid +
              "-" + d.device() + "\"}";
      ids.push_back("k8s.gpu.nvidia.com/claim=" + uid + "-" + d.device());
    }
    spec += "]}";
    const std::string path = NodeCdiDir(w.node) + "/k8s.gpu.nvidia.com-claim_" + uid + ".json";
    const std::string tmp = path + ".tmp";
    int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      if (write(fd, spec.data(), spec.size()) < 0) std::perror("write");
      fsync(fd);
      close(fd);
      rename(tmp.c_str(), path.c_str());
    }
    const auto written = Clock::now();
    v1::ReportPreparedRequest req;
    req.set_node_name(NodeName(w.node));
    req.set_driver(kDriver);
    *req.mutable_claim() = w.a.claim();
    req.set_allocation_id(w.a.allocation_id());
    for (int i = 0; i < w.a.devices_size(); ++i) {
      const auto& d = w.a.devices(i);
      v1::PreparedDevice* p = req.add_devices();
      p->set_request(d.request());
      p->set_pool(d.pool());
      p->set_device(d.device());
      p->set_share_id(d.share_id());
      p->add_cdi_device_ids(ids[i]);
    }
    // Every node reports on its own: the call is asynchronous, so that one node's report does
    // not hold up another node's preparation (each real agent is its own process).
    struct Call {
      grpc::ClientContext ctx;
      v1::ReportPreparedRequest req;
      v1::ReportPreparedResponse resp;
    };
    auto call = std::make_shared<Call>();
    call->req = std::move(req);
    Prepare(call->ctx);
    {
      std::lock_guard<std::mutex> lock(mu_);
      times_[uid] = {w.received, written, Clock::time_point{}};
    }
    Client(w.node).async()->ReportPrepared(
        &call->ctx, &call->req, &call->resp, [this, call, uid](grpc::Status st) {
          if (!st.ok()) {
            ++report_failures_;
            std::fprintf(stderr, "ReportPrepared %s: %s\n", uid.c_str(),
                         st.error_message().c_str());
          }
          std::lock_guard<std::mutex> lock(mu_);
          times_[uid].reported = Clock::now();
        });
  }

  const Args& a_;
  std::vector<std::unique_ptr<v1::NodeAgent::Stub>> clients_;
  std::atomic<bool> stop_{false};
  Clock::time_point hb_start_;
  std::atomic<long long> hb_next_{0};
  std::vector<std::thread> hb_threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Work> work_;
  bool stop_preparers_ = false;
  std::vector<std::thread> preparers_;
  std::map<std::string, Times> times_;
  std::vector<std::unique_ptr<Feed>> feeds_;
};

// Runs fn(i) for i in [0, count) on `threads` threads.
void ParallelFor(int threads, int count, const std::function<void(int)>& fn) {
  std::atomic<int> next{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < std::min(threads, count); ++t) {
    ts.emplace_back([&] {
      for (int i = next++; i < count; i = next++) fn(i);
    });
  }
  for (auto& t : ts) t.join();
}

void Must(int code, const std::string& body, const char* what) {
  if (code != 200 && code != 201) {
    std::fprintf(stderr, "%s: HTTP %d: %s\n", what, code, body.c_str());
    std::exit(1);
  }
}

void CreateWorkloadObjects(const Args& a) {
  Connection c(a.client);
  std::string out;
  Must(c.Request(
           "POST", "/api/v1/namespaces",
           json{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", kNamespace}}}}
               .dump(),
           &out),
       out, "namespace");
  Must(c.Request(
           "POST", "/apis/resource.k8s.io/v1/deviceclasses",
           json{{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "DeviceClass"},
                {"metadata", {{"name", "fleet-gpu"}}},
                {"spec",
                 {{"selectors",
                   {{{"cel",
                      {{"expression", std::string("device.driver == \"") + kDriver + "\""}}}}}}}}}
               .dump(),
           &out),
       out, "class");
  Must(c.Request(
           "POST",
           std::string("/apis/resource.k8s.io/v1/namespaces/") + kNamespace +
               "/resourceclaimtemplates",
           json{{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceClaimTemplate"},
                {"metadata", {{"name", "one-gpu"}}},
                {"spec",
                 {{"spec",
                   {{"devices",
                     {{"requests",
                       {{{"name", "gpu"}, {"exactly", {{"deviceClassName", "fleet-gpu"}}}}}}}}}}}}}
               .dump(),
           &out),
       out, "template");
}

std::string PodBody(int i) {
  return R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"pod-)" + std::to_string(i) +
         R"("},"spec":{"containers":[{"name":"main","image":"registry.example/app:v1",)"
         R"("resources":{"claims":[{"name":"gpu"}]}}],"resourceClaims":[{"name":"gpu",)"
         R"("resourceClaimTemplateName":"one-gpu"}]}})";
}

bool AllReady(const json& claim) {
  const json& status = claim.value("status", json::object());
  if (!status.contains("devices") || !status["devices"].is_array() || status["devices"].empty()) {
    return false;
  }
  for (const auto& d : status["devices"]) {
    bool ready = false;
    for (const auto& c : d.value("conditions", json::array())) {
      if (c.value("type", "") == "Ready") ready = c.value("status", "") == "True";
    }
    if (!ready) return false;
  }
  return true;
}

void PrintPercentiles(const char* what, std::vector<double> v) {
  if (v.empty()) {
    std::printf("%s: no samples\n", what);
    return;
  }
  std::sort(v.begin(), v.end());
  std::printf("%s: p50 %.1f ms, p99 %.1f ms, max %.1f ms (%zu claims)\n", what, Percentile(v, 0.50),
              Percentile(v, 0.99), v.back(), v.size());
}

}  // namespace

int main(int argc, char** argv) {
  // The driver's streams are synchronous: between two beats no thread of this process reads a
  // channel's socket, only gRPC's backup poller (every 5 s by default), which under load
  // answered the server's keepalive pings (every 30 s, 10 s to answer) too late: the server
  // closed the connection and all its streams ended CANCELLED. qm-agent always has a thread
  // in its WatchAssignments read, so its channel is read all the time. Read before gRPC starts.
  setenv("GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS", "500", /*overwrite=*/0);
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (ClientConfig::IsFlag(arg)) {
      a.client.Set(arg, next());
    } else if (arg == "--grpc") {
      a.grpc_addr = next();
    } else if (arg == "--nodes") {
      a.nodes = std::stoi(next());
    } else if (arg == "--gpus") {
      a.gpus = std::stoi(next());
    } else if (arg == "--channels") {
      a.channels = std::stoi(next());
    } else if (arg == "--concurrency") {
      a.concurrency = std::stoi(next());
    } else if (arg == "--heartbeat-interval") {
      a.heartbeat_interval = std::stod(next());
    } else if (arg == "--heartbeat-seconds") {
      a.heartbeat_seconds = std::stod(next());
    } else if (arg == "--heartbeat-stream") {
      a.heartbeat_stream = next() != "false";
    } else if (arg == "--server-pid") {
      a.server_pid = std::stoi(next());
    } else if (arg == "--postmaster-pid") {
      a.postmaster_pid = std::stoi(next());
    } else if (arg == "--pods") {
      a.pods = std::stoi(next());
    } else if (arg == "--cdi-dir") {
      a.cdi_dir = next();
    } else if (arg == "--prepare") {
      a.prepare = next() != "false";
    } else {
      std::fprintf(stderr, "unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  if (a.grpc_addr.empty()) {
    std::fprintf(stderr, "--grpc HOST:PORT is required\n");
    return 2;
  }
  Fleet fleet(a);
  const long hz = sysconf(_SC_CLK_TCK);

  // 1. Register and publish.
  std::atomic<int> failed{0};
  const auto t0 = Clock::now();
  ParallelFor(a.concurrency, a.nodes, [&](int n) {
    grpc::Status st;
    // As qm-agent, retry what is UNAVAILABLE (a channel whose first connection attempt failed).
    for (int attempt = 0; attempt < 5; ++attempt) {
      st = fleet.Register(n);
      if (st.ok()) st = fleet.Publish(n);
      if (st.error_code() != grpc::StatusCode::UNAVAILABLE) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200 << attempt));
    }
    if (!st.ok()) {
      if (failed++ < 5)
        std::fprintf(stderr, "%s: %s\n", NodeName(n).c_str(), st.error_message().c_str());
    }
  });
  const double join_s = Seconds(Clock::now() - t0);
  std::printf("register+publish: %d nodes x %d GPUs in %.1f s (%.0f nodes/s), %d failed\n", a.nodes,
              a.gpus, join_s, a.nodes / join_s, failed.load());
  if (failed > 0) return 1;

  // 2. Heartbeats (with the assignment streams open when pods follow, as real agents have them).
  if (a.pods > 0 && a.prepare) {
    fleet.StartPreparers();
    fleet.OpenFeeds();
  }
  fleet.StartHeartbeats();
  // Settle for one round: streams opening (or the first writes of Ready) are not steady state.
  std::this_thread::sleep_for(std::chrono::duration<double>(a.heartbeat_interval + 2));
  const long long ok0 = fleet.hb_ok_;
  const long long s0 = a.server_pid ? CpuTicks(a.server_pid) : 0;
  const long long p0 = PostgresTicks(a.postmaster_pid);
  const auto w0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(a.heartbeat_seconds));
  const double window = Seconds(Clock::now() - w0);
  const long long s1 = a.server_pid ? CpuTicks(a.server_pid) : 0;
  const long long p1 = PostgresTicks(a.postmaster_pid);
  const long long beats = fleet.hb_ok_ - ok0;
  std::printf("heartbeats (%s): %lld in %.0f s (%.0f/s; %d nodes every %.0f s), %lld failed%s\n",
              a.heartbeat_stream ? "streams" : "unary", beats, window, beats / window, a.nodes,
              a.heartbeat_interval, fleet.hb_failed_.load(),
              a.pods > 0 && a.prepare ? ", assignment streams open" : "");
  if (a.server_pid) {
    std::printf("server CPU during heartbeats: %.2f%% of one core",
                100.0 * (s1 - s0) / hz / window);
    if (a.postmaster_pid) std::printf(", PostgreSQL %.2f%%", 100.0 * (p1 - p0) / hz / window);
    std::printf("\n");
  }

  // 3. Pods: bind -> CDI written -> claim Ready.
  if (a.pods > 0) {
    CreateWorkloadObjects(a);
    std::mutex mu;
    std::map<std::string, Clock::time_point> bound, ready;  // by claim uid, seen on the watch
    std::atomic<bool> watch_done{false};
    int64_t from_rv = 0;
    {
      Connection c(a.client);
      std::string out;
      Must(c.Request("GET",
                     std::string("/apis/resource.k8s.io/v1/namespaces/") + kNamespace +
                         "/resourceclaims?limit=1",
                     "", &out),
           out, "list");
      from_rv = std::stoll(json::parse(out)["metadata"]["resourceVersion"].get<std::string>());
    }
    // The watch's lines are timestamped as they arrive, by a thread that does nothing else, and
    // parsed on another: a parse that falls behind then delays no timestamp.
    std::mutex lines_mu;
    std::condition_variable lines_cv;
    std::deque<std::pair<Clock::time_point, std::string>> lines;
    bool lines_end = false;
    Connection* reading = nullptr;  // under lines_mu, while the reader reads
    std::thread reader([&] {
      ClientConfig cfg = a.client;
      cfg.throw_on_io_error = true;  // Shutdown below ends it
      Connection c(cfg);
      {
        std::lock_guard<std::mutex> lock(lines_mu);
        reading = &c;
      }
      c.StartStream(std::string("/apis/resource.k8s.io/v1/namespaces/") + kNamespace +
                    "/resourceclaims?watch=true&resourceVersion=" + std::to_string(from_rv) +
                    "&timeoutSeconds=600");
      std::string chunk, pending;
      while (true) {
        try {
          if (watch_done || !c.NextChunk(&chunk)) break;
        } catch (const qm::bench::ConnectionLost&) {
          break;
        }
        const auto now = Clock::now();
        pending += chunk;
        size_t start = 0;
        size_t nl;
        std::lock_guard<std::mutex> lock(lines_mu);
        while ((nl = pending.find('\n', start)) != std::string::npos) {
          const std::string_view line(pending.data() + start, nl - start);
          start = nl + 1;
          // A claim that is neither allocated nor prepared tells nothing: not parsed.
          if (line.find(R"("allocation":)") == std::string_view::npos) continue;
          lines.emplace_back(now, std::string(line));
        }
        pending.erase(0, start);
        lines_cv.notify_one();
      }
      std::lock_guard<std::mutex> lock(lines_mu);
      reading = nullptr;
      lines_end = true;
      lines_cv.notify_one();
    });
    std::thread watch([&] {
      std::unique_lock<std::mutex> lock(lines_mu);
      while (true) {
        lines_cv.wait(lock, [&] { return lines_end || !lines.empty(); });
        if (lines.empty()) break;
        auto [now, line] = std::move(lines.front());
        lines.pop_front();
        lock.unlock();
        json ev = json::parse(line, nullptr, false);
        lock.lock();
        if (!ev.is_object() || !ev.contains("object")) continue;
        const json& claim = ev["object"];
        const std::string uid = claim["metadata"].value("uid", "");
        const json status = claim.value("status", json::object());
        std::lock_guard<std::mutex> times_lock(mu);
        if (status.contains("allocation")) bound.try_emplace(uid, now);
        if (AllReady(claim)) ready.try_emplace(uid, now);
        const size_t want = static_cast<size_t>(a.pods);
        if (bound.size() >= want && (!a.prepare || ready.size() >= want)) {
          watch_done = true;
          if (reading != nullptr) reading->Shutdown();
          break;
        }
      }
    });
    const auto c0 = Clock::now();
    ParallelFor(64, a.pods, [&](int i) {
      thread_local std::unique_ptr<Connection> c;
      if (!c) c = std::make_unique<Connection>(a.client);
      std::string out;
      Must(c->Request("POST", std::string("/api/v1/namespaces/") + kNamespace + "/pods", PodBody(i),
                      &out),
           out, "pod");
    });
    watch.join();
    reader.join();
    Clock::time_point last_bound = c0;
    for (const auto& [uid, t] : bound) last_bound = std::max(last_bound, t);
    std::printf("pods: %d created and bound in %.1f s: %.0f pods/s (agents %s)\n", a.pods,
                Seconds(last_bound - c0), a.pods / Seconds(last_bound - c0),
                a.prepare ? "preparing" : "idle");
    if (a.prepare) {
      // Let the last reports land before reading the agents' times.
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      auto times = fleet.times();
      std::vector<double> to_assigned, to_cdi, to_acked, to_ready;
      for (const auto& [uid, b] : bound) {
        auto t = times.find(uid);
        if (t != times.end()) {
          to_assigned.push_back(Ms(t->second.received - b));
          to_cdi.push_back(Ms(t->second.cdi_written - b));
          if (t->second.reported != Clock::time_point{})
            to_acked.push_back(Ms(t->second.reported - b));
        }
        auto r = ready.find(uid);
        if (r != ready.end()) to_ready.push_back(Ms(r->second - b));
      }
      PrintPercentiles("bind -> assignment at the agent", to_assigned);
      PrintPercentiles("bind -> CDI spec written", to_cdi);
      PrintPercentiles("bind -> ReportPrepared answered", to_acked);
      PrintPercentiles("bind -> claim Ready (seen on a watch)", to_ready);
      std::printf("ReportPrepared failures: %d\n", fleet.report_failures_.load());
      fleet.CloseFeeds();
      fleet.StopPreparers();
    }
  }
  fleet.StopHeartbeats();
  return 0;
}
