// A stand-in for libnvidia-ml.so.1 in tests: the NVML functions qm-agent calls, answering from
// a JSON file named by QM_FAKE_NVML_CONFIG, so NvmlSource and qm-agent can be tested on
// machines without GPUs. Built as a shared library and loaded with --nvml-library.
//
//   {"driverVersion": "560.35.03", "cudaDriverVersion": 12060,
//    "failInit": false,                       // nvmlInit_v2 answers DRIVER_NOT_LOADED
//    "gpus": [{"name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-...", "memoryMiB": 81920,
//              "pciBusId": "00000000:07:00.0", "computeCapability": [8, 0],
//              "architecture": 7, "brand": 14, "minor": 0, "multiprocessors": 108,
//              "migMode": "unsupported" | "disabled" | "enabled", "maxMigDevices": 7,
//              "mig": [{"slot": 0, "uuid": "MIG-...", "gpuInstanceSlices": 3,
//                       "memoryMiB": 40192, "multiprocessors": 42,
//                       "gpuInstanceId": 1, "computeInstanceId": 0}]}],
//    "events": false,                         // no GPU supports events (NOT_SUPPORTED)
//    "eventsFile": "/path/events.jsonl",      // events nvmlEventSetWait_v2 reports
//    "migStateFile": "/path/mig-state.json",  // the GPU instances created through NVML
//    "fail": {"nvmlGpuInstanceCreateComputeInstance": 999}}  // injected errors (below)
//
// MIG management (the dynamic MIG strategy): a GPU whose migMode is not "unsupported" has the
// GPU instance profiles and placements of an A100-SXM4-40GB (memoryMiB under 65536) or of an
// A100-SXM4-80GB (otherwise), as NVIDIA's driver lists them:
//   id 0 1g.5gb  (1g.10gb) slices 1, placements 0..6 (size 1)
//   id 1 2g.10gb (2g.20gb) slices 2, placements 0, 2, 4 (size 2)
//   id 2 3g.20gb (3g.40gb) slices 3, placements 0, 4 (size 4)
//   id 3 4g.20gb (4g.40gb) slices 4, placement 0 (size 4)
//   id 4 7g.40gb (7g.80gb) slices 7, placement 0 (size 8)
// or those a GPU's "migProfiles" gives: [{"id": 0, "name": "1g.5gb", "slices": 1, "size": 1,
// "memoryMiB": 4864, "multiprocessors": 14, "starts": [0, 1, 2, 3, 4, 5, 6]}, ...].
// nvmlDeviceCreateGpuInstanceWithPlacement refuses a placement that overlaps a GPU instance that
// exists with INSUFFICIENT_RESOURCES; nvmlGpuInstanceDestroy one with compute instances with
// IN_USE. A compute instance created through NVML is a MIG device (UUID
// MIG-fa4e0000-0000-4000-8000-<serial>) in the first free MIG device slot, seen through
// nvmlDeviceGetMigDeviceHandleByIndex as the configured ones. A configured "mig" entry with
// "profileId" and "placementStart" is a GPU instance too (with its compute instance), so it
// occupies its placement. Created instances outlive nvmlShutdown (they belong to the GPU):
// in "migStateFile" when one is named (read again at every first init, so a restarted agent
// and test scripts see them), else in the memory of the process.
// "fail" makes the named MIG management functions answer the given NVML error code.
//
// Events: each line appended to `eventsFile` is one event, reported once by nvmlEventSetWait_v2
// of a set the GPU registered that event type with (lines for other GPUs or types are consumed
// and dropped, as NVML drops events nobody registered for):
//   {"gpu": 1, "type": "xid", "xid": 79, "gpuInstanceId": 1, "computeInstanceId": 0}
// type "xid" (XidCriticalError), "dbe" (double-bit ECC), "sbe" (single-bit ECC); the instance
// ids are optional (0xFFFFFFFF, "not a MIG device's event", when absent).
//
// Init and Shutdown are counted as NVML counts them; calls without an init answer
// UNINITIALIZED, so a source that forgets nvmlInit_v2 fails here as it would on a real node.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

constexpr int kSuccess = 0, kUninitialized = 1, kInvalidArgument = 2, kNotSupported = 3,
              kNotFound = 6, kInsufficientSize = 7, kDriverNotLoaded = 9, kTimeout = 10,
              kInUse = 19, kInsufficientResources = 23, kArgumentVersionMismatch = 25;
constexpr unsigned long long kEventSbe = 0x1, kEventDbe = 0x2, kEventXid = 0x8;

struct FakeDevice;

struct FakeProfile {
  unsigned int id = 0, slices = 0, size = 0, multiprocessors = 0;
  unsigned long long memory_mib = 0;
  std::string name;
  std::vector<unsigned int> starts;
};

struct FakeGpuInstance;

struct FakeComputeInstance {
  FakeGpuInstance* gi = nullptr;
  unsigned int id = 0, profile_id = 0, slices = 0;
  FakeDevice* mig = nullptr;  // its MIG device
};

struct FakeGpuInstance {
  FakeDevice* gpu = nullptr;
  unsigned int id = 0, profile_id = 0, start = 0, size = 0;
  bool created = false;  // through NVML (persisted), not configured
  std::vector<std::unique_ptr<FakeComputeInstance>> cis;
};

