// Property test of the allocator: random small inventories and claims. Every allocation is
// re-checked by an independent validator written against the model (selectors compiled and
// evaluated directly, counts, constraints, counters, capacity, taints, no device used twice),
// and every "does not fit" is confirmed by enumerating all assignments with the same validator.

#include <map>
#include <random>
#include <set>
#include <sstream>

#include "allocator/allocator.h"
#include "cel/compiler.h"
#include "cel/dra_env.h"
#include "gtest/gtest.h"

namespace qm::allocator {
namespace {

constexpr const char* kDriver = "d.example.com";

Quantity Q(int64_t units) { return Quantity::FromInt(units); }

struct World {
  std::vector<model::ResourceSlice> slices;
  std::vector<model::DeviceClass> classes;
  std::vector<AllocatedDevice> allocated;
  std::vector<model::ResourceClaim> claims;
};

World RandomWorld(std::mt19937& rng) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  World w;
  const int pools = 1 + pick(2);
  int device_number = 0;
  for (int p = 0; p < pools; ++p) {
    model::ResourceSlice s;
    s.name = "slice-" + std::to_string(p);
    s.driver = kDriver;
    s.pool = "pool-" + std::to_string(p);
    s.node_name = "n1";
    const bool counters = pick(3) == 0;
    if (counters) {
      // Partitionable: a counter-only slice and a device slice in the same pool.
      s.resource_slice_count = 2;
      model::ResourceSlice cs = s;
      cs.name = s.name + "-counters";
      cs.shared_counters.push_back(model::CounterSet{"cs", {{"c", Q(2 + pick(3))}}});
      w.slices.push_back(cs);
    }
    const int devices = 1 + pick(3);
    for (int d = 0; d < devices; ++d) {
      model::Device dev;
      dev.name = "dev-" + std::to_string(device_number++);
      dev.attributes["numa"] = static_cast<int64_t>(pick(3));
      dev.attributes["model"] = std::string(pick(2) == 0 ? "a" : "b");
      if (pick(3) == 0) {
        std::vector<int64_t> links;
        for (int i = 0; i < 1 + pick(2); ++i) links.push_back(pick(3));
        dev.attributes[std::string(kDriver) + "/links"] = links;
      }
      dev.capacity["mem"] = model::DeviceCapacity{Q(2 + pick(3)), nullptr};
      if (pick(5) == 0) dev.taints.push_back(model::DeviceTaint{"k", "v", "NoSchedule", ""});
      if (pick(6) == 0) dev.taints.push_back(model::DeviceTaint{"info", "", "None", ""});
      if (counters) dev.consumes_counters.push_back({"cs", {{"c", Q(1 + pick(2))}}});
      if (pick(6) == 0) dev.allow_multiple_allocations = true;
      if (pick(5) == 0) {
        AllocatedDevice a{kDriver, s.pool, dev.name, "", {}, false};
        if (dev.allow_multiple_allocations) {
          a.share_id = "00000000-0000-4000-8000-0000000000ff";
          a.consumed_capacity["mem"] = Q(1);
        }
        w.allocated.push_back(a);
      }
      s.devices.push_back(std::move(dev));
    }
    w.slices.push_back(std::move(s));
  }
  w.classes.push_back(model::DeviceClass{"any", {}, {}, ""});
  w.classes.push_back(model::DeviceClass{
      "model-a", {"device.attributes[\"d.example.com\"].model == \"a\""}, {}, ""});

