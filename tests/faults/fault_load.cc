// The load and the checker of the fault tests (tests/faults/*.sh): clients that write while the
// server or its database is killed, a journal of what the server acknowledged, and a check of
// the stored state against that journal and against itself.
//
//   fault_load setup  CONN --nodes N --devices D
//       namespace `faults`, device class `fault-gpu`, N nodes with one slice of D devices each
//       (existing objects are kept, so it can run again).
//   fault_load setup  ... --mixed 1
//       also, per node, two consumable-capacity devices (allowMultipleAllocations, memory 80Gi;
//       class `fault-shared`) and a partitionable GPU: a counter set (memory 80Gi, 7 slices) and
//       11 partitions over it (7 x 1g/10Gi, 3 x 3g/40Gi, 1 x 7g/80Gi; class `fault-part`).
//   fault_load setup  ... --probe-devices N
//       also device class `fault-probe` and node `fault-probe-node` with N devices of its own,
//       for `probe` (the load's class never selects them).
//   fault_load load   CONN --journal FILE --prefix P [--seconds S] [--concurrency C]
//                     [--keep-going 1] [--mixed 1] [--pods N]
//       C clients create ResourceClaims (one device of fault-gpu) and pods that use them, and
//       delete some of their earlier pairs, until S seconds pass or the server goes away. Each
//       write is journalled as acknowledged (2xx, with the uid), refused (4xx) or unknown (no
//       answer, or a 5xx: the server died, or its database went away, while it was in flight).
//       With --keep-going 1 the clients carry on through 5xx answers and lost connections
//       (the server stays up while its database is away) until S seconds pass. With --mixed 1
//       a third of the claims ask for a whole fault-gpu device, a third for a share of 10, 20
//       or 30Gi of a fault-shared device, a third for a fault-part partition. --pods N stops
//       once N pods were acknowledged. Prints the count of each status code, lost connections
//       and the slowest answer.
//   fault_load probe  CONN --journal FILE --prefix P [--timeout S]
//       Creates a claim of `fault-probe` and a pod using it (new names after each 5xx or lost
//       connection) and waits until the pod is bound. Prints the milliseconds to the first
//       acknowledged write and to the binding; exits 1 after S seconds (30) without them.
//   fault_load watch  CONN --database-url URL --stop-file F [--drop-one 1]
//       Watches claims and pods in `faults` from a list, as a client-go reflector does: it
//       resumes from the last resourceVersion when the stream ends, lists again after 410
//       Gone. Once F exists it lists again and checks that the state it built from the events
//       equals that list, and that every change in the change log (SQL) since the watch began
//       was delivered in order, except those a 410 and relist replaced. Prints one line per
//       resource; exits 1 on a mismatch. --drop-one ignores one event: the check must fail.
//   fault_load verify CONN --database-url URL [--settle S] JOURNAL...
//       Checks, after a restart: every acknowledged create is there with its uid unless its
//       delete was acknowledged; every acknowledged delete is gone; nothing exists that was
//       never written; every pod is decided (bound, or Unschedulable) within S seconds (30);
//       no device is allocated to two claims; a bound pod's claims are allocated and reserved
//       for it; the device ledger (device_allocations) equals the claims' allocations; the
//       shares of a consumable-capacity device never consume more than its capacity, and the
//       allocated partitions never more than their counter set (limits read from the slices;
//       --control-divide-limits K divides them by K, the negative control that must fail).
//       Prints one line of counts and exits 1 when any check failed.
//
// CONN is --url https://HOST:PORT --token-file F --ca-file F (bench/http_client.h).

#include <pqxx/pqxx>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "../../bench/http_client.h"

namespace {

using nlohmann::json;
using qm::bench::ClientConfig;
using qm::bench::Connection;
using qm::bench::ConnectionLost;
using qm::bench::Die;

constexpr char kNamespace[] = "faults";
constexpr char kClass[] = "fault-gpu";
constexpr char kDriver[] = "faults.example.com";
constexpr char kProbeClass[] = "fault-probe";
constexpr char kProbeDriver[] = "probe.faults.example.com";
constexpr char kProbeNode[] = "fault-probe-node";
constexpr char kSharedClass[] = "fault-shared";
constexpr char kSharedDriver[] = "shared.faults.example.com";
constexpr char kPartClass[] = "fault-part";
constexpr char kPartDriver[] = "part.faults.example.com";
const std::string kClaims = "/apis/resource.k8s.io/v1/namespaces/faults/resourceclaims";
const std::string kPods = "/api/v1/namespaces/faults/pods";

struct Args {
  ClientConfig conn;
  std::map<std::string, std::string> flags;
  std::vector<std::string> positional;
};

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 2; i < argc; ++i) {
    std::string f = argv[i];
    if (f.rfind("--", 0) == 0) {
      if (i + 1 >= argc) Die("missing value for " + f);
      if (ClientConfig::IsFlag(f)) {
        a.conn.Set(f, argv[++i]);
      } else {
        a.flags[f] = argv[++i];
      }
    } else {
      a.positional.push_back(f);
    }
  }
  return a;
}

int Flag(const Args& a, const std::string& name, int def) {
  auto it = a.flags.find(name);
  return it == a.flags.end() ? def : std::stoi(it->second);
}

std::string Need(const Args& a, const std::string& name) {
  auto it = a.flags.find(name);
  if (it == a.flags.end()) Die("missing " + name);
  return it->second;
}

// --- setup ------------------------------------------------------------------------------------

void Create(Connection& c, const std::string& path, const json& obj) {
  std::string out;
  int code = c.Request("POST", path, obj.dump(), &out);
  if (code != 201 && code != 409) Die("POST " + path + ": " + std::to_string(code) + " " + out);
}