struct FakeDevice {
  bool is_mig = false;
  std::string name, uuid, bus_id;
  unsigned long long memory_mib = 0;
  int cc_major = 0, cc_minor = 0;
  unsigned int architecture = 0, brand = 0, minor = 0, multiprocessors = 0;
  std::string mig_mode = "unsupported";
  unsigned int max_mig = 7;
  unsigned int gi_slices = 0;
  unsigned int gi_id = 0, ci_id = 0;
  std::vector<std::pair<unsigned int, std::unique_ptr<FakeDevice>>> migs;  // by slot
  std::vector<FakeProfile> profiles;                                       // MIG mode only
  std::vector<std::unique_ptr<FakeGpuInstance>> gis;
};

struct State {
  std::atomic<int> inits{0};
  bool events = true;
  std::string events_file;
  std::string driver_version = "560.35.03";
  int cuda_version = 12060;
  std::vector<std::unique_ptr<FakeDevice>> gpus;
  std::string mig_state_file;
  std::map<std::string, int> fail;  // function name -> NVML error
};

// NVML is thread-safe (the agent's session and its event thread each hold an init): init and
// shutdown are serialised, and a reloaded configuration never frees the previous state, whose
// device handles another thread may still hold.
State* g_state = nullptr;
std::mutex g_init_mu;

// How far the events file has been read: kept across reloads of the configuration, so an event
// is reported once however often NVML is initialised again.
std::map<std::string, std::streamoff>* g_event_offsets = nullptr;

struct EventSet {
  std::map<void*, unsigned long long> registered;  // device -> event types
};

// The GPU instances created through NVML when no migStateFile is named: {"serial": N, "gpus":
// {"<GPU uuid>": [{"gi", "profileId", "start", "size", "ci", "ciProfileId", "ciSlices", "uuid",
// "slot"}]}}, the same as the file holds. Kept across reloads, as the GPU keeps its instances.
nlohmann::json* g_mig_store = nullptr;
// MIG management and enumeration (the agent's session) may run beside its event thread.
std::recursive_mutex g_mig_mu;

std::vector<FakeProfile> DefaultProfiles(unsigned long long memory_mib) {
  const bool big = memory_mib >= 65536;
  auto mem = [&](unsigned long long small, unsigned long long large) {
    return big ? large : small;
  };
  return {
      {0, 1, 1, 14, mem(4864, 9856), big ? "1g.10gb" : "1g.5gb", {0, 1, 2, 3, 4, 5, 6}},
      {1, 2, 2, 28, mem(9984, 19968), big ? "2g.20gb" : "2g.10gb", {0, 2, 4}},
      {2, 3, 4, 42, mem(20096, 40192), big ? "3g.40gb" : "3g.20gb", {0, 4}},
      {3, 4, 4, 56, mem(20096, 40192), big ? "4g.40gb" : "4g.20gb", {0}},
      {4, 7, 8, 98, mem(40192, 80384), big ? "7g.80gb" : "7g.40gb", {0}},
  };
}

const FakeProfile* FindProfile(const FakeDevice* d, unsigned int id) {
  for (const auto& p : d->profiles) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

// NVML_COMPUTE_INSTANCE_PROFILE_<n>_SLICE: id -> slices.
[[maybe_unused]] unsigned int ComputeInstanceSlices(unsigned int profile) {
  static const unsigned int kSlices[] = {1, 2, 3, 4, 7, 8, 6};
  return profile < std::size(kSlices) ? kSlices[profile] : 0;
}

unsigned int FreeMigSlot(const FakeDevice* gpu) {
  for (unsigned int slot = 0;; ++slot) {
    bool used = false;
    for (const auto& [s, m] : gpu->migs) used = used || s == slot;
    if (!used) return slot;
  }
}

// A compute instance's MIG device, in the first free slot (or `slot`).
FakeDevice* AddMigDevice(FakeGpuInstance* gi, FakeComputeInstance* ci, const std::string& uuid,
                         int slot = -1) {
  const FakeProfile* p = FindProfile(gi->gpu, gi->profile_id);
  auto md = std::make_unique<FakeDevice>();
  md->is_mig = true;
  md->uuid = uuid;
  md->gi_slices = p != nullptr ? p->slices : ci->slices;
  md->memory_mib = p != nullptr ? p->memory_mib : 0;
  md->multiprocessors =
      p != nullptr && p->slices > 0 ? p->multiprocessors / p->slices * ci->slices : 14 * ci->slices;
  md->gi_id = gi->id;
  md->ci_id = ci->id;
  ci->mig = md.get();
  const unsigned int s = slot >= 0 ? static_cast<unsigned int>(slot) : FreeMigSlot(gi->gpu);
  gi->gpu->migs.emplace_back(s, std::move(md));
  return ci->mig;
}

[[maybe_unused]] void RemoveMigDevice(FakeDevice* gpu, const FakeDevice* mig) {
  for (auto it = gpu->migs.begin(); it != gpu->migs.end(); ++it) {
    if (it->second.get() == mig) {
      // Handles another thread may hold stay valid: the device is kept, only unlisted.
      it->second.release();
      gpu->migs.erase(it);
      return;
    }
  }
}

// Writes the created instances of every GPU to the store (and the state file).
[[maybe_unused]] void SaveMigState() {
  nlohmann::json gpus = nlohmann::json::object();
  for (const auto& g : g_state->gpus) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& gi : g->gis) {
      if (!gi->created) continue;
      nlohmann::json rec = {
          {"gi", gi->id}, {"profileId", gi->profile_id}, {"start", gi->start}, {"size", gi->size}};
      if (!gi->cis.empty()) {
        const FakeComputeInstance& ci = *gi->cis.front();
        unsigned int slot = 0;
        for (const auto& [s, m] : g->migs) {
          if (m.get() == ci.mig) slot = s;
        }
        rec["ci"] = ci.id;
        rec["ciProfileId"] = ci.profile_id;
        rec["ciSlices"] = ci.slices;
        rec["uuid"] = ci.mig != nullptr ? ci.mig->uuid : "";
        rec["slot"] = slot;
      }
      list.push_back(std::move(rec));
    }
    if (!list.empty()) gpus[g->uuid] = std::move(list);
  }
  (*g_mig_store)["gpus"] = std::move(gpus);
  if (g_state->mig_state_file.empty()) return;
  const std::string tmp = g_state->mig_state_file + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << g_mig_store->dump(2) << "\n";
  }
  std::rename(tmp.c_str(), g_state->mig_state_file.c_str());
}

