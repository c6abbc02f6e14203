#include "config/options.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <functional>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"

namespace qm::config {
namespace {

struct Setting {
  const char* name;  // flag name without dashes; env is QM_ + upper-case with '_'
  const char* help;
  std::function<absl::Status(ServerOptions&, const std::string&)> set;
};

absl::Status ParseInt(const std::string& name, const std::string& v, int64_t min, int64_t* out) {
  if (!absl::SimpleAtoi(v, out) || *out < min) {
    return absl::InvalidArgumentError("--" + name + ": want an integer >= " + std::to_string(min) +
                                      ", got \"" + v + "\"");
  }
  return absl::OkStatus();
}

absl::Status ParseBool(const std::string& name, const std::string& v, bool* out) {
  if (v == "true" || v == "1" || v == "yes" || v.empty()) {
    *out = true;
  } else if (v == "false" || v == "0" || v == "no") {
    *out = false;
  } else {
    return absl::InvalidArgumentError("--" + name + ": want true or false, got \"" + v + "\"");
  }
  return absl::OkStatus();
}

// A retention: <n>d, <n>h or <n>m (n >= 1), or 0 for forever.
absl::Status ParseRetention(const std::string& name, const std::string& v, int64_t* seconds) {
  if (v == "0") {
    *seconds = 0;
    return absl::OkStatus();
  }
  int64_t n = 0;
  int64_t unit = 0;
  if (!v.empty()) {
    unit = v.back() == 'd' ? 86400 : v.back() == 'h' ? 3600 : v.back() == 'm' ? 60 : 0;
  }
  if (unit == 0 || !absl::SimpleAtoi(v.substr(0, v.size() - 1), &n) || n < 1 ||
      n > 100LL * 365 * 86400 / unit) {
    return absl::InvalidArgumentError(
        name + ": want a duration like 30d, 720h or 90m (or 0), got \"" + v + "\"");
  }
  *seconds = n * unit;
  return absl::OkStatus();
}

absl::Status CheckAddress(const std::string& name, const std::string& v) {
  auto colon = v.rfind(':');
  int64_t port;
  if (colon == std::string::npos || colon == 0 || !absl::SimpleAtoi(v.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError("--" + name + ": want host:port, got \"" + v + "\"");
  }
  return absl::OkStatus();
}

const std::vector<Setting>& Settings() {
  static const auto* settings = new std::vector<Setting>{
      {"http-addr", "REST API, UI, metrics and health address (host:port; port 0 picks one)",
       [](ServerOptions& o, const std::string& v) {
         o.http_addr = v;
         return CheckAddress("http-addr", v);
       }},
      {"grpc-addr", "node-agent gRPC address (host:port)",
       [](ServerOptions& o, const std::string& v) {
         o.grpc_addr = v;
         return CheckAddress("grpc-addr", v);
       }},
      {"data-dir", "directory for the embedded PostgreSQL cluster and local state",
       [](ServerOptions& o, const std::string& v) {
         if (v.empty()) return absl::InvalidArgumentError("--data-dir must not be empty");
         o.data_dir = v;
         return absl::OkStatus();
       }},
      {"database-url",
       "libpq URL or key=value string of an existing PostgreSQL; empty runs an embedded one",
       [](ServerOptions& o, const std::string& v) {
         o.database_url = v;
         return absl::OkStatus();
       }},
      {"pg-bin-dir", "directory with initdb and pg_ctl for the embedded PostgreSQL",
       [](ServerOptions& o, const std::string& v) {
         o.pg_bin_dir = v;
         return absl::OkStatus();
       }},
      {"log-level", "trace, debug, info, warn, error or off",
       [](ServerOptions& o, const std::string& v) {
         static const char* kLevels[] = {"trace", "debug", "info", "warn", "error", "off"};
         for (const char* l : kLevels) {
           if (v == l) {
             o.log_level = v;
             return absl::OkStatus();
           }
         }
         return absl::InvalidArgumentError(
             "--log-level: want trace|debug|info|warn|error|off, "
             "got \"" +
             v + "\"");
       }},
      {"log-format", "text or json (one JSON object per line)",
       [](ServerOptions& o, const std::string& v) {
         if (v != "text" && v != "json") {
           return absl::InvalidArgumentError("--log-format: want text or json, got \"" + v + "\"");
         }
         o.log_format = v;
         return absl::OkStatus();
       }},
      {"sample-inventory",
       "load the sample nodes, ResourceSlices and DeviceClasses at start (true/false)",
       [](ServerOptions& o, const std::string& v) {
         return ParseBool("sample-inventory", v, &o.sample_inventory);
       }},
      {"scheduler", "run the scheduler and the claim controllers in this process (true/false)",
       [](ServerOptions& o, const std::string& v) {
         return ParseBool("scheduler", v, &o.scheduler);
       }},
      {"db-pool-size", "PostgreSQL connections in the pool",
       [](ServerOptions& o, const std::string& v) {
         int64_t n;
         auto st = ParseInt("db-pool-size", v, 1, &n);
         o.db_pool_size = static_cast<int>(n);
         return st;
       }},
      {"watch-history", "change-log entries kept so watches can resume (older: 410 Expired)",
       [](ServerOptions& o, const std::string& v) {
         return ParseInt("watch-history", v, 1, &o.watch_history);
       }},
      {"tls-cert-file", "serving certificate (PEM); empty: generated under <data-dir>/pki",
       [](ServerOptions& o, const std::string& v) {
         o.tls_cert_file = v;
         return absl::OkStatus();
       }},
      {"tls-private-key-file", "private key of --tls-cert-file (PEM)",
       [](ServerOptions& o, const std::string& v) {
         o.tls_private_key_file = v;
         return absl::OkStatus();
       }},
      {"client-ca-file",
       "CA bundle (PEM) that signs client certificates (CN = user, O = groups); empty with "
       "generated certificates: the generated CA",
       [](ServerOptions& o, const std::string& v) {
         o.client_ca_file = v;
         return absl::OkStatus();
       }},
      {"advertise-address",
       "host name or IP clients use to reach this server: added to the generated certificate",
       [](ServerOptions& o, const std::string& v) {
         o.advertise_address = v;
         return absl::OkStatus();
       }},
      {"insecure-http", "serve plain HTTP instead of TLS (loopback addresses only; true/false)",
       [](ServerOptions& o, const std::string& v) {
         return ParseBool("insecure-http", v, &o.insecure_http);
       }},
      {"token-auth-file", "static bearer tokens, CSV lines token,user,uid,\"group1,group2\"",
       [](ServerOptions& o, const std::string& v) {
         o.token_auth_file = v;
         return absl::OkStatus();
       }},
      {"web-root", "directory of the web UI's built files, served at / (none: no UI)",
       [](ServerOptions& o, const std::string& v) {
         o.web_root = v;
         return absl::OkStatus();
       }},
      {"audit-retention", "how long audit records are kept: <n>d, <n>h, <n>m or 0 (forever)",
       [](ServerOptions& o, const std::string& v) {
         return ParseRetention("--audit-retention", v, &o.audit_retention_seconds);
       }},
      {"allocation-history-retention",
       "how long the allocation history behind the utilization charts is kept: <n>d, <n>h, <n>m "
       "or 0 (forever)",
       [](ServerOptions& o, const std::string& v) {
         return ParseRetention("--allocation-history-retention", v,
                               &o.allocation_history_retention_seconds);
       }},
      {"node-monitor-grace-period",
       "how long an agent's node may go without a heartbeat before it is Ready=Unknown and "
       "tainted node.kubernetes.io/unreachable: <n>ms, <n>s, <n>m or <n>h",
       [](ServerOptions& o, const std::string& v) {
         int64_t n = 0;
         int64_t unit = 0;
         std::string digits = v;
         if (absl::EndsWith(v, "ms")) {
           unit = 1;
           digits = v.substr(0, v.size() - 2);
         } else if (!v.empty()) {
           unit = v.back() == 'h' ? 3600000 : v.back() == 'm' ? 60000 : v.back() == 's' ? 1000 : 0;
           digits = v.substr(0, v.size() - 1);
         }
         if (unit == 0 || !absl::SimpleAtoi(digits, &n) || n < 1) {
           return absl::InvalidArgumentError(
               "--node-monitor-grace-period: want a duration like 40s, 500ms or 2m, got \"" + v +
               "\"");
         }
         o.node_monitor_grace_period_ms = n * unit;
         return absl::OkStatus();
       }},
      {"default-unreachable-toleration-seconds",
       "tolerationSeconds of the node.kubernetes.io/not-ready and unreachable NoExecute "
       "tolerations added to every new pod that has none",
       [](ServerOptions& o, const std::string& v) {
         return ParseInt("default-unreachable-toleration-seconds", v, 0,
                         &o.default_unreachable_toleration_seconds);
       }},
      {"max-requests-inflight",
       "requests handled at once (watches excluded); more get 429 with Retry-After",
       [](ServerOptions& o, const std::string& v) {
         int64_t n;
         auto st = ParseInt("max-requests-inflight", v, 1, &n);
         o.max_requests_inflight = static_cast<int>(n);
         return st;
       }},
      {"max-connections", "open connections; more get 503",
       [](ServerOptions& o, const std::string& v) {
         int64_t n;
         auto st = ParseInt("max-connections", v, 1, &n);
         o.max_connections = static_cast<int>(n);
         return st;
       }},
      {"max-devices-per-slice",
       "devices one ResourceSlice may list (half as many when devices use taints, counters or "
       "list attributes); Kubernetes' limit by default, raise it for nodes with more devices",
       [](ServerOptions& o, const std::string& v) {
         return ParseInt("max-devices-per-slice", v, 2, &o.max_devices_per_slice);
       }},
      {"max-results-per-claim",
       "devices one ResourceClaim may be allocated (status.allocation.devices.results, and what "
       "the scheduler allocates); Kubernetes' limit by default",
       [](ServerOptions& o, const std::string& v) {
         return ParseInt("max-results-per-claim", v, 1, &o.max_results_per_claim);
       }},
  };
  return *settings;
}

const Setting* FindSetting(const std::string& name) {
  for (const auto& s : Settings()) {
    if (name == s.name) return &s;
  }
  return nullptr;
}

std::string EnvName(const std::string& name) {
  std::string out = "QM_";
  for (char c : name) out += c == '-' ? '_' : static_cast<char>(std::toupper(c));
  return out;
}

absl::Status ApplyFile(const std::string& path, ServerOptions& o) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError("--config: cannot read " + path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    std::string t(absl::StripAsciiWhitespace(line));
    if (t.empty() || t[0] == '#') continue;
    auto eq = t.find('=');
    if (eq == std::string::npos) {
      return absl::InvalidArgumentError(path + ":" + std::to_string(n) + ": want name = value");
    }
    std::string key(absl::StripAsciiWhitespace(t.substr(0, eq)));
    std::string value(absl::StripAsciiWhitespace(t.substr(eq + 1)));
    const Setting* s = FindSetting(key);
    if (s == nullptr) {
      return absl::InvalidArgumentError(path + ":" + std::to_string(n) + ": unknown setting \"" +
                                        key + "\"");
    }
    if (auto st = s->set(o, value); !st.ok()) {
      return absl::InvalidArgumentError(path + ":" + std::to_string(n) + ": " +
                                        std::string(st.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string ServerHelp() {
  std::string out =
      "quartermaster: central allocation service for GPUs and other accelerators.\n\n"
      "Usage: quartermaster [flags]\n\n"
      "Each setting comes from, in increasing precedence: its default, the --config file\n"
      "(lines of `name = value`), the environment variable QM_<NAME>, the flag.\n\n"
      "Flags:\n"
      "  --config=PATH                 settings file\n";
  ServerOptions defaults;
  std::map<std::string, std::string> shown = {
      {"http-addr", defaults.http_addr},
      {"grpc-addr", defaults.grpc_addr},
      {"data-dir", defaults.data_dir},
      {"database-url", "(embedded)"},
      {"pg-bin-dir", "(search)"},
      {"log-level", defaults.log_level},
      {"log-format", defaults.log_format},
      {"sample-inventory", "false"},
      {"scheduler", "true"},
      {"db-pool-size", std::to_string(defaults.db_pool_size)},
      {"watch-history", std::to_string(defaults.watch_history)},
      {"tls-cert-file", "(generated)"},
      {"tls-private-key-file", "(generated)"},
      {"client-ca-file", "(generated CA)"},
      {"advertise-address", "(none)"},
      {"insecure-http", "false"},
      {"token-auth-file", "(none)"},
      {"web-root", "(../web next to the binary)"},
      {"audit-retention", "30d"},
      {"allocation-history-retention", "30d"},
      {"node-monitor-grace-period", "40s"},
      {"default-unreachable-toleration-seconds",
       std::to_string(defaults.default_unreachable_toleration_seconds)},
      {"max-requests-inflight", std::to_string(defaults.max_requests_inflight)},
      {"max-connections", std::to_string(defaults.max_connections)},
      {"max-devices-per-slice", std::to_string(defaults.max_devices_per_slice)},
      {"max-results-per-claim", std::to_string(defaults.max_results_per_claim)},
  };
  for (const auto& s : Settings()) {
    std::string flag = "  --" + std::string(s.name) + "=VALUE";
    flag.resize(std::max<size_t>(flag.size() + 1, 32), ' ');
    out += flag + s.help + "\n" + std::string(32, ' ') + "default: " + shown[s.name] + "; env " +
           EnvName(s.name) + "\n";
  }
  out += "  --help                        show this text\n";
  return out;
}

absl::StatusOr<ServerOptions> LoadServerOptions(const std::vector<std::string>& args,
                                                const std::vector<std::string>& environ) {
  ServerOptions o;
  // Flags are parsed first (to find --config and --help) and applied last.
  std::vector<std::pair<std::string, std::string>> flags;
  std::string config_file;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") return absl::NotFoundError(ServerHelp());
    if (a.rfind("--", 0) != 0) {
      return absl::InvalidArgumentError("unexpected argument \"" + a + "\" (see --help)");
    }
    std::string name = a.substr(2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (name != "config" && FindSetting(name) == nullptr) {
      return absl::InvalidArgumentError("unknown flag --" + name + " (see --help)");
    }
    if (!has_value && name != "sample-inventory" && name != "scheduler" &&
        name != "insecure-http") {
      if (i + 1 >= args.size()) return absl::InvalidArgumentError("--" + name + " needs a value");
      value = args[++i];
    } else if (!has_value) {
      value = "true";
    }
    if (name == "config") {
      config_file = value;
    } else {
      flags.emplace_back(name, value);
    }
  }
  if (!config_file.empty()) {
    if (auto st = ApplyFile(config_file, o); !st.ok()) return st;
  }
  for (const auto& s : Settings()) {
    const std::string prefix = EnvName(s.name) + "=";
    for (const auto& e : environ) {
      if (e.rfind(prefix, 0) == 0) {
        if (auto st = s.set(o, e.substr(prefix.size())); !st.ok()) {
          return absl::InvalidArgumentError(EnvName(s.name) + ": " + std::string(st.message()));
        }
      }
    }
  }
  for (const auto& [name, value] : flags) {
    if (auto st = FindSetting(name)->set(o, value); !st.ok()) return st;
  }
  if (o.tls_cert_file.empty() != o.tls_private_key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert-file and --tls-private-key-file go together: give both or neither");
  }
  if (o.insecure_http) {
    std::string host = o.http_addr.substr(0, o.http_addr.rfind(':'));
    bool loopback =
        host == "localhost" || host == "[::1]" || host == "::1" || host.rfind("127.", 0) == 0;
    if (!loopback) {
      return absl::InvalidArgumentError(
          "--insecure-http serves plain HTTP and is allowed only on a loopback --http-addr "
          "(127.0.0.1, ::1 or localhost), got \"" +
          host + "\"");
    }
    // The node-agent port follows: without TLS it, too, serves only this machine.
    std::string grpc_host = o.grpc_addr.substr(0, o.grpc_addr.rfind(':'));
    if (!(grpc_host == "localhost" || grpc_host == "[::1]" || grpc_host == "::1" ||
          grpc_host.rfind("127.", 0) == 0)) {
      return absl::InvalidArgumentError(
          "--insecure-http also serves the node-agent gRPC API without TLS and needs a loopback "
          "--grpc-addr (127.0.0.1, ::1 or localhost), got \"" +
          grpc_host + "\"");
    }
  }
  return o;
}

}  // namespace qm::config