json ClassBody(const std::string& name, const std::string& driver) {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "DeviceClass"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"selectors", {{{"cel", {{"expression", "device.driver == '" + driver + "'"}}}}}}}}};
}

json SliceBody(const std::string& name, const std::string& driver, const std::string& node,
               int slices_in_pool, const std::string& key, const json& items) {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"driver", driver},
            {"nodeName", node},
            {"pool", {{"name", node}, {"generation", 1}, {"resourceSliceCount", slices_in_pool}}},
            {key, items}}}};
}

// Consumable-capacity and partitionable devices next to each node's whole devices.
void SetupMixed(Connection& c, int nodes) {
  Create(c, "/apis/resource.k8s.io/v1/deviceclasses", ClassBody(kSharedClass, kSharedDriver));
  Create(c, "/apis/resource.k8s.io/v1/deviceclasses", ClassBody(kPartClass, kPartDriver));
  const std::string slices = "/apis/resource.k8s.io/v1/resourceslices";
  for (int n = 0; n < nodes; ++n) {
    const std::string node = "fault-node-" + std::to_string(n);
    json shared = json::array();
    for (int d = 0; d < 2; ++d) {
      shared.push_back({{"name", "share-" + std::to_string(d)},
                        {"allowMultipleAllocations", true},
                        {"capacity", {{"memory", {{"value", "80Gi"}}}}}});
    }
    Create(c, slices, SliceBody(node + "-shared", kSharedDriver, node, 1, "devices", shared));
    json counter_set = {{"name", "gpu-0-cs"}};
    counter_set["counters"] = {{"memory", {{"value", "80Gi"}}}, {"slices", {{"value", "7"}}}};
    Create(c, slices,
           SliceBody(node + "-counters", kPartDriver, node, 2, "sharedCounters",
                     json::array({counter_set})));
    json parts = json::array();
    auto add = [&](const std::string& profile, int count, const char* memory, const char* slots) {
      for (int i = 0; i < count; ++i) {
        json counters = {{"memory", {{"value", memory}}}, {"slices", {{"value", slots}}}};
        json consumption = {{"counterSet", "gpu-0-cs"}, {"counters", counters}};
        json device = {{"name", profile + "-" + std::to_string(i)}};
        device["consumesCounters"] = json::array({consumption});
        parts.push_back(device);
      }
    };
    add("1g", 7, "10Gi", "1");
    add("3g", 3, "40Gi", "3");
    add("7g", 1, "80Gi", "7");
    Create(c, slices, SliceBody(node + "-partitions", kPartDriver, node, 2, "devices", parts));
  }
}