// Recreates the created instances the store holds for the GPUs of the configuration.
void RestoreMigState() {
  const nlohmann::json gpus = g_mig_store->value("gpus", nlohmann::json::object());
  for (auto& g : g_state->gpus) {
    if (!gpus.contains(g->uuid)) continue;
    for (const auto& rec : gpus.at(g->uuid)) {
      auto gi = std::make_unique<FakeGpuInstance>();
      gi->gpu = g.get();
      gi->id = rec.value("gi", 0u);
      gi->profile_id = rec.value("profileId", 0u);
      gi->start = rec.value("start", 0u);
      gi->size = rec.value("size", 0u);
      gi->created = true;
      if (rec.contains("ci")) {
        auto ci = std::make_unique<FakeComputeInstance>();
        ci->gi = gi.get();
        ci->id = rec.value("ci", 0u);
        ci->profile_id = rec.value("ciProfileId", 0u);
        ci->slices = rec.value("ciSlices", 1u);
        AddMigDevice(gi.get(), ci.get(), rec.value("uuid", ""), rec.value("slot", 0));
        gi->cis.push_back(std::move(ci));
      }
      g->gis.push_back(std::move(gi));
    }
  }
}

int Load() {
  g_state = nullptr;  // the old state stays allocated: see g_state
  const char* path = std::getenv("QM_FAKE_NVML_CONFIG");
  if (path == nullptr) return kDriverNotLoaded;
  std::ifstream in(path);
  if (!in) return kDriverNotLoaded;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (...) {
    return kDriverNotLoaded;
  }
  if (j.value("failInit", false)) return kDriverNotLoaded;
  auto s = std::make_unique<State>();
  s->driver_version = j.value("driverVersion", s->driver_version);
  s->cuda_version = j.value("cudaDriverVersion", s->cuda_version);
  s->events = j.value("events", true);
  s->events_file = j.value("eventsFile", "");
  s->mig_state_file = j.value("migStateFile", "");
  s->fail = j.value("fail", std::map<std::string, int>{});
  unsigned int n = 0;
  for (const auto& g : j.value("gpus", nlohmann::json::array())) {
    auto d = std::make_unique<FakeDevice>();
    d->name = g.value("name", "NVIDIA A100-SXM4-80GB");
    d->uuid = g.value("uuid", "GPU-00000000-0000-0000-0000-00000000000" + std::to_string(n));
    d->memory_mib = g.value("memoryMiB", 81920ULL);
    d->bus_id = g.value("pciBusId", "00000000:07:00.0");
    auto cc = g.value("computeCapability", std::vector<int>{8, 0});
    d->cc_major = cc.at(0);
    d->cc_minor = cc.at(1);
    d->architecture = g.value("architecture", 7u);
    d->brand = g.value("brand", 14u);
    d->minor = g.value("minor", n);
    d->multiprocessors = g.value("multiprocessors", 108u);
    d->mig_mode = g.value("migMode", "unsupported");
    d->max_mig = g.value("maxMigDevices", 7u);
    if (d->mig_mode != "unsupported") {
      if (g.contains("migProfiles")) {
        for (const auto& p : g.at("migProfiles")) {
          FakeProfile fp;
          fp.id = p.value("id", 0u);
          fp.name = p.value("name", "");
          fp.slices = p.value("slices", 1u);
          fp.size = p.value("size", fp.slices);
          fp.memory_mib = p.value("memoryMiB", 4864ULL);
          fp.multiprocessors = p.value("multiprocessors", 14u * fp.slices);
          fp.starts = p.value("starts", std::vector<unsigned int>{0});
          d->profiles.push_back(std::move(fp));
        }
      } else {
        d->profiles = DefaultProfiles(d->memory_mib);
      }
    }
    for (const auto& m : g.value("mig", nlohmann::json::array())) {
      auto md = std::make_unique<FakeDevice>();
      md->is_mig = true;
      md->uuid = m.value("uuid", "");
      md->gi_slices = m.value("gpuInstanceSlices", 1u);
      md->memory_mib = m.value("memoryMiB", 9728ULL);
      md->multiprocessors = m.value("multiprocessors", 14u);
      md->gi_id = m.value("gpuInstanceId", 0u);
      md->ci_id = m.value("computeInstanceId", 0u);
      if (m.contains("placementStart")) {
        // A configured GPU instance (with its compute instance): it occupies its placement.
        auto gi = std::make_unique<FakeGpuInstance>();
        gi->gpu = d.get();
        gi->id = md->gi_id;
        gi->profile_id = m.value("profileId", 0u);
        gi->start = m.value("placementStart", 0u);
        const FakeProfile* p = FindProfile(d.get(), gi->profile_id);
        gi->size = m.value("placementSize", p != nullptr ? p->size : md->gi_slices);
        auto ci = std::make_unique<FakeComputeInstance>();
        ci->gi = gi.get();
        ci->id = md->ci_id;
        ci->slices = md->gi_slices;
        ci->mig = md.get();
        gi->cis.push_back(std::move(ci));
        d->gis.push_back(std::move(gi));
      }
      d->migs.emplace_back(m.value("slot", 0u), std::move(md));
    }
    s->gpus.push_back(std::move(d));
    ++n;
  }
  g_state = s.release();
  if (g_mig_store == nullptr) g_mig_store = new nlohmann::json(nlohmann::json::object());
  if (!g_state->mig_state_file.empty()) {
    // The file is the GPUs' state: what another process (an agent before its restart) created.
    std::ifstream state(g_state->mig_state_file);
    nlohmann::json stored = nlohmann::json::object();
    if (state) {
      try {
        stored = nlohmann::json::parse(state);
      } catch (...) {
        return kDriverNotLoaded;
      }
    }
    *g_mig_store = std::move(stored);
  }
  RestoreMigState();
  return kSuccess;
}

