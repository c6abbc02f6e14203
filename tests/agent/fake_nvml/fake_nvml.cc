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
//    "eventsFile": "/path/events.jsonl"}      // events nvmlEventSetWait_v2 reports
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
              kNotFound = 6, kInsufficientSize = 7, kDriverNotLoaded = 9, kTimeout = 10;
constexpr unsigned long long kEventSbe = 0x1, kEventDbe = 0x2, kEventXid = 0x8;

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
};

struct State {
  std::atomic<int> inits{0};
  bool events = true;
  std::string events_file;
  std::string driver_version = "560.35.03";
  int cuda_version = 12060;
  std::vector<std::unique_ptr<FakeDevice>> gpus;
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
    for (const auto& m : g.value("mig", nlohmann::json::array())) {
      auto md = std::make_unique<FakeDevice>();
      md->is_mig = true;
      md->uuid = m.value("uuid", "");
      md->gi_slices = m.value("gpuInstanceSlices", 1u);
      md->memory_mib = m.value("memoryMiB", 9728ULL);
      md->multiprocessors = m.value("multiprocessors", 14u);
      md->gi_id = m.value("gpuInstanceId", 0u);
      md->ci_id = m.value("computeInstanceId", 0u);
      d->migs.emplace_back(m.value("slot", 0u), std::move(md));
    }
    s->gpus.push_back(std::move(d));
    ++n;
  }
  g_state = s.release();
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

}  // extern "C"