int Setup(const Args& a) {
  Connection c(a.conn);
  const int nodes = Flag(a, "--nodes", 8), devices = Flag(a, "--devices", 4);
  Create(c, "/api/v1/namespaces",
         {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", kNamespace}}}});
  Create(c, "/apis/resource.k8s.io/v1/deviceclasses",
         {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "DeviceClass"},
          {"metadata", {{"name", kClass}}},
          {"spec",
           {{"selectors",
             {{{"cel", {{"expression", std::string("device.driver == '") + kDriver + "'"}}}}}}}}});
  for (int n = 0; n < nodes; ++n) {
    const std::string node = "fault-node-" + std::to_string(n);
    Create(c, "/api/v1/nodes",
           {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", node}}}});
    json devs = json::array();
    for (int d = 0; d < devices; ++d) devs.push_back({{"name", "gpu-" + std::to_string(d)}});
    Create(c, "/apis/resource.k8s.io/v1/resourceslices",
           {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceSlice"},
            {"metadata", {{"name", node}}},
            {"spec",
             {{"driver", kDriver},
              {"nodeName", node},
              {"pool", {{"name", node}, {"generation", 1}, {"resourceSliceCount", 1}}},
              {"devices", devs}}}});
  }
  if (Flag(a, "--mixed", 0) != 0) SetupMixed(c, nodes);
  if (const int probe = Flag(a, "--probe-devices", 0); probe > 0) {
    Create(c, "/apis/resource.k8s.io/v1/deviceclasses",
           {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "DeviceClass"},
            {"metadata", {{"name", kProbeClass}}},
            {"spec",
             {{"selectors",
               {{{"cel",
                  {{"expression", std::string("device.driver == '") + kProbeDriver + "'"}}}}}}}}});
    Create(c, "/api/v1/nodes",
           {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", kProbeNode}}}});
    json devs = json::array();
    for (int d = 0; d < probe; ++d) devs.push_back({{"name", "probe-" + std::to_string(d)}});
    Create(c, "/apis/resource.k8s.io/v1/resourceslices",
           {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceSlice"},
            {"metadata", {{"name", kProbeNode}}},
            {"spec",
             {{"driver", kProbeDriver},
              {"nodeName", kProbeNode},
              {"pool", {{"name", kProbeNode}, {"generation", 1}, {"resourceSliceCount", 1}}},
              {"devices", devs}}}});
  }
  std::printf("setup: %d nodes x %d devices\n", nodes, devices);
  return 0;
}

// --- load -------------------------------------------------------------------------------------

class Journal {
 public:
  explicit Journal(const std::string& path) : f_(std::fopen(path.c_str(), "w")) {
    if (f_ == nullptr) Die("cannot write " + path);
  }
  ~Journal() { std::fclose(f_); }
  // outcome: ack | refused | unknown; op: create | delete; kind: claim | pod.
  void Add(const std::string& outcome, const std::string& op, const std::string& kind,
           const std::string& name, const std::string& uid) {
    std::lock_guard<std::mutex> lock(mu_);
    std::fprintf(f_, "%s %s %s %s %s\n", outcome.c_str(), op.c_str(), kind.c_str(), name.c_str(),
                 uid.empty() ? "-" : uid.c_str());
    std::fflush(f_);
  }

 private:
  std::mutex mu_;
  std::FILE* f_;
};

// What the clients saw, for the summary line: answers by status code, lost connections and the
// slowest answer (a request that hangs while the database is away shows here).
class Tally {
 public:
  void Answer(int code, std::chrono::steady_clock::duration took) {
    std::lock_guard<std::mutex> lock(mu_);
    ++codes_[code];
    Slowest(took);
  }
  void Lost(std::chrono::steady_clock::duration took) {
    std::lock_guard<std::mutex> lock(mu_);
    ++lost_;
    Slowest(took);
  }
  std::string Summary() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out = "codes";
    for (const auto& [code, n] : codes_)
      out += " " + std::to_string(code) + "=" + std::to_string(n);
    return out + ", lost connections " + std::to_string(lost_) + ", slowest answer " +
           std::to_string(slowest_ms_) + " ms";
  }

 private:
  void Slowest(std::chrono::steady_clock::duration took) {
    slowest_ms_ = std::max<int64_t>(
        slowest_ms_, std::chrono::duration_cast<std::chrono::milliseconds>(took).count());
  }
  std::mutex mu_;
  std::map<int, int> codes_;
  int lost_ = 0;
  int64_t slowest_ms_ = 0;
};

// How a write went, for the client that made it.
enum class Outcome { kAcked, kRefused, kFailed, kConnectionLost };

// One write; journals its outcome (and the uid of what it acknowledged in *uid).
Outcome Write(Connection& c, Journal& j, Tally& tally, const std::string& op,
              const std::string& kind, const std::string& name, const std::string& method,
              const std::string& path, const std::string& body, std::string* uid = nullptr) {
  std::string out;
  int code;
  const auto started = std::chrono::steady_clock::now();
  try {
    code = c.Request(method, path, body, &out);
  } catch (const ConnectionLost&) {
    tally.Lost(std::chrono::steady_clock::now() - started);
    j.Add("unknown", op, kind, name, "");
    return Outcome::kConnectionLost;
  }
  tally.Answer(code, std::chrono::steady_clock::now() - started);
  if (code >= 200 && code < 300) {
    json r = json::parse(out, nullptr, false);
    std::string id = r.is_object() && r.contains("metadata") && r["metadata"].contains("uid")
                         ? r["metadata"]["uid"].get<std::string>()
                         : "";
    if (op == "delete" && r.is_object() && r.value("kind", "") == "Status") {
      id = r.contains("details") ? r["details"].value("uid", "") : "";
    }
    j.Add("ack", op, kind, name, id);
    if (uid != nullptr) *uid = id;
    return Outcome::kAcked;
  }
  if (code >= 500) {  // the server is going away, or its database is: not acknowledged
    j.Add("unknown", op, kind, name, "");
    return Outcome::kFailed;
  }
  j.Add("refused", op, kind, name, std::to_string(code));
  return Outcome::kRefused;
}

json ClaimBody(const std::string& name, const char* device_class, const char* memory = nullptr) {
  json exactly = {{"deviceClassName", device_class}};
  if (memory != nullptr) exactly["capacity"] = {{"requests", {{"memory", memory}}}};
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", {{"name", name}, {"namespace", kNamespace}}},
          {"spec", {{"devices", {{"requests", {{{"name", "gpu"}, {"exactly", exactly}}}}}}}}};
}

json PodBody(const std::string& name, const std::string& claim) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", kNamespace}}},
          {"spec",
           {{"containers", {{{"name", "c"}, {"image", "busybox"}}}},
            {"resourceClaims", {{{"name", "gpu"}, {"resourceClaimName", claim}}}}}}};
}