  auto random_request = [&]() {
    model::ExactDeviceRequest r;
    r.device_class_name = pick(2) == 0 ? "any" : "model-a";
    r.count = 1 + pick(2);
    if (pick(8) == 0) {
      r.allocation_mode = "All";
      r.count = 0;
    }
    if (pick(3) == 0) r.selectors.push_back("device.attributes[\"d.example.com\"].numa >= 1");
    if (pick(3) == 0) r.tolerations.push_back(model::DeviceToleration{"k", "Exists", "", "", {}});
    if (pick(4) == 0) r.capacity_requests["mem"] = Q(1 + pick(2));
    return r;
  };
  const int claims = 1 + pick(2);
  for (int c = 0; c < claims; ++c) {
    model::ResourceClaim claim;
    claim.namespace_ = "default";
    claim.name = "claim-" + std::to_string(c);
    const int requests = 1 + pick(2);
    for (int r = 0; r < requests; ++r) {
      model::DeviceRequest req;
      req.name = "r" + std::to_string(r);
      if (pick(4) == 0) {
        req.first_available.push_back(model::DeviceSubRequest{"s0", random_request()});
        req.first_available.push_back(model::DeviceSubRequest{"s1", random_request()});
      } else {
        req.exactly = random_request();
      }
      claim.spec.requests.push_back(std::move(req));
    }
    int constraint = pick(5);
    if (constraint == 1) claim.spec.constraints.push_back({{}, "d.example.com/numa", ""});
    if (constraint == 2) claim.spec.constraints.push_back({{}, "", "d.example.com/numa"});
    if (constraint == 3) claim.spec.constraints.push_back({{}, "d.example.com/links", ""});
    if (constraint == 4) claim.spec.constraints.push_back({{"r0"}, "", "d.example.com/model"});
    w.claims.push_back(std::move(claim));
  }
  return w;
}

// --- The independent validator ----------------------------------------------------------------

struct DeviceRef {
  const model::ResourceSlice* slice;
  const model::Device* device;
};

struct Checker {
  const World& w;
  std::map<std::string, DeviceRef> devices;  // "pool/device"
  std::map<std::string, std::shared_ptr<const cel::Ast>> programs;
  std::vector<std::vector<std::pair<std::string, std::string>>> solution;

  explicit Checker(const World& world) : w(world) {
    for (const auto& s : w.slices) {
      for (const auto& d : s.devices) devices[s.pool + "/" + d.name] = DeviceRef{&s, &d};
    }
  }

  bool Matches(const std::string& expr, const DeviceRef& ref) {
    auto& program = programs[expr];
    if (!program) {
      auto compiled = cel::CompileSelector(expr);
      EXPECT_NE(compiled.ast, nullptr) << compiled.error;
      program = compiled.ast;
    }
    cel::DeviceInput in;
    in.driver = ref.slice->driver;
    for (const auto& [k, v] : ref.device->attributes) {
      if (const auto* i = std::get_if<int64_t>(&v)) in.attributes[k] = *i;
      if (const auto* s = std::get_if<std::string>(&v)) in.attributes[k] = *s;
      if (const auto* l = std::get_if<std::vector<int64_t>>(&v)) in.attributes[k] = *l;
    }
    for (const auto& [k, c] : ref.device->capacity) in.capacity[k] = c.value;
    in.allow_multiple_allocations = ref.device->allow_multiple_allocations;
    auto m = cel::Matches(*program, in);
    return m.ok() && *m;
  }

  const model::ExactDeviceRequest* FindRequest(const model::ResourceClaim& claim,
                                               const std::string& name) {
    for (const auto& r : claim.spec.requests) {
      if (r.exactly && r.name == name) return &*r.exactly;
      for (const auto& s : r.first_available) {
        if (r.name + "/" + s.name == name) return &s.request;
      }
    }
    return nullptr;
  }

  bool Selected(const model::ExactDeviceRequest& req, const DeviceRef& ref) {
    for (const auto& c : w.classes) {
      if (c.name != req.device_class_name) continue;
      for (const auto& e : c.selectors) {
        if (!Matches(e, ref)) return false;
      }
    }
    for (const auto& e : req.selectors) {
      if (!Matches(e, ref)) return false;
    }
    for (const auto& [name, amount] : req.capacity_requests) {
      auto it = ref.device->capacity.find(name);
      if (it == ref.device->capacity.end() || it->second.value < amount) return false;
    }
    return true;
  }

  // All leaves out shared devices whose capacity already in use leaves too little for it.
  bool SharedFits(const model::ExactDeviceRequest& req, const std::string& key,
                  const DeviceRef& ref) {
    if (!ref.device->allow_multiple_allocations) return true;
    for (const auto& [cap, value] : ref.device->capacity) {
      auto it = req.capacity_requests.find(cap);
      Quantity used = it != req.capacity_requests.end() ? it->second : value.value;
      for (const auto& a : w.allocated) {
        if (a.pool + "/" + a.device != key || a.share_id.empty()) continue;
        auto c = a.consumed_capacity.find(cap);
        if (c != a.consumed_capacity.end()) used = used + c->second;
      }
      if (used > value.value) return false;
    }
    return true;
  }