int CopyString(const std::string& s, char* out, unsigned int length) {
  if (out == nullptr) return kInvalidArgument;
  if (s.size() + 1 > length) return kInsufficientSize;
  std::memcpy(out, s.c_str(), s.size() + 1);
  return kSuccess;
}

FakeDevice* Dev(void* handle) { return static_cast<FakeDevice*>(handle); }

#define REQUIRE_INIT() \
  if (g_state == nullptr || g_state->inits == 0) return kUninitialized

// An error the configuration's "fail" injects into function `name`.
#define INJECTED_FAILURE(name)                                         \
  if (auto it = g_state->fail.find(name); it != g_state->fail.end()) { \
    return it->second;                                                 \
  }

}  // namespace

// The layouts the agent declares (nvml_source.cc), repeated: a mismatch would show as wrong
// values in the tests.
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlDeviceAttributes_t {
  unsigned int multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount,
      sharedJpegCount, sharedOfaCount, gpuInstanceSliceCount, computeInstanceSliceCount;
  unsigned long long memorySizeMB;
};
struct nvmlGpuInstancePlacement_t {
  unsigned int start, size;
};
struct nvmlGpuInstanceProfileInfo_t {
  unsigned int id, isP2pSupported, sliceCount, instanceCount, multiprocessorCount, copyEngineCount,
      decoderCount, encoderCount, jpegCount, ofaCount;
  unsigned long long memorySizeMB;
};
struct nvmlGpuInstanceProfileInfo_v2_t {
  unsigned int version, id, isP2pSupported, sliceCount, instanceCount, multiprocessorCount,
      copyEngineCount, decoderCount, encoderCount, jpegCount, ofaCount;
  unsigned long long memorySizeMB;
  char name[96];
};
struct nvmlGpuInstanceInfo_t {
  void* device;
  unsigned int id, profileId;
  nvmlGpuInstancePlacement_t placement;
};
struct nvmlComputeInstanceProfileInfo_t {
  unsigned int id, sliceCount, instanceCount, multiprocessorCount, sharedCopyEngineCount,
      sharedDecoderCount, sharedEncoderCount, sharedJpegCount, sharedOfaCount;
};
struct nvmlComputeInstanceInfo_t {
  void* device;
  void* gpuInstance;
  unsigned int id, profileId;
  nvmlGpuInstancePlacement_t placement;
};

extern "C" {

int nvmlInit_v2() {
  std::lock_guard<std::mutex> lock(g_init_mu);
  if (g_state == nullptr || g_state->inits == 0) {
    if (int rc = Load(); rc != kSuccess) return rc;
  }
  // The real library starts threads of its own at its first init; so does this stand-in, so a
  // caller that blocks signals only after nvmlInit fails the tests as it fails on a real node.
  static std::once_flag library_thread;
  std::call_once(library_thread, [] {
    std::thread([] {
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
    }).detach();
  });
  ++g_state->inits;
  return kSuccess;
}

int nvmlShutdown() {
  std::lock_guard<std::mutex> lock(g_init_mu);
  REQUIRE_INIT();
  --g_state->inits;
  return kSuccess;
}

// Tests read this to check that every init was shut down.
int qmFakeNvmlInitCount() { return g_state == nullptr ? 0 : g_state->inits.load(); }

const char* nvmlErrorString(int rc) {
  switch (rc) {
    case kSuccess:
      return "Success";
    case kUninitialized:
      return "Uninitialized";
    case kInvalidArgument:
      return "Invalid Argument";
    case kNotSupported:
      return "Not Supported";
    case kNotFound:
      return "Not Found";
    case kDriverNotLoaded:
      return "Driver Not Loaded";
    case kTimeout:
      return "Timeout";
    case kInUse:
      return "In use by another client";
    case kInsufficientResources:
      return "Insufficient resources";
    case kArgumentVersionMismatch:
      return "Argument version mismatch";
    default:
      return "Unknown Error";
  }
}

int nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  REQUIRE_INIT();
  return CopyString(g_state->driver_version, version, length);
}