int Load(const Args& a) {
  Journal journal(Need(a, "--journal"));
  const std::string prefix = Need(a, "--prefix");
  const int seconds = Flag(a, "--seconds", 10), clients = Flag(a, "--concurrency", 8);
  const bool keep_going = Flag(a, "--keep-going", 0) != 0;
  const bool mixed = Flag(a, "--mixed", 0) != 0;
  const int pods_wanted = Flag(a, "--pods", 0);
  std::atomic<int> pods_acked{0};
  ClientConfig cfg = a.conn;
  cfg.throw_on_io_error = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::atomic<int> next{0}, writes{0}, acked_writes{0};
  Tally tally;
  std::vector<std::thread> threads;
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t * 7919 + seconds));
      std::vector<int> mine;  // pairs whose claim and pod were both acknowledged
      std::unique_ptr<Connection> c;
      // (Re)connects; without --keep-going a server that is gone ends the client.
      auto connect = [&]() -> bool {
        c.reset();
        while (std::chrono::steady_clock::now() < deadline) {
          try {
            c = std::make_unique<Connection>(cfg);
            return true;
          } catch (const ConnectionLost&) {
            if (!keep_going) return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
          }
        }
        return false;
      };
      // One write; nullopt when the client stops, else whether it was acknowledged.
      auto write = [&](const std::string& op, const std::string& kind, const std::string& name,
                       const std::string& method, const std::string& path,
                       const std::string& body) -> std::optional<bool> {
        ++writes;
        switch (Write(*c, journal, tally, op, kind, name, method, path, body)) {
          case Outcome::kAcked:
            ++acked_writes;
            return true;
          case Outcome::kRefused:
            return false;
          case Outcome::kFailed:
            if (!keep_going) return std::nullopt;
            // The database is away: pause a little instead of spinning on 503s.
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            return false;
          case Outcome::kConnectionLost:
            if (!connect()) return std::nullopt;
            return false;
        }
        return std::nullopt;
      };
      if (!connect()) return;
      while (std::chrono::steady_clock::now() < deadline &&
             (pods_wanted == 0 || pods_acked.load() < pods_wanted)) {
        const int i = next++;
        const std::string claim = prefix + "-c-" + std::to_string(i);
        const std::string pod = prefix + "-p-" + std::to_string(i);
        json claim_body = ClaimBody(claim, kClass);
        if (mixed) {
          static constexpr const char* kShares[] = {"10Gi", "20Gi", "30Gi"};
          switch (rng() % 3) {
            case 1:
              claim_body = ClaimBody(claim, kSharedClass, kShares[rng() % 3]);
              break;
            case 2:
              claim_body = ClaimBody(claim, kPartClass);
              break;
            default:
              break;
          }
        }
        auto acked = write("create", "claim", claim, "POST", kClaims, claim_body.dump());
        if (!acked) return;
        if (!*acked) continue;
        acked = write("create", "pod", pod, "POST", kPods, PodBody(pod, claim).dump());
        if (!acked) return;
        if (*acked) {
          mine.push_back(i);
          ++pods_acked;
        }
        // Delete an earlier pair now and then, so devices are released and reused.
        if (mine.size() > 2 && rng() % 3 == 0) {
          const size_t k = rng() % (mine.size() - 1);
          const std::string n = std::to_string(mine[k]);
          mine.erase(mine.begin() + static_cast<long>(k));
          if (!write("delete", "pod", prefix + "-p-" + n, "DELETE",
                     kPods + "/" + prefix + "-p-" + n, "")) {
            return;
          }
          if (!write("delete", "claim", prefix + "-c-" + n, "DELETE",
                     kClaims + "/" + prefix + "-c-" + n, "")) {
            return;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  std::printf("load: %d writes attempted, %d acknowledged, %d pods acknowledged; %s\n",
              writes.load(), acked_writes.load(), pods_acked.load(), tally.Summary().c_str());
  return 0;
}

// --- probe ------------------------------------------------------------------------------------

int64_t MillisSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               t0)
      .count();
}

