// The load and the checker of the fault tests (tests/faults/*.sh): clients that write while the
// server or its database is killed, a journal of what the server acknowledged, and a check of
// the stored state against that journal and against itself.
//
//   fault_load setup  CONN --nodes N --devices D
//       namespace `faults`, device class `fault-gpu`, N nodes with one slice of D devices each
//       (existing objects are kept, so it can run again).
//   fault_load load   CONN --journal FILE --prefix P [--seconds S] [--concurrency C]
//       C clients create ResourceClaims (one device of fault-gpu) and pods that use them, and
//       delete some of their earlier pairs, until S seconds pass or the server goes away. Each
//       write is journalled as acknowledged (2xx, with the uid), refused (4xx) or unknown (no
//       answer: the server died while it was in flight).
//   fault_load verify CONN --database-url URL [--settle S] JOURNAL...
//       Checks, after a restart: every acknowledged create is there with its uid unless its
//       delete was acknowledged; every acknowledged delete is gone; nothing exists that was
//       never written; every pod is decided (bound, or Unschedulable) within S seconds (30);
//       no device is allocated to two claims; a bound pod's claims are allocated and reserved
//       for it; the device ledger (device_allocations) equals the claims' allocations.
//       Prints one line of counts and exits 1 when any check failed.
//
// CONN is --url https://HOST:PORT --token-file F --ca-file F (bench/http_client.h).

#include <pqxx/pqxx>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
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

// One write; journals its outcome. False when the server is gone (the client stops).
bool Write(Connection& c, Journal& j, const std::string& op, const std::string& kind,
           const std::string& name, const std::string& method, const std::string& path,
           const std::string& body, bool* acked) {
  std::string out;
  *acked = false;
  int code;
  try {
    code = c.Request(method, path, body, &out);
  } catch (const ConnectionLost&) {
    j.Add("unknown", op, kind, name, "");
    return false;
  }
  if (code >= 200 && code < 300) {
    json r = json::parse(out, nullptr, false);
    std::string uid = r.is_object() && r.contains("metadata") && r["metadata"].contains("uid")
                          ? r["metadata"]["uid"].get<std::string>()
                          : "";
    if (op == "delete" && r.is_object() && r.value("kind", "") == "Status") {
      uid = r.contains("details") ? r["details"].value("uid", "") : "";
    }
    j.Add("ack", op, kind, name, uid);
    *acked = true;
    return true;
  }
  if (code >= 500) {  // the server is going away (or failed): not acknowledged
    j.Add("unknown", op, kind, name, "");
    return code != 503;
  }
  j.Add("refused", op, kind, name, std::to_string(code));
  return true;
}

int Load(const Args& a) {
  Journal journal(Need(a, "--journal"));
  const std::string prefix = Need(a, "--prefix");
  const int seconds = Flag(a, "--seconds", 10), clients = Flag(a, "--concurrency", 8);
  ClientConfig cfg = a.conn;
  cfg.throw_on_io_error = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::atomic<int> next{0}, writes{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t * 7919 + seconds));
      std::vector<int> mine;  // pairs whose claim and pod were both acknowledged
      try {
        Connection c(cfg);
        while (std::chrono::steady_clock::now() < deadline) {
          const int i = next++;
          const std::string claim = prefix + "-c-" + std::to_string(i);
          const std::string pod = prefix + "-p-" + std::to_string(i);
          json cb = {{"apiVersion", "resource.k8s.io/v1"},
                     {"kind", "ResourceClaim"},
                     {"metadata", {{"name", claim}, {"namespace", kNamespace}}},
                     {"spec",
                      {{"devices",
                        {{"requests",
                          {{{"name", "gpu"}, {"exactly", {{"deviceClassName", kClass}}}}}}}}}}};
          bool acked = false;
          ++writes;
          if (!Write(c, journal, "create", "claim", claim, "POST", kClaims, cb.dump(), &acked)) {
            return;
          }
          if (!acked) continue;
          json pb = {{"apiVersion", "v1"},
                     {"kind", "Pod"},
                     {"metadata", {{"name", pod}, {"namespace", kNamespace}}},
                     {"spec",
                      {{"containers", {{{"name", "c"}, {"image", "busybox"}}}},
                       {"resourceClaims", {{{"name", "gpu"}, {"resourceClaimName", claim}}}}}}};
          ++writes;
          if (!Write(c, journal, "create", "pod", pod, "POST", kPods, pb.dump(), &acked)) return;
          if (acked) mine.push_back(i);
          // Delete an earlier pair now and then, so devices are released and reused.
          if (mine.size() > 2 && rng() % 3 == 0) {
            const size_t k = rng() % (mine.size() - 1);
            const std::string n = std::to_string(mine[k]);
            mine.erase(mine.begin() + static_cast<long>(k));
            ++writes;
            if (!Write(c, journal, "delete", "pod", prefix + "-p-" + n, "DELETE",
                       kPods + "/" + prefix + "-p-" + n, "", &acked)) {
              return;
            }
            ++writes;
            if (!Write(c, journal, "delete", "claim", prefix + "-c-" + n, "DELETE",
                       kClaims + "/" + prefix + "-c-" + n, "", &acked)) {
              return;
            }
          }
        }
      } catch (const ConnectionLost&) {
        // The connection itself failed: nothing was in flight.
      }
    });
  }
  for (auto& th : threads) th.join();
  std::printf("load: %d writes attempted\n", writes.load());
  return 0;
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
  // Devices: never two claims on one device; the ledger says exactly what the claims say.
  std::map<Device, std::string> holder;
  std::set<std::tuple<std::string, std::string, std::string, std::string>> from_claims;
  std::map<std::string, json> claim_by_name;
  for (const auto& o : claims["items"]) {
    claim_by_name[o["metadata"]["name"]] = o;
    const json alloc = o.value("status", json::object()).value("allocation", json());
    if (!alloc.is_object()) continue;
    for (const auto& r : alloc["devices"].value("results", json::array())) {
      Device d{r["driver"], r["pool"], r["device"]};
      const std::string name = o["metadata"]["name"];
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
  std::printf(
      "verify: acknowledged=%d claims=%zu pods=%zu allocated_devices=%zu lost=%d resurrected=%d "
      "phantom=%d undecided=%d doubles=%d unreserved=%d ledger_mismatch=%d\n",
      acked, claims["items"].size(), pods["items"].size(), holder.size(), lost, resurrected,
      phantom, undecided, doubles, unreserved, ledger_mismatch);
  return lost + resurrected + phantom + undecided + doubles + unreserved + ledger_mismatch == 0 ? 0
                                                                                                : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) Die("usage: fault_load setup|load|verify [flags] (see the file's header)");
  const std::string mode = argv[1];
  Args a = Parse(argc, argv);
  if (mode == "setup") return Setup(a);
  if (mode == "load") return Load(a);
  if (mode == "verify") return Verify(a);
  Die("unknown mode " + mode);
}