int nvmlSystemGetCudaDriverVersion_v2(int* version) {
  REQUIRE_INIT();
  *version = g_state->cuda_version;
  return kSuccess;
}

int nvmlDeviceGetCount_v2(unsigned int* count) {
  REQUIRE_INIT();
  *count = static_cast<unsigned int>(g_state->gpus.size());
  return kSuccess;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  REQUIRE_INIT();
  if (index >= g_state->gpus.size()) return kInvalidArgument;
  *device = g_state->gpus[index].get();
  return kSuccess;
}

int nvmlDeviceGetName(void* device, char* name, unsigned int length) {
  REQUIRE_INIT();
  return CopyString(Dev(device)->name, name, length);
}

int nvmlDeviceGetUUID(void* device, char* uuid, unsigned int length) {
  REQUIRE_INIT();
  return CopyString(Dev(device)->uuid, uuid, length);
}

int nvmlDeviceGetPciInfo_v3(void* device, nvmlPciInfo_t* pci) {
  REQUIRE_INIT();
  if (Dev(device)->is_mig) return kNotSupported;
  *pci = {};
  const std::string& id = Dev(device)->bus_id;
  std::strncpy(pci->busId, id.c_str(), sizeof(pci->busId) - 1);
  std::sscanf(id.c_str(), "%x:%x:%x", &pci->domain, &pci->bus, &pci->device);
  return kSuccess;
}

int nvmlDeviceGetMemoryInfo(void* device, nvmlMemory_t* memory) {
  REQUIRE_INIT();
  memory->total = Dev(device)->memory_mib * 1024 * 1024;
  memory->used = 0;
  memory->free = memory->total;
  return kSuccess;
}

int nvmlDeviceGetCudaComputeCapability(void* device, int* major, int* minor) {
  REQUIRE_INIT();
  *major = Dev(device)->cc_major;
  *minor = Dev(device)->cc_minor;
  return kSuccess;
}

int nvmlDeviceGetBrand(void* device, unsigned int* brand) {
  REQUIRE_INIT();
  *brand = Dev(device)->brand;
  return kSuccess;
}

int nvmlDeviceGetArchitecture(void* device, unsigned int* arch) {
  REQUIRE_INIT();
  *arch = Dev(device)->architecture;
  return kSuccess;
}

int nvmlDeviceGetMinorNumber(void* device, unsigned int* minor) {
  REQUIRE_INIT();
  *minor = Dev(device)->minor;
  return kSuccess;
}

int nvmlDeviceGetMigMode(void* device, unsigned int* current, unsigned int* pending) {
  REQUIRE_INIT();
  const std::string& mode = Dev(device)->mig_mode;
  if (mode == "unsupported") return kNotSupported;
  *current = *pending = mode == "enabled" ? 1 : 0;
  return kSuccess;
}

int nvmlDeviceGetMaxMigDeviceCount(void* device, unsigned int* count) {
  REQUIRE_INIT();
  if (Dev(device)->mig_mode == "unsupported") return kNotSupported;
  *count = Dev(device)->max_mig;
  return kSuccess;
}

int nvmlDeviceGetMigDeviceHandleByIndex(void* device, unsigned int index, void** mig) {
  REQUIRE_INIT();
  std::lock_guard<std::recursive_mutex> lock(g_mig_mu);
  FakeDevice* d = Dev(device);
  if (d->mig_mode != "enabled") return kInvalidArgument;
  if (index >= d->max_mig) return kInvalidArgument;
  for (auto& [slot, m] : d->migs) {
    if (slot == index) {
      *mig = m.get();
      return kSuccess;
    }
  }
  return kNotFound;
}

int nvmlDeviceGetAttributes_v2(void* device, nvmlDeviceAttributes_t* attrs) {
  REQUIRE_INIT();
  FakeDevice* d = Dev(device);
  *attrs = {};
  attrs->multiprocessorCount = d->multiprocessors;
  attrs->gpuInstanceSliceCount = d->is_mig ? d->gi_slices : 0;
  attrs->computeInstanceSliceCount = attrs->gpuInstanceSliceCount;
  attrs->memorySizeMB = d->memory_mib;
  return kSuccess;
}

int nvmlDeviceGetGpuInstanceId(void* device, unsigned int* id) {
  REQUIRE_INIT();
  if (!Dev(device)->is_mig) return kNotSupported;
  *id = Dev(device)->gi_id;
  return kSuccess;
}

int nvmlDeviceGetComputeInstanceId(void* device, unsigned int* id) {
  REQUIRE_INIT();
  if (!Dev(device)->is_mig) return kNotSupported;
  *id = Dev(device)->ci_id;
  return kSuccess;
}

struct nvmlEventData_t {
  void* device;
  unsigned long long eventType, eventData;
  unsigned int gpuInstanceId, computeInstanceId;
};

int nvmlEventSetCreate(void** set) {
  REQUIRE_INIT();
  *set = new EventSet();
  return kSuccess;
}