  static std::set<std::string> AsSet(const model::AttributeValue* v) {
    std::set<std::string> out;
    if (v == nullptr) return out;
    if (const auto* i = std::get_if<int64_t>(v)) out.insert("i" + std::to_string(*i));
    if (const auto* s = std::get_if<std::string>(v)) out.insert("s" + *s);
    if (const auto* l = std::get_if<std::vector<int64_t>>(v)) {
      for (auto i : *l) out.insert("i" + std::to_string(i));
    }
    return out;
  }

  static const model::AttributeValue* Attr(const DeviceRef& ref, const std::string& qualified) {
    auto it = ref.device->attributes.find(qualified);
    if (it != ref.device->attributes.end()) return &it->second;
    it = ref.device->attributes.find(qualified.substr(qualified.find('/') + 1));
    return it != ref.device->attributes.end() ? &it->second : nullptr;
  }

  // "" when `results` (one list per claim: request name and pool/device) is a valid allocation.
  std::string Validate(
      const std::vector<std::vector<std::pair<std::string, std::string>>>& results) {
    std::set<std::string> exclusive_in_state;
    std::map<std::string, Quantity> shared_used;  // pool/device/capacity
    std::set<std::string> shared_devices_in_use;
    for (const auto& a : w.allocated) {
      std::string key = a.pool + "/" + a.device;
      if (a.share_id.empty()) {
        exclusive_in_state.insert(key);
      } else {
        shared_devices_in_use.insert(key);
        for (const auto& [c, q] : a.consumed_capacity)
          shared_used[key + "/" + c] = shared_used[key + "/" + c] + q;
      }
    }
    std::set<std::string> taken;
    std::map<std::string, int> share_count;
    for (size_t c = 0; c < results.size(); ++c) {
      const auto& claim = w.claims[c];
      std::map<std::string, int> per_top;
      std::map<std::string, std::string> chosen_alt;  // top -> full name
      std::set<std::string> in_claim;
      for (const auto& [request, key] : results[c]) {
        auto dev = devices.find(key);
        if (dev == devices.end()) return "unknown device " + key;
        const auto* req = FindRequest(claim, request);
        if (req == nullptr) return "unknown request " + request;
        std::string top = request.substr(0, request.find('/'));
        if (chosen_alt.contains(top) && chosen_alt[top] != request)
          return "two subrequests of " + top;
        chosen_alt[top] = request;
        ++per_top[top];
        if (!Selected(*req, dev->second)) return key + " does not match " + request;
        for (const auto& t : dev->second.device->taints) {
          if (t.effect != "NoSchedule" && t.effect != "NoExecute") continue;
          bool ok = false;
          for (const auto& tol : req->tolerations) ok = ok || model::Tolerates(tol, t);
          if (!ok) return key + " is tainted";
        }
        if (exclusive_in_state.contains(key)) return key + " is already allocated";
        if (dev->second.device->allow_multiple_allocations) {
          if (in_claim.contains(request + "@" + key)) return key + " twice for " + request;
          in_claim.insert(request + "@" + key);
          if (taken.contains(key)) return key + " is also given exclusively";
          ++share_count[key];
          for (const auto& [cap, value] : dev->second.device->capacity) {
            auto it = req->capacity_requests.find(cap);
            Quantity amount = it != req->capacity_requests.end() ? it->second : value.value;
            auto& used = shared_used[key + "/" + cap.str()];
            used = used + amount;
            if (used > value.value) return key + " over capacity " + cap.str();
          }
        } else {
          if (!taken.insert(key).second || share_count.contains(key)) return key + " used twice";
        }
      }
      for (const auto& r : claim.spec.requests) {
        if (!chosen_alt.contains(r.name)) return "request " + r.name + " has no devices";
        const auto* req = FindRequest(claim, chosen_alt[r.name]);
        if (req->allocation_mode == "All") {
          int matching = 0;
          for (const auto& [key, ref] : devices) {
            if (Selected(*req, ref) && SharedFits(*req, key, ref)) ++matching;
          }
          if (per_top[r.name] != matching || matching == 0) return "All of " + r.name + " not all";
        } else if (per_top[r.name] != req->count) {
          return "wrong count for " + r.name;
        }
      }
      for (const auto& con : claim.spec.constraints) {
        std::vector<std::set<std::string>> sets;
        for (const auto& [request, key] : results[c]) {
          std::string top = request.substr(0, request.find('/'));
          if (!con.requests.empty() &&
              std::find(con.requests.begin(), con.requests.end(), top) == con.requests.end()) {
            continue;
          }
          auto set = AsSet(Attr(devices[key], con.match_attribute.empty() ? con.distinct_attribute
                                                                          : con.match_attribute));
          if (set.empty()) return key + " lacks the constrained attribute";
          sets.push_back(set);
        }
        if (!con.match_attribute.empty() && !sets.empty()) {
          std::set<std::string> common = sets[0];
          for (const auto& s : sets) {
            std::set<std::string> next;
            std::set_intersection(common.begin(), common.end(), s.begin(), s.end(),
                                  std::inserter(next, next.begin()));
            common = next;
          }
          if (common.empty()) return "matchAttribute violated";
        }
        if (!con.distinct_attribute.empty()) {
          for (size_t i = 0; i < sets.size(); ++i) {
            for (size_t j = i + 1; j < sets.size(); ++j) {
              for (const auto& v : sets[i]) {
                if (sets[j].contains(v)) return "distinctAttribute violated";
              }
            }
          }
        }
      }
    }
    // Shared counters: allocated (a shared device once) plus new.
    // Only counters the new allocation draws on are checked (the random world may start
    // overcommitted).
    std::map<std::string, Quantity> counter_used;
    std::set<std::string> counted;
    std::set<std::string> touched;
    auto consume = [&](const std::string& key, bool is_new) {
      if (!counted.insert(key).second) return;
      const auto& ref = devices[key];
      for (const auto& cc : ref.device->consumes_counters) {
        for (const auto& [name, q] : cc.counters) {
          std::string id = ref.slice->pool + "/" + cc.counter_set + "/" + name;
          counter_used[id] = counter_used[id] + q;
          if (is_new) touched.insert(id);
        }
      }
    };
    for (const auto& a : w.allocated) consume(a.pool + "/" + a.device, false);
    for (const auto& claim_results : results) {
      for (const auto& [_, key] : claim_results) consume(key, true);
    }
    for (const auto& s : w.slices) {
      for (const auto& set : s.shared_counters) {
        for (const auto& [name, value] : set.counters) {
          const std::string id = s.pool + "/" + set.name + "/" + name;
          auto it = counter_used.find(id);
          if (touched.contains(id) && it->second > value) return "counter " + name + " exceeded";
        }
      }
    }
    return "";
  }

