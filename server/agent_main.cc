// qm-agent: wiring only. Parses flags, loads credentials, builds the device source and the agent,
// runs it until SIGINT/SIGTERM.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "agent/credentials.h"
#include "agent/health.h"
#include "agent/nvml_source.h"
#include "agent/simulated_source.h"
#include "common/logging.h"
#include "common/process.h"
#include "spdlog/spdlog.h"

namespace {

constexpr char kHelp[] =
    "qm-agent: the Quartermaster node agent. Publishes this machine's GPUs to the server as\n"
    "ResourceSlices, keeps the Node Ready, and prepares the devices of the claims scheduled to\n"
    "this node (CDI spec files for the container runtime).\n"
    "\n"
    "Usage: qm-agent --node-name NAME (--kubeconfig FILE | --ca-file F --cert-file F --key-file "
    "F)\n"
    "                [--server HOST:PORT] [--simulate FILE | --nvml-library PATH] [flags]\n"
    "\n"
    "Flags:\n"
    "  --server HOST:PORT      the server's node-agent (gRPC) address; default: the host of the\n"
    "                          kubeconfig's server URL with port 8081\n"
    "  --node-name NAME        this node's name (default: the host name)\n"
    "  --simulate FILE         simulate the GPUs described in FILE (YAML) instead of discovering\n"
    "                          them, e.g.  gpus: [{model: NVIDIA A100-SXM4-80GB, memory: 80Gi,\n"
    "                          count: 4}]  (see docs/agents.md for every field)\n"
    "  --nvml-library PATH     the NVML library GPUs are discovered through when --simulate is\n"
    "                          not given (default libnvidia-ml.so.1, found as dlopen finds it)\n"
    "  --mig-strategy STRATEGY static (default): a GPU in MIG mode is published as the MIG\n"
    "                          devices that exist on it; dynamic: as every MIG placement it\n"
    "                          supports, whose instance is created when a claim that got it is\n"
    "                          prepared and destroyed at unprepare (NVML only; simulated GPUs\n"
    "                          say mig: dynamic in the simulate file)\n"
    "  --ignore-xids LIST      XIDs that do not make a GPU unhealthy (default 13,31,43,45,68,109:\n"
    "                          application errors, as NVIDIA's device plugin); \"\" ignores none\n"
    "  --mps-control-binary PATH  nvidia-cuda-mps-control, started per claim with an MPS config\n"
    "                          (default: found on PATH)\n"
    "  --nvidia-smi PATH       nvidia-smi, which sets the time slice of GPUs of claims with a\n"
    "                          TimeSlicing config (default: nvidia-smi on PATH; with --simulate\n"
    "                          none unless given: the interval then only reaches the env)\n"
    "  --cdi-dir DIR           where CDI spec files are written (default /var/run/cdi)\n"
    "  --state-dir DIR         where the checkpoint of prepared claims is kept\n"
    "                          (default /var/lib/qm-agent)\n"
    "  --kubeconfig FILE       credentials and CA from a kubeconfig, as minted by\n"
    "                          `quartermaster credential --node NAME --out FILE`\n"
    "  --ca-file FILE          CA certificate (PEM) that signed the server's certificate\n"
    "  --cert-file FILE        client certificate (PEM), CN system:node:NAME, O system:nodes\n"
    "  --key-file FILE         its private key (PEM)\n"
    "  --token-file FILE       a bearer token instead of (or besides) a client certificate\n"
    "  --insecure              plaintext gRPC (only against a server run with --insecure-http)\n"
    "  --log-level LEVEL       trace, debug, info (default), warn, error or off\n"
    "  --log-format FORMAT     text (default) or json\n"
    "  --help                  show this text\n";

int Usage(const std::string& message) {
  std::fprintf(stderr, "qm-agent: %s (see --help)\n", message.c_str());
  return 2;
}

std::string HostName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "";
  std::string out = host;
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  // SIGINT and SIGTERM go to the signal thread below (sigwait), blocked before anything can
  // start a thread (common/process.h).
  sigset_t signals = qm::PrepareProcess();
  std::vector<std::string> args(argv + 1, argv + argc);
  std::map<std::string, std::string> flags;
  bool insecure = false;
  const std::vector<std::string> known = {
      "server",     "node-name",   "simulate",           "nvml-library", "cdi-dir",     "state-dir",
      "kubeconfig", "ca-file",     "cert-file",          "key-file",     "token-file",  "log-level",
      "log-format", "ignore-xids", "mps-control-binary", "nvidia-smi",   "mig-strategy"};
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kHelp, stdout);
      return 0;
    }
    if (a == "--insecure") {
      insecure = true;
      continue;
    }
    if (a.rfind("--", 0) != 0) return Usage("unexpected argument \"" + a + "\"");
    std::string name = a.substr(2), value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else {
      if (i + 1 >= args.size()) return Usage("--" + name + " needs a value");
      value = args[++i];
    }
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return Usage("unknown flag --" + name);
    }
    flags[name] = value;
  }
  auto flag = [&](const std::string& name, const std::string& def = "") {
    auto it = flags.find(name);
    return it == flags.end() ? def : it->second;
  };
  qm::ConfigureLogging(flag("log-level", "info"), flag("log-format", "text"));

  qm::agent::AgentOptions options;
  options.node_name = flag("node-name", HostName());
  options.cdi_dir = flag("cdi-dir", options.cdi_dir);
  options.state_dir = flag("state-dir", options.state_dir);
  options.insecure = insecure;
  if (flags.contains("ignore-xids")) {
    auto xids = qm::agent::ParseXidList(flag("ignore-xids"));
    if (!xids.ok()) return Usage("--ignore-xids: " + std::string(xids.status().message()));
    options.ignored_xids = *xids;
  }
  options.mps_control_binary = flag("mps-control-binary", options.mps_control_binary);
  options.nvidia_smi =
      flag("nvidia-smi", flag("simulate").empty() ? qm::agent::kDefaultNvidiaSmi : "");
  if (options.node_name.empty()) return Usage("--node-name is required");

  std::string server_url;
  if (!flag("kubeconfig").empty()) {
    auto creds = qm::agent::LoadKubeconfig(flag("kubeconfig"));
    if (!creds.ok()) return Usage(std::string(creds.status().message()));
    options.ca_pem = creds->ca_pem;
    options.cert_pem = creds->cert_pem;
    options.key_pem = creds->key_pem;
    options.token = creds->token;
    server_url = creds->server_url;
  }
  for (const auto& [name, target] :
       {std::pair<const char*, std::string*>{"ca-file", &options.ca_pem},
        {"cert-file", &options.cert_pem},
        {"key-file", &options.key_pem},
        {"token-file", &options.token}}) {
    if (flag(name).empty()) continue;
    auto text = qm::agent::ReadTextFile(flag(name));
    if (!text.ok()) return Usage(std::string(text.status().message()));
    *target = *text;
  }
  while (!options.token.empty() && (options.token.back() == '\n' || options.token.back() == '\r')) {
    options.token.pop_back();
  }
  if (options.cert_pem.empty() != options.key_pem.empty()) {
    return Usage("--cert-file and --key-file go together");
  }
  if (options.cert_pem.empty() && options.token.empty()) {
    return Usage("credentials are required: --kubeconfig, --cert-file/--key-file or --token-file");
  }
  options.server = flag("server");
  if (options.server.empty() && !server_url.empty()) {
    options.server = qm::agent::GrpcTargetForUrl(server_url, 8081);
  }
  if (options.server.empty()) return Usage("--server is required (or a --kubeconfig)");

  std::unique_ptr<qm::agent::DeviceSource> source;
  if (!flag("simulate").empty()) {
    if (!flag("nvml-library").empty())
      return Usage("--simulate and --nvml-library exclude each other");
    if (!flag("mig-strategy").empty()) {
      return Usage("--mig-strategy applies to NVML; simulated GPUs say mig: dynamic in the file");
    }
    source = std::make_unique<qm::agent::SimulatedSource>(flag("simulate"), options.node_name);
  } else {
    auto nvml = qm::agent::NvmlSource::Open(flag("nvml-library", qm::agent::kDefaultNvmlLibrary));
    if (!nvml.ok()) {
      std::fprintf(stderr, "qm-agent: %s\n", std::string(nvml.status().message()).c_str());
      return 2;
    }
    auto strategy = qm::agent::ParseMigStrategy(flag("mig-strategy", "static"));
    if (!strategy.ok()) return Usage("--mig-strategy: " + std::string(strategy.status().message()));
    if (auto st = (*nvml)->SetMigStrategy(*strategy); !st.ok()) {
      std::fprintf(stderr, "qm-agent: %s\n", std::string(st.message()).c_str());
      return 2;
    }
    source = std::move(*nvml);
  }
  // Fail fast on a bad file or a driver that does not answer instead of retrying forever.
  if (auto inv = source->Discover(); !inv.ok()) {
    std::fprintf(stderr, "qm-agent: %s\n", std::string(inv.status().message()).c_str());
    return 2;
  }

  qm::agent::Agent agent(options, std::move(source));
  if (auto st = agent.Init(); !st.ok()) {
    spdlog::critical("{}", std::string(st.message()));
    return 1;
  }
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    spdlog::info("received signal {}, stopping", sig);
    agent.Stop();
  });
  spdlog::info("qm-agent {} for node {} connecting to {}", options.version, options.node_name,
               options.server);
  agent.Run();
  // Run ends only after Stop, which the signal thread called.
  waiter.join();
  spdlog::info("stopped");
  return 0;
}