int nvmlEventSetFree(void* set) {
  REQUIRE_INIT();
  delete static_cast<EventSet*>(set);
  return kSuccess;
}

int nvmlDeviceGetSupportedEventTypes(void* device, unsigned long long* types) {
  REQUIRE_INIT();
  if (!g_state->events || Dev(device)->is_mig) return kNotSupported;
  *types = kEventSbe | kEventDbe | kEventXid | 0x4 /* PState */;
  return kSuccess;
}

int nvmlDeviceRegisterEvents(void* device, unsigned long long types, void* set) {
  REQUIRE_INIT();
  if (!g_state->events || Dev(device)->is_mig) return kNotSupported;
  static_cast<EventSet*>(set)->registered[device] |= types;
  return kSuccess;
}

int nvmlEventSetWait_v2(void* set_ptr, nvmlEventData_t* data, unsigned int timeout_ms) {
  REQUIRE_INIT();
  auto* set = static_cast<EventSet*>(set_ptr);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  if (g_event_offsets == nullptr) g_event_offsets = new std::map<std::string, std::streamoff>();
  const std::string path = g_state->events_file;
  while (true) {
    if (!path.empty()) {
      std::ifstream in(path);
      std::streamoff& offset = (*g_event_offsets)[path];
      in.seekg(offset);
      std::string line;
      // Only whole lines: a writer may be half way through one.
      while (in && std::getline(in, line) && !in.eof()) {
        offset = in.tellg();
        nlohmann::json e;
        try {
          e = nlohmann::json::parse(line);
        } catch (...) {
          continue;
        }
        const unsigned int gpu = e.value("gpu", 0u);
        const std::string type = e.value("type", "xid");
        const unsigned long long bit = type == "xid"   ? kEventXid
                                       : type == "dbe" ? kEventDbe
                                       : type == "sbe" ? kEventSbe
                                                       : 0;
        if (gpu >= g_state->gpus.size()) continue;
        void* dev = g_state->gpus[gpu].get();
        auto reg = set->registered.find(dev);
        if (reg == set->registered.end() || (reg->second & bit) == 0) continue;
        *data = {};
        data->device = dev;
        data->eventType = bit;
        data->eventData = e.value("xid", 0ULL);
        data->gpuInstanceId = e.value("gpuInstanceId", 0xFFFFFFFFu);
        data->computeInstanceId = e.value("computeInstanceId", 0xFFFFFFFFu);
        return kSuccess;
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) return kTimeout;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// ---- MIG management -------------------------------------------------------------------------
// Left out of the build libfake_nvml_no_mig.so (QM_FAKE_NVML_NO_MIG): a driver older than MIG.
#ifndef QM_FAKE_NVML_NO_MIG

int nvmlDeviceGetHandleByUUID(const char* uuid, void** device) {
  REQUIRE_INIT();
  if (uuid == nullptr || device == nullptr) return kInvalidArgument;
  std::lock_guard<std::recursive_mutex> lock(g_mig_mu);
  for (auto& g : g_state->gpus) {
    if (g->uuid == uuid) {
      *device = g.get();
      return kSuccess;
    }
    for (auto& [slot, m] : g->migs) {
      if (m->uuid == uuid) {
        *device = m.get();
        return kSuccess;
      }
    }
  }
  return kNotFound;
}

static int ProfileInfo(void* device, unsigned int profile, nvmlGpuInstanceProfileInfo_t* info) {
  FakeDevice* d = Dev(device);
  if (d->is_mig || d->mig_mode != "enabled") return kNotSupported;
  const FakeProfile* p = FindProfile(d, profile);
  if (p == nullptr) return kNotSupported;
  *info = {};
  info->id = p->id;
  info->sliceCount = p->slices;
  info->instanceCount = static_cast<unsigned int>(p->starts.size());
  info->multiprocessorCount = p->multiprocessors;
  info->copyEngineCount = p->slices;
  info->memorySizeMB = p->memory_mib;
  return kSuccess;
}

int nvmlDeviceGetGpuInstanceProfileInfo(void* device, unsigned int profile,
                                        nvmlGpuInstanceProfileInfo_t* info) {
  REQUIRE_INIT();
  INJECTED_FAILURE("nvmlDeviceGetGpuInstanceProfileInfo");
  if (info == nullptr) return kInvalidArgument;
  return ProfileInfo(device, profile, info);
}

int nvmlDeviceGetGpuInstanceProfileInfoV(void* device, unsigned int profile,
                                         nvmlGpuInstanceProfileInfo_v2_t* info) {
  REQUIRE_INIT();
  INJECTED_FAILURE("nvmlDeviceGetGpuInstanceProfileInfoV");
  if (info == nullptr) return kInvalidArgument;
  // nvmlGpuInstanceProfileInfo_v2: the struct's size and version 2, as nvml.h defines it.
  if (info->version != (sizeof(nvmlGpuInstanceProfileInfo_v2_t) | (2u << 24))) {
    return kArgumentVersionMismatch;
  }
  nvmlGpuInstanceProfileInfo_t v1{};
  if (int rc = ProfileInfo(device, profile, &v1); rc != kSuccess) return rc;
  const unsigned int version = info->version;
  *info = {};
  info->version = version;
  info->id = v1.id;
  info->sliceCount = v1.sliceCount;
  info->instanceCount = v1.instanceCount;
  info->multiprocessorCount = v1.multiprocessorCount;
  info->copyEngineCount = v1.copyEngineCount;
  info->memorySizeMB = v1.memorySizeMB;
  const FakeProfile* p = FindProfile(Dev(device), profile);
  if (!p->name.empty()) {
    std::snprintf(info->name, sizeof(info->name), "MIG %s", p->name.c_str());
  }
  return kSuccess;
}

int nvmlDeviceGetGpuInstancePossiblePlacements_v2(void* device, unsigned int profile,
                                                  nvmlGpuInstancePlacement_t* placements,
                                                  unsigned int* count) {
  REQUIRE_INIT();
  INJECTED_FAILURE("nvmlDeviceGetGpuInstancePossiblePlacements_v2");
  if (count == nullptr) return kInvalidArgument;
  FakeDevice* d = Dev(device);
  if (d->is_mig || d->mig_mode != "enabled") return kNotSupported;
  const FakeProfile* p = FindProfile(d, profile);
  if (p == nullptr) return kNotSupported;
  if (placements == nullptr) {
    *count = static_cast<unsigned int>(p->starts.size());
    return kSuccess;
  }
  if (*count < p->starts.size()) return kInsufficientSize;
  for (size_t i = 0; i < p->starts.size(); ++i) placements[i] = {p->starts[i], p->size};
  *count = static_cast<unsigned int>(p->starts.size());
  return kSuccess;
}

int nvmlDeviceGetGpuInstances(void* device, unsigned int profile, void** instances,
                              unsigned int* count) {
  REQUIRE_INIT();
  INJECTED_FAILURE("nvmlDeviceGetGpuInstances");
  if (instances == nullptr || count == nullptr) return kInvalidArgument;
  std::lock_guard<std::recursive_mutex> lock(g_mig_mu);
  FakeDevice* d = Dev(device);
  if (d->is_mig || d->mig_mode != "enabled") return kNotSupported;
  const FakeProfile* p = FindProfile(d, profile);
  if (p == nullptr) return kNotSupported;
  unsigned int n = 0;
  for (auto& gi : d->gis) {
    if (gi->profile_id != profile) continue;
    if (n >= p->starts.size()) return kInsufficientSize;
    instances[n++] = gi.get();
  }
  *count = n;
  return kSuccess;
}

int nvmlDeviceGetGpuInstanceById(void* device, unsigned int id, void** instance) {
  REQUIRE_INIT();
  INJECTED_FAILURE("nvmlDeviceGetGpuInstanceById");
  if (instance == nullptr) return kInvalidArgument;
  std::lock_guard<std::recursive_mutex> lock(g_mig_mu);
  FakeDevice* d = Dev(device);
  if (d->is_mig || d->mig_mode != "enabled") return kNotSupported;
  for (auto& gi : d->gis) {
    if (gi->id == id) {
      *instance = gi.get();
      return kSuccess;
    }
  }
  return kNotFound;
}

int nvmlDeviceCreateGpuInstanceWithPlacement(void* device, unsigned int profile,
                                             const nvmlGpuInstancePlacement_t* placement,
                                             void** instance) {
  REQUIRE_INIT();
  INJECTED_FAILURE("nvmlDeviceCreateGpuInstanceWithPlacement");
  if (placement == nullptr || instance == nullptr) return kInvalidArgument;
  std::lock_guard<std::recursive_mutex> lock(g_mig_mu);
  FakeDevice* d = Dev(device);
  if (d->is_mig || d->mig_mode != "enabled") return kNotSupported;
  const FakeProfile* p = FindProfile(d, profile);
  if (p == nullptr) return kNotSupported;
  bool allowed = placement->size == p->size;
  bool listed = false;
  for (unsigned int start : p->starts) listed = listed || start == placement->start;
  if (!allowed || !listed) return kInvalidArgument;
  for (const auto& gi : d->gis) {
    if (gi->start < placement->start + placement->size && placement->start < gi->start + gi->size) {
      return kInsufficientResources;
    }
  }
  // The lowest GPU instance id not in use (ids start at 1).
  unsigned int id = 1;
  for (bool used = true; used;) {
    used = false;
    for (const auto& gi : d->gis) used = used || gi->id == id;
    for (const auto& [slot, m] : d->migs) used = used || m->gi_id == id;
    if (used) ++id;
  }
  auto gi = std::make_unique<FakeGpuInstance>();
  gi->gpu = d;
  gi->id = id;
  gi->profile_id = profile;
  gi->start = placement->start;
  gi->size = placement->size;
  gi->created = true;
  *instance = gi.get();
  d->gis.push_back(std::move(gi));
  SaveMigState();
  return kSuccess;
}

int nvmlGpuInstanceGetInfo(void* instance, nvmlGpuInstanceInfo_t* info) {
  REQUIRE_INIT();
  INJECTED_FAILURE("nvmlGpuInstanceGetInfo");
  if (instance == nullptr || info == nullptr) return kInvalidArgument;
  auto* gi = static_cast<FakeGpuInstance*>(instance);
  *info = {};
  info->device = gi->gpu;
  info->id = gi->id;
  info->profileId = gi->profile_id;
  info->placement = {gi->start, gi->size};
  return kSuccess;
}

int nvmlGpuInstanceGetComputeInstanceProfileInfo(void* instance, unsigned int profile,
                                                 unsigned int engine_profile,
                                                 nvmlComputeInstanceProfileInfo_t* info) {
  REQUIRE_INIT();
  INJECTED_FAILURE("nvmlGpuInstanceGetComputeInstanceProfileInfo");
  if (instance == nullptr || info == nullptr) return kInvalidArgument;
  auto* gi = static_cast<FakeGpuInstance*>(instance);
  const FakeProfile* p = FindProfile(gi->gpu, gi->profile_id);
  const unsigned int slices = ComputeInstanceSlices(profile);
  if (engine_profile != 0 || p == nullptr || slices == 0 || slices > p->slices) {
    return kNotSupported;
  }
  *info = {};
  info->id = profile;
  info->sliceCount = slices;
  info->instanceCount = p->slices / slices;
  info->multiprocessorCount = p->multiprocessors / p->slices * slices;
  return kSuccess;
}

int nvmlGpuInstanceCreateComputeInstance(void* instance, unsigned int profile, void** compute) {
  REQUIRE_INIT();
  INJECTED_FAILURE("nvmlGpuInstanceCreateComputeInstance");
  if (instance == nullptr || compute == nullptr) return kInvalidArgument;
  std::lock_guard<std::recursive_mutex> lock(g_mig_mu);
  auto* gi = static_cast<FakeGpuInstance*>(instance);
  const FakeProfile* p = FindProfile(gi->gpu, gi->profile_id);
  const unsigned int slices = ComputeInstanceSlices(profile);
  if (p == nullptr || slices == 0 || slices > p->slices) return kNotSupported;
  unsigned int used = 0;
  for (const auto& ci : gi->cis) used += ci->slices;
  if (used + slices > p->slices) return kInsufficientResources;
  unsigned int id = 0;
  for (bool taken = true; taken;) {
    taken = false;
    for (const auto& ci : gi->cis) taken = taken || ci->id == id;
    if (taken) ++id;
  }
  auto ci = std::make_unique<FakeComputeInstance>();
  ci->gi = gi;
  ci->id = id;
  ci->profile_id = profile;
  ci->slices = slices;
  const unsigned long long serial = g_mig_store->value("serial", 0ULL) + 1;
  (*g_mig_store)["serial"] = serial;
  char uuid[64];
  std::snprintf(uuid, sizeof(uuid), "MIG-fa4e0000-0000-4000-8000-%012llx", serial);
  AddMigDevice(gi, ci.get(), uuid);
  *compute = ci.get();
  gi->cis.push_back(std::move(ci));
  SaveMigState();
  return kSuccess;
}

int nvmlGpuInstanceGetComputeInstanceById(void* instance, unsigned int id, void** compute) {
  REQUIRE_INIT();
  INJECTED_FAILURE("nvmlGpuInstanceGetComputeInstanceById");
  if (instance == nullptr || compute == nullptr) return kInvalidArgument;
  std::lock_guard<std::recursive_mutex> lock(g_mig_mu);
  for (auto& ci : static_cast<FakeGpuInstance*>(instance)->cis) {
    if (ci->id == id) {
      *compute = ci.get();
      return kSuccess;
    }
  }
  return kNotFound;
}

int nvmlComputeInstanceGetInfo_v2(void* compute, nvmlComputeInstanceInfo_t* info) {
  REQUIRE_INIT();
  INJECTED_FAILURE("nvmlComputeInstanceGetInfo_v2");
  if (compute == nullptr || info == nullptr) return kInvalidArgument;
  auto* ci = static_cast<FakeComputeInstance*>(compute);
  *info = {};
  info->device = ci->gi->gpu;
  info->gpuInstance = ci->gi;
  info->id = ci->id;
  info->profileId = ci->profile_id;
  info->placement = {0, ci->slices};
  return kSuccess;
}

int nvmlComputeInstanceDestroy(void* compute) {
  REQUIRE_INIT();
  INJECTED_FAILURE("nvmlComputeInstanceDestroy");
  if (compute == nullptr) return kInvalidArgument;
  std::lock_guard<std::recursive_mutex> lock(g_mig_mu);
  auto* ci = static_cast<FakeComputeInstance*>(compute);
  FakeGpuInstance* gi = ci->gi;
  for (auto it = gi->cis.begin(); it != gi->cis.end(); ++it) {
    if (it->get() != ci) continue;
    if (ci->mig != nullptr) RemoveMigDevice(gi->gpu, ci->mig);
    it->release();  // a handle another thread holds stays valid
    gi->cis.erase(it);
    SaveMigState();
    return kSuccess;
  }
  return kInvalidArgument;
}

int nvmlGpuInstanceDestroy(void* instance) {
  REQUIRE_INIT();
  INJECTED_FAILURE("nvmlGpuInstanceDestroy");
  if (instance == nullptr) return kInvalidArgument;
  std::lock_guard<std::recursive_mutex> lock(g_mig_mu);
  auto* gi = static_cast<FakeGpuInstance*>(instance);
  if (!gi->cis.empty()) return kInUse;
  FakeDevice* d = gi->gpu;
  for (auto it = d->gis.begin(); it != d->gis.end(); ++it) {
    if (it->get() != gi) continue;
    it->release();
    d->gis.erase(it);
    SaveMigState();
    return kSuccess;
  }
  return kInvalidArgument;
}

#endif  // QM_FAKE_NVML_NO_MIG

}  // extern "C"