  // Enumerates every assignment (combinations per request, subrequests, shared devices reused
  // across requests) and returns true when one validates.
  bool AnySolution() {
    std::vector<std::string> keys;
    for (const auto& [k, _] : devices) keys.push_back(k);
    std::vector<std::vector<std::pair<std::string, std::string>>> results(w.claims.size());
    // Flatten (claim, request) slots.
    std::vector<std::pair<size_t, size_t>> slots;
    for (size_t c = 0; c < w.claims.size(); ++c) {
      for (size_t r = 0; r < w.claims[c].spec.requests.size(); ++r) slots.emplace_back(c, r);
    }
    std::function<bool(size_t)> rec = [&](size_t slot) -> bool {
      if (slot == slots.size()) {
        if (!Validate(results).empty()) return false;
        solution = results;
        return true;
      }
      auto [c, r] = slots[slot];
      const auto& request = w.claims[c].spec.requests[r];
      std::vector<std::pair<std::string, const model::ExactDeviceRequest*>> alts;
      if (request.exactly) alts.emplace_back(request.name, &*request.exactly);
      for (const auto& s : request.first_available) {
        alts.emplace_back(request.name + "/" + s.name, &s.request);
      }
      for (const auto& [name, req] : alts) {
        int64_t count = req->count;
        if (req->allocation_mode == "All") {
          count = 0;
          for (const auto& k : keys) {
            count += Selected(*req, devices[k]) && SharedFits(*req, k, devices[k]) ? 1 : 0;
          }
          if (count == 0) continue;
        }
        std::vector<size_t> idx;
        std::function<bool(size_t)> choose = [&](size_t from) -> bool {
          if (static_cast<int64_t>(idx.size()) == count) return rec(slot + 1);
          for (size_t i = from; i < keys.size(); ++i) {
            idx.push_back(i);
            results[c].emplace_back(name, keys[i]);
            bool ok = choose(i + 1);
            results[c].pop_back();
            idx.pop_back();
            if (ok) return true;
          }
          return false;
        };
        if (choose(0)) return true;
      }
      return false;
    };
    return rec(0);
  }
};

std::string Describe(const World& w,
                     const std::vector<std::vector<std::pair<std::string, std::string>>>& sol) {
  std::ostringstream out;
  for (const auto& s : w.slices) {
    out << "slice " << s.name << " pool " << s.pool << " count " << s.resource_slice_count;
    for (const auto& cs : s.shared_counters) {
      for (const auto& [n, q] : cs.counters)
        out << " counter " << cs.name << "/" << n << "=" << q.String();
    }
    out << "\n";
    for (const auto& d : s.devices) {
      out << "  " << d.name << " numa=" << std::get<int64_t>(d.attributes.at("numa"))
          << " model=" << std::get<std::string>(d.attributes.at("model"))
          << " mem=" << d.capacity.at("mem").value.String()
          << (d.allow_multiple_allocations ? " shared" : "") << " taints=" << d.taints.size();
      if (d.attributes.contains("d.example.com/links")) {
        out << " links=";
        for (auto l : std::get<std::vector<int64_t>>(d.attributes.at("d.example.com/links")))
          out << l << ",";
      }
      for (const auto& cc : d.consumes_counters) {
        for (const auto& [n, q] : cc.counters) out << " consumes " << n << "=" << q.String();
      }
      out << "\n";
    }
  }
  for (const auto& a : w.allocated)
    out << "allocated " << a.pool << "/" << a.device << " " << a.share_id << "\n";
  for (const auto& c : w.claims) {
    out << "claim " << c.name << "\n";
    auto req = [&](const std::string& name, const model::ExactDeviceRequest& r) {
      out << "  " << name << " class=" << r.device_class_name << " mode=" << r.allocation_mode
          << " count=" << r.count << " selectors=" << r.selectors.size()
          << " tolerations=" << r.tolerations.size() << " caps=" << r.capacity_requests.size()
          << "\n";
    };
    for (const auto& r : c.spec.requests) {
      if (r.exactly) req(r.name, *r.exactly);
      for (const auto& s : r.first_available) req(r.name + "/" + s.name, s.request);
    }
    for (const auto& con : c.spec.constraints) {
      out << "  constraint match=" << con.match_attribute << " distinct=" << con.distinct_attribute
          << " requests=" << con.requests.size() << "\n";
    }
  }
  out << "solution:";
  for (const auto& c : sol) {
    out << " |";
    for (const auto& [r, k] : c) out << " " << r << "=" << k;
  }
  return out.str();
}

TEST(AllocatorPropertyTest, AllocationsValidateAndFailuresHaveNoSolution) {
  std::mt19937 rng(20261122);
  int allocated = 0;
  int unschedulable = 0;
  for (int iteration = 0; iteration < 1500; ++iteration) {
    World w = RandomWorld(rng);
    InventoryInput input{{w.slices.begin(), w.slices.end()}, w.classes, {}};
    auto inventory = Inventory::Build(input);
    AllocatedState state = inventory->ResolveAllocated(w.allocated);
    std::vector<const model::ResourceClaim*> claims;
    for (const auto& c : w.claims) claims.push_back(&c);
    model::NodeInfo node{"n1", {}};
    Outcome out = Allocate(*inventory, state, claims, &node);
    Checker checker(w);
    SCOPED_TRACE("iteration " + std::to_string(iteration));
    if (out.kind == OutcomeKind::kAllocated) {
      ++allocated;
      std::vector<std::vector<std::pair<std::string, std::string>>> results;
      for (const auto& a : out.allocations) {
        results.emplace_back();
        for (const auto& r : a.results)
          results.back().emplace_back(r.request, r.pool + "/" + r.device);
      }
      std::string problem = checker.Validate(results);
      ASSERT_EQ(problem, "") << "allocator produced an invalid allocation:\n"
                             << Describe(w, results);
    } else {
      // Upstream makes a constraint that refuses a device of an All request fatal.
      const bool all_constraint =
          out.kind == OutcomeKind::kInvalid &&
          out.error.message().find("cannot add device") != std::string::npos;
      ASSERT_TRUE(out.kind == OutcomeKind::kUnschedulable || all_constraint) << out.error;
      if (all_constraint) continue;  // fatal by upstream's rules even when a subrequest could fit
      ++unschedulable;
      ASSERT_FALSE(checker.AnySolution()) << "allocator said does-not-fit (" << out.reason
                                          << out.error << ") but brute force found a solution:\n"
                                          << Describe(w, checker.solution);
    }
  }
  // Both outcomes must be exercised for the test to mean anything.
  EXPECT_GT(allocated, 200);
  EXPECT_GT(unschedulable, 200);
}

}  // namespace
}  // namespace qm::allocator