int Probe(const Args& a) {
  Journal journal(Need(a, "--journal"));
  const std::string prefix = Need(a, "--prefix");
  const auto t0 = std::chrono::steady_clock::now();
  const auto deadline = t0 + std::chrono::seconds(Flag(a, "--timeout", 30));
  ClientConfig cfg = a.conn;
  cfg.throw_on_io_error = true;
  Tally tally;
  std::unique_ptr<Connection> c;
  int64_t acked_ms = -1;
  for (int attempt = 0; std::chrono::steady_clock::now() < deadline; ++attempt) {
    try {
      if (c == nullptr) c = std::make_unique<Connection>(cfg);
    } catch (const ConnectionLost&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    // New names for every attempt: a write without an answer may have happened.
    const std::string claim = prefix + "-c-" + std::to_string(attempt);
    const std::string pod = prefix + "-p-" + std::to_string(attempt);
    Outcome o = Write(*c, journal, tally, "create", "claim", claim, "POST", kClaims,
                      ClaimBody(claim, kProbeClass).dump());
    if (o == Outcome::kAcked) {
      if (acked_ms < 0) acked_ms = MillisSince(t0);
      o = Write(*c, journal, tally, "create", "pod", pod, "POST", kPods,
                PodBody(pod, claim).dump());
    }
    if (o == Outcome::kConnectionLost) c.reset();
    if (o != Outcome::kAcked) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    while (std::chrono::steady_clock::now() < deadline) {
      std::string out;
      int code = 0;
      try {
        code = c->Request("GET", kPods + "/" + pod, "", &out);
      } catch (const ConnectionLost&) {
        c = std::make_unique<Connection>(cfg);
        continue;
      }
      if (code == 200 && !json::parse(out)["spec"].value("nodeName", "").empty()) {
        std::printf(
            "probe: first write acknowledged after %lld ms, pod bound after %lld ms (%d "
            "attempts)\n",
            static_cast<long long>(acked_ms), static_cast<long long>(MillisSince(t0)), attempt + 1);
        return 0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  std::printf(
      "probe: FAILED: no pod bound within the timeout (first write acknowledged after "
      "%lld ms); %s\n",
      static_cast<long long>(acked_ms), tally.Summary().c_str());
  return 1;
}

// --- verify -----------------------------------------------------------------------------------

// What the journal says about one object.
struct Expect {
  enum State { kPresent, kAbsent, kEither } state = kAbsent;
  std::string uid;  // kPresent: exactly this; kEither: "" (a create in flight) or the old uid
};

using Device = std::tuple<std::string, std::string, std::string>;  // driver, pool, device

json List(Connection& c, const std::string& path) {
  std::string out;
  int code = c.Request("GET", path, "", &out);
  if (code != 200) Die("GET " + path + ": " + std::to_string(code) + " " + out);
  return json::parse(out);
}

// The amount of a quantity the setup writes or the allocator reports ("80Gi", "7", "512Mi"),
// in units (bytes for memory). Whole numbers with a binary or decimal suffix only.
int64_t Amount(const std::string& q) {
  size_t end = 0;
  while (end < q.size() && std::isdigit(static_cast<unsigned char>(q[end]))) ++end;
  if (end == 0) Die("unexpected quantity " + q);
  const int64_t n = std::stoll(q.substr(0, end));
  static const std::map<std::string, int64_t> kScale = {
      {"", 1},           {"k", 1000},       {"M", 1000000},    {"G", 1000000000},
      {"Ki", 1LL << 10}, {"Mi", 1LL << 20}, {"Gi", 1LL << 30}, {"Ti", 1LL << 40}};
  auto it = kScale.find(q.substr(end));
  if (it == kScale.end()) Die("unexpected quantity " + q);
  return n * it->second;
}

// What the slices say a device may give: consumable capacities (allowMultipleAllocations) and
// the counters it consumes; and the counter sets' values.
struct Limits {
  std::map<Device, std::map<std::string, int64_t>> capacity;  // multi-allocatable devices only
  // device -> [(counter set, counter, amount)]
  std::map<Device, std::vector<std::tuple<std::string, std::string, int64_t>>> consumes;
  // (driver, pool, counter set, counter) -> value
  std::map<std::tuple<std::string, std::string, std::string, std::string>, int64_t> counters;
};

Limits ReadLimits(const json& slices, int64_t divide) {
  Limits l;
  for (const auto& s : slices["items"]) {
    const json& spec = s["spec"];
    const std::string driver = spec["driver"], pool = spec["pool"]["name"];
    for (const auto& set : spec.value("sharedCounters", json::array())) {
      for (const auto& [name, c] : set["counters"].items()) {
        l.counters[{driver, pool, set["name"], name}] = Amount(c["value"]) / divide;
      }
    }
    for (const auto& d : spec.value("devices", json::array())) {
      const Device dev{driver, pool, d["name"]};
      if (d.value("allowMultipleAllocations", false)) {
        const json capacity = d.value("capacity", json::object());
        for (const auto& [name, c] : capacity.items()) {
          l.capacity[dev][name] = Amount(c["value"]) / divide;
        }
      }
      for (const auto& cc : d.value("consumesCounters", json::array())) {
        for (const auto& [name, c] : cc["counters"].items()) {
          l.consumes[dev].emplace_back(cc["counterSet"], name, Amount(c["value"]));
        }
      }
    }
  }
  return l;
}

bool Decided(const json& pod) {
  if (!pod["spec"].value("nodeName", "").empty()) return true;
  for (const auto& c : pod.value("status", json::object()).value("conditions", json::array())) {
    if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False") return true;
  }
  return false;
}

int Verify(const Args& a) {
  std::map<std::pair<std::string, std::string>, Expect> expect;  // (kind, name)
  int acked = 0;
  for (const auto& path : a.positional) {
    std::ifstream in(path);
    if (!in) Die("cannot read journal " + path);
    std::string outcome, op, kind, name, uid;
    while (in >> outcome >> op >> kind >> name >> uid) {
      Expect& e = expect[{kind, name}];
      if (outcome == "ack") {
        ++acked;
        e = op == "create" ? Expect{Expect::kPresent, uid} : Expect{Expect::kAbsent, ""};
      } else if (outcome == "unknown") {
        e.state = Expect::kEither;  // e.uid keeps the uid it had, if any
      }                             // refused: nothing changed
    }
  }
  Connection c(a.conn);
  const int settle = Flag(a, "--settle", 30);
  int lost = 0, resurrected = 0, phantom = 0, undecided = 0, doubles = 0, unreserved = 0,
      ledger_mismatch = 0;
  json claims, pods;
  // Pods are decided by the scheduler after the restart: wait for it, up to `settle` seconds.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(settle);
  for (;;) {
    claims = List(c, kClaims);
    pods = List(c, kPods);
    undecided = 0;
    for (const auto& p : pods["items"]) {
      undecided += Decided(p) || p["metadata"].contains("deletionTimestamp") ? 0 : 1;
    }
    if (undecided == 0 || std::chrono::steady_clock::now() > until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::map<std::pair<std::string, std::string>, std::string> stored;  // -> uid
  std::set<std::pair<std::string, std::string>> terminating;  // deletion acknowledged, finishing
  for (const char* kind : {"claim", "pod"}) {
    for (const auto& o : (std::string(kind) == "claim" ? claims : pods)["items"]) {
      std::pair<std::string, std::string> key{kind, o["metadata"]["name"]};
      stored[key] = o["metadata"]["uid"];
      if (o["metadata"].contains("deletionTimestamp")) terminating.insert(key);
    }
  }
  for (const auto& [key, e] : expect) {
    auto it = stored.find(key);
    const std::string what = key.first + " " + key.second;
    if (e.state == Expect::kPresent && (it == stored.end() || it->second != e.uid)) {
      std::printf("LOST: acknowledged %s (uid %s) is %s\n", what.c_str(), e.uid.c_str(),
                  it == stored.end() ? "missing" : ("uid " + it->second).c_str());
      ++lost;
    } else if (e.state == Expect::kAbsent && it != stored.end() && !terminating.count(key)) {
      std::printf("RESURRECTED: %s was deleted (acknowledged) but exists\n", what.c_str());
      ++resurrected;
    } else if (e.state == Expect::kEither && it != stored.end() && !e.uid.empty() &&
               it->second != e.uid) {
      std::printf("CHANGED: %s has uid %s, journal %s\n", what.c_str(), it->second.c_str(),
                  e.uid.c_str());
      ++lost;
    }
  }
  for (const auto& [key, uid] : stored) {
    if (!expect.count(key)) {
      std::printf("PHANTOM: %s %s was never written\n", key.first.c_str(), key.second.c_str());
      ++phantom;
    }
  }
  // Devices: never two claims on one device (a multi-allocatable device: never two on one
  // share), never more consumed than a capacity or a counter set holds; the ledger says
  // exactly what the claims say.
  const Limits limits = ReadLimits(List(c, "/apis/resource.k8s.io/v1/resourceslices"),
                                   Flag(a, "--control-divide-limits", 1));
  std::map<std::pair<Device, std::string>, int64_t> capacity_used;  // (device, capacity)
  std::map<std::tuple<std::string, std::string, std::string, std::string>, int64_t> counters_used;
  int overcommits = 0;
  std::map<Device, std::string> holder;
  std::set<std::pair<Device, std::string>> shares;  // (device, shareID) of multi-allocatable
  std::set<std::tuple<std::string, std::string, std::string, std::string>> from_claims;
  std::map<std::string, json> claim_by_name;
  for (const auto& o : claims["items"]) {
    claim_by_name[o["metadata"]["name"]] = o;
    const json alloc = o.value("status", json::object()).value("allocation", json());
    if (!alloc.is_object()) continue;
    for (const auto& r : alloc["devices"].value("results", json::array())) {
      Device d{r["driver"], r["pool"], r["device"]};
      const std::string name = o["metadata"]["name"];
      if (auto cap = limits.capacity.find(d); cap != limits.capacity.end()) {
        if (!shares.emplace(d, r.value("shareID", "")).second) {
          std::printf("DOUBLE: share %s of device %s/%s/%s handed out twice\n",
                      r.value("shareID", "").c_str(), std::get<0>(d).c_str(),
                      std::get<1>(d).c_str(), std::get<2>(d).c_str());
          ++doubles;
        }
        // A share without consumedCapacity for a capacity consumes all of it (dra-api.md).
        for (const auto& [cap_name, value] : cap->second) {
          const json consumed = r.value("consumedCapacity", json::object());
          capacity_used[{d, cap_name}] +=
              consumed.contains(cap_name) ? Amount(consumed[cap_name]) : value;
        }
        from_claims.emplace(std::get<0>(d), std::get<1>(d), std::get<2>(d),
                            o["metadata"]["uid"].get<std::string>());
        continue;
      }
      if (auto used = limits.consumes.find(d); used != limits.consumes.end()) {
        for (const auto& [set, counter, amount] : used->second) {
          counters_used[{std::get<0>(d), std::get<1>(d), set, counter}] += amount;
        }
      }
      if (auto [it, fresh] = holder.emplace(d, name); !fresh) {
        std::printf("DOUBLE: device %s/%s/%s held by %s and %s\n", std::get<0>(d).c_str(),
                    std::get<1>(d).c_str(), std::get<2>(d).c_str(), it->second.c_str(),
                    name.c_str());
        ++doubles;
      }
      from_claims.emplace(std::get<0>(d), std::get<1>(d), std::get<2>(d),
                          o["metadata"]["uid"].get<std::string>());
    }
  }
  for (const auto& [key, used] : capacity_used) {
    const int64_t limit = limits.capacity.at(key.first).at(key.second);
    if (used > limit) {
      std::printf("OVERCOMMIT: device %s/%s/%s: %lld of capacity %s %lld consumed\n",
                  std::get<0>(key.first).c_str(), std::get<1>(key.first).c_str(),
                  std::get<2>(key.first).c_str(), static_cast<long long>(used), key.second.c_str(),
                  static_cast<long long>(limit));
      ++overcommits;
    }
  }
  for (const auto& [key, used] : counters_used) {
    auto limit = limits.counters.find(key);
    if (limit == limits.counters.end() || used > limit->second) {
      std::printf("OVERCOMMIT: counter set %s/%s/%s: %lld of counter %s %lld consumed\n",
                  std::get<0>(key).c_str(), std::get<1>(key).c_str(), std::get<2>(key).c_str(),
                  static_cast<long long>(used), std::get<3>(key).c_str(),
                  static_cast<long long>(limit == limits.counters.end() ? 0 : limit->second));
      ++overcommits;
    }
  }
  for (const auto& p : pods["items"]) {
    if (p["spec"].value("nodeName", "").empty()) continue;
    for (const auto& rc : p["spec"].value("resourceClaims", json::array())) {
      auto it = claim_by_name.find(rc.value("resourceClaimName", ""));
      bool ok = it != claim_by_name.end();
      if (ok) {
        const json st = it->second.value("status", json::object());
        ok = st.contains("allocation");
        bool reserved = false;
        for (const auto& r : st.value("reservedFor", json::array())) {
          reserved = reserved || r.value("uid", "") == p["metadata"]["uid"];
        }
        ok = ok && reserved;
      }
      if (!ok) {
        std::printf("UNRESERVED: bound pod %s: claim %s is not allocated and reserved for it\n",
                    p["metadata"]["name"].get<std::string>().c_str(),
                    rc.value("resourceClaimName", "").c_str());
        ++unreserved;
      }
    }
  }
  std::set<std::tuple<std::string, std::string, std::string, std::string>> ledger;
  try {
    pqxx::connection db(Need(a, "--database-url"));
    pqxx::nontransaction tx(db);
    for (const auto& row :
         tx.exec("SELECT driver, pool, device, claim_uid FROM device_allocations")) {
      ledger.emplace(row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<std::string>(),
                     row[3].as<std::string>());
    }
  } catch (const std::exception& e) {
    Die(std::string("reading the ledger: ") + e.what());
  }
  for (const auto& row : ledger) {
    if (!from_claims.count(row)) {
      std::printf("LEDGER: row %s/%s/%s for claim uid %s has no claim allocation\n",
                  std::get<0>(row).c_str(), std::get<1>(row).c_str(), std::get<2>(row).c_str(),
                  std::get<3>(row).c_str());
      ++ledger_mismatch;
    }
  }
  for (const auto& row : from_claims) {
    if (!ledger.count(row)) {
      std::printf("LEDGER: claim uid %s holds %s/%s/%s without a ledger row\n",
                  std::get<3>(row).c_str(), std::get<0>(row).c_str(), std::get<1>(row).c_str(),
                  std::get<2>(row).c_str());
      ++ledger_mismatch;
    }
  }
  if (undecided > 0) std::printf("UNDECIDED: %d pods after %d s\n", undecided, settle);
  int bound = 0;
  for (const auto& p : pods["items"]) bound += p["spec"].value("nodeName", "").empty() ? 0 : 1;
  std::printf(
      "verify: acknowledged=%d claims=%zu pods=%zu bound=%d allocated_devices=%zu lost=%d "
      "resurrected=%d phantom=%d undecided=%d doubles=%d overcommits=%d unreserved=%d "
      "ledger_mismatch=%d\n",
      acked, claims["items"].size(), pods["items"].size(), bound, holder.size() + shares.size(),
      lost, resurrected, phantom, undecided, doubles, overcommits, unreserved, ledger_mismatch);
  return lost + resurrected + phantom + undecided + doubles + overcommits + unreserved +
                     ledger_mismatch ==
                 0
             ? 0
             : 1;
}

// --- watch ----------------------------------------------------------------------------------

// What one watch client saw, in order: its lists and the changes delivered after them.
struct Seen {
  struct Change {
    int64_t rv;
    std::string type, name, uid;
  };
  struct Snapshot {
    int64_t rv;
    std::map<std::string, std::pair<std::string, int64_t>> items;  // name -> uid, rv
    size_t changes_before;  // changes.size() when the list was taken
  };
  std::mutex mu;
  std::vector<Change> changes;
  std::vector<Snapshot> lists;
  // (after, through]: changes a 410 made the client skip, replaced by the list that followed.
  std::vector<std::pair<int64_t, int64_t>> skipped;
  int64_t progress = 0;  // everything up to here has been delivered (changes and bookmarks)
  int relists = 0, resumes = 0, errors = 0, out_of_order = 0;
};

int64_t RvOf(const json& obj) {
  return std::stoll(obj["metadata"].value("resourceVersion", std::string("0")));
}

// Follows `path` for ever, as a reflector does: list, watch from the list's resourceVersion,
// resume from the last one seen when the stream ends or fails, list again after 410 Gone.
// `drop_at` > 0 ignores that change (the negative control).
void Follow(const ClientConfig& cfg, const std::string& path, Seen& seen, int drop_at) {
  int64_t rv = 0;
  bool need_list = true;
  int delivered = 0;
  for (;;) {
    try {
      Connection c(cfg);
      if (need_list) {
        std::string out;
        if (c.Request("GET", path, "", &out) != 200) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          continue;
        }
        const json list = json::parse(out);
        Seen::Snapshot snap{RvOf(list), {}, 0};
        for (const auto& o : list["items"]) {
          snap.items[o["metadata"]["name"]] = {o["metadata"]["uid"], RvOf(o)};
        }
        std::lock_guard<std::mutex> lock(seen.mu);
        if (rv > 0) seen.skipped.emplace_back(rv, snap.rv);
        snap.changes_before = seen.changes.size();
        seen.progress = std::max(seen.progress, snap.rv);
        rv = snap.rv;
        seen.lists.push_back(std::move(snap));
        need_list = false;
      }
      if (c.StartStream(path + "?watch=true&allowWatchBookmarks=true&resourceVersion=" +
                        std::to_string(rv)) != 200) {
        std::lock_guard<std::mutex> lock(seen.mu);
        ++seen.errors;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      std::string chunk, buf;
      bool ended = false;
      while (!ended && c.NextChunk(&chunk)) {
        buf += chunk;
        for (size_t eol; !ended && (eol = buf.find('\n')) != std::string::npos;) {
          const json ev = json::parse(buf.substr(0, eol));
          buf.erase(0, eol + 1);
          const std::string type = ev["type"];
          std::lock_guard<std::mutex> lock(seen.mu);
          if (type == "ERROR") {
            ended = true;
            if (ev["object"].value("code", 0) == 410) {
              ++seen.relists;
              need_list = true;
            } else {
              ++seen.errors;
            }
            continue;
          }
          const int64_t at = RvOf(ev["object"]);
          if (type == "BOOKMARK") {
            seen.progress = std::max(seen.progress, at);
            rv = std::max(rv, at);
            continue;
          }
          if (at <= rv) ++seen.out_of_order;
          rv = at;
          seen.progress = std::max(seen.progress, at);
          if (++delivered == drop_at) continue;
          seen.changes.push_back(
              {at, type, ev["object"]["metadata"]["name"], ev["object"]["metadata"]["uid"]});
        }
      }
      std::lock_guard<std::mutex> lock(seen.mu);
      if (!need_list) ++seen.resumes;
    } catch (const ConnectionLost&) {
      {
        std::lock_guard<std::mutex> lock(seen.mu);
        ++seen.resumes;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

// The check once the faults are over: the state built from the changes equals a list, and
// every change the change log holds was delivered (unless a 410 and a list replaced it).
int CheckWatch(const ClientConfig& cfg, const std::string& db_url, const std::string& path,
               const std::string& resource, const std::string& label, Seen& seen) {
  json list;
  int64_t at = 0;
  for (int tries = 0;; ++tries) {
    Connection c(cfg);
    list = List(c, path);
    at = RvOf(list);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < until) {
      {
        std::lock_guard<std::mutex> lock(seen.mu);
        if (seen.progress >= at) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::lock_guard<std::mutex> lock(seen.mu);
    if (seen.progress < at) {
      std::printf("WATCH %s: nothing delivered up to the list's resourceVersion %lld\n",
                  label.c_str(), static_cast<long long>(at));
      return 1;
    }
    if (seen.lists.back().rv <= at) break;
    if (tries == 3) Die("the watch client keeps listing");  // relisted after our list: again
  }
  std::lock_guard<std::mutex> lock(seen.mu);
  int mismatch = 0, missing = 0, unexpected = 0;
  // The state at `at`, from the last list before it and the changes after that list.
  const Seen::Snapshot& snap = seen.lists.back();
  auto state = snap.items;
  std::set<int64_t> delivered;
  for (size_t i = 0; i < seen.changes.size(); ++i) {
    const Seen::Change& ch = seen.changes[i];
    delivered.insert(ch.rv);
    if (i < snap.changes_before || ch.rv > at) continue;
    if (ch.type == "DELETED") {
      state.erase(ch.name);
    } else {
      state[ch.name] = {ch.uid, ch.rv};
    }
  }
  std::map<std::string, std::pair<std::string, int64_t>> listed;
  for (const auto& o : list["items"])
    listed[o["metadata"]["name"]] = {o["metadata"]["uid"], RvOf(o)};
  for (const auto& [name, v] : listed) {
    auto it = state.find(name);
    if (it == state.end() || it->second != v) {
      std::printf(
          "WATCH %s: %s is uid %s rv %lld in the list, %s in the watch's state\n", label.c_str(),
          name.c_str(), v.first.c_str(), static_cast<long long>(v.second),
          it == state.end() ? "missing" : ("rv " + std::to_string(it->second.second)).c_str());
      ++mismatch;
    }
  }
  for (const auto& [name, v] : state) {
    if (!listed.count(name)) {
      std::printf("WATCH %s: %s (rv %lld) is in the watch's state but not in the list\n",
                  label.c_str(), name.c_str(), static_cast<long long>(v.second));
      ++mismatch;
    }
  }
  // Every change since the first list, from the change log itself.
  const int64_t from = seen.lists.front().rv;
  int64_t compacted = 0, logged = 0;
  try {
    pqxx::connection db(db_url);
    pqxx::nontransaction tx(db);
    compacted = tx.exec1("SELECT compacted_through FROM store_state")[0].as<int64_t>();
    std::set<int64_t> in_log;
    for (const auto& row : tx.exec_params(
             "SELECT rv, name FROM change_log WHERE resource = $1 AND namespace = $2 AND rv > $3 "
             "AND rv <= $4 ORDER BY rv",
             resource, kNamespace, std::max(from, compacted), at)) {
      const int64_t rv = row[0].as<int64_t>();
      ++logged;
      in_log.insert(rv);
      bool replaced = false;
      for (const auto& [after, through] : seen.skipped) replaced |= rv > after && rv <= through;
      if (!replaced && !delivered.count(rv)) {
        std::printf("WATCH %s: the change at rv %lld (%s) was never delivered\n", label.c_str(),
                    static_cast<long long>(rv), row[1].c_str());
        ++missing;
      }
    }
    for (const Seen::Change& ch : seen.changes) {
      if (ch.rv > std::max(from, compacted) && ch.rv <= at && !in_log.count(ch.rv)) {
        std::printf("WATCH %s: delivered a change at rv %lld (%s) the change log does not hold\n",
                    label.c_str(), static_cast<long long>(ch.rv), ch.name.c_str());
        ++unexpected;
      }
    }
  } catch (const std::exception& e) {
    Die(std::string("reading the change log: ") + e.what());
  }
  std::printf(
      "watch %s: changes=%zu (change log %lld since rv %lld) lists=%zu relists_after_410=%d "
      "resumes=%d errors=%d out_of_order=%d missing=%d unexpected=%d state_mismatch=%d "
      "(%zu objects at rv %lld)\n",
      label.c_str(), seen.changes.size(), static_cast<long long>(logged),
      static_cast<long long>(from), seen.lists.size(), seen.relists, seen.resumes, seen.errors,
      seen.out_of_order, missing, unexpected, mismatch, listed.size(), static_cast<long long>(at));
  return seen.out_of_order + missing + unexpected + mismatch == 0 ? 0 : 1;
}

int Watch(const Args& a) {
  ClientConfig cfg = a.conn;
  cfg.throw_on_io_error = true;
  const std::string stop = Need(a, "--stop-file"), db_url = Need(a, "--database-url");
  const int drop = Flag(a, "--drop-one", 0) != 0 ? 5 : 0;
  struct Watched {
    std::string path, resource, label;
    Seen seen;
  };
  Watched watched[2] = {{kClaims, "resourceclaims.resource.k8s.io", "claims", {}},
                        {kPods, "pods", "pods", {}}};
  for (auto& w : watched) {
    std::thread([&cfg, &w, drop] { Follow(cfg, w.path, w.seen, drop); }).detach();
  }
  std::printf("watch: started\n");
  std::fflush(stdout);
  while (!std::ifstream(stop)) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  int failed = 0;
  for (auto& w : watched) failed |= CheckWatch(cfg, db_url, w.path, w.resource, w.label, w.seen);
  std::fflush(stdout);
  std::_Exit(failed);  // the followers are still reading their streams
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) Die("usage: fault_load setup|load|verify [flags] (see the file's header)");
  const std::string mode = argv[1];
  Args a = Parse(argc, argv);
  if (mode == "setup") return Setup(a);
  if (mode == "load") return Load(a);
  if (mode == "verify") return Verify(a);
  if (mode == "probe") return Probe(a);
  if (mode == "watch") return Watch(a);
  Die("unknown mode " + mode);
}
