#include "config/options.h"

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"

namespace qm::config {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using Args = std::vector<std::string>;

// Writes `content` to a fresh file under the test's temporary directory.
std::string WriteConfig(const std::string& name, const std::string& content) {
  std::string path = ::testing::TempDir() + "/qm_options_test_" + name + ".conf";
  std::ofstream out(path, std::ios::trunc);
  out << content;
  return path;
}

ServerOptions MustLoad(const Args& args, const Args& env = {}) {
  absl::StatusOr<ServerOptions> o = LoadServerOptions(args, env);
  EXPECT_TRUE(o.ok()) << o.status();
  return o.ok() ? *o : ServerOptions();
}

// absl::string_view is not std::string here; messages are compared as std::string.
std::string Msg(const absl::Status& st) { return std::string(st.message()); }

// The status of a load that must fail.
absl::Status LoadError(const Args& args, const Args& env = {}) {
  absl::StatusOr<ServerOptions> o = LoadServerOptions(args, env);
  EXPECT_FALSE(o.ok());
  return o.status();
}

TEST(OptionsTest, DefaultsWithoutFileEnvOrFlags) {
  ServerOptions o = MustLoad({});
  EXPECT_EQ(o.http_addr, "127.0.0.1:8080");
  EXPECT_EQ(o.grpc_addr, "127.0.0.1:8081");
  EXPECT_EQ(o.data_dir, "qm-data");
  EXPECT_EQ(o.database_url, "");
  EXPECT_EQ(o.pg_bin_dir, "");
  EXPECT_EQ(o.log_level, "info");
  EXPECT_EQ(o.log_format, "text");
  EXPECT_FALSE(o.sample_inventory);
  EXPECT_EQ(o.db_pool_size, 16);
  EXPECT_EQ(o.watch_history, 100000);
}

TEST(OptionsTest, RetentionsTakeDaysHoursMinutesOrZero) {
  ServerOptions o = MustLoad({});
  EXPECT_EQ(o.audit_retention_seconds, 30 * 86400);
  EXPECT_EQ(o.allocation_history_retention_seconds, 30 * 86400);
  o = MustLoad({"--audit-retention=12h", "--allocation-history-retention=90m"});
  EXPECT_EQ(o.audit_retention_seconds, 12 * 3600);
  EXPECT_EQ(o.allocation_history_retention_seconds, 90 * 60);
  o = MustLoad({"--allocation-history-retention=0"}, {"QM_AUDIT_RETENTION=7d"});
  EXPECT_EQ(o.allocation_history_retention_seconds, 0);
  EXPECT_EQ(o.audit_retention_seconds, 7 * 86400);
  for (const char* bad : {"5x", "d", "0d", "-1d", "1.5d", "99999999999d"}) {
    EXPECT_EQ(Msg(LoadError({std::string("--allocation-history-retention=") + bad})),
              std::string("--allocation-history-retention: want a duration like 30d, 720h or "
                          "90m (or 0), got \"") +
                  bad + "\"");
  }
}

TEST(OptionsTest, DraLimitsDefaultToKubernetesAndCanBeRaised) {
  ServerOptions o = MustLoad({});
  EXPECT_EQ(o.max_devices_per_slice, 128);
  EXPECT_EQ(o.max_results_per_claim, 32);
  o = MustLoad({"--max-devices-per-slice=1024"}, {"QM_MAX_RESULTS_PER_CLAIM=256"});
  EXPECT_EQ(o.max_devices_per_slice, 1024);
  EXPECT_EQ(o.max_results_per_claim, 256);
  EXPECT_EQ(Msg(LoadError({"--max-devices-per-slice=1"})),
            "--max-devices-per-slice: want an integer >= 2, got \"1\"");
  EXPECT_EQ(Msg(LoadError({"--max-results-per-claim=lots"})),
            "--max-results-per-claim: want an integer >= 1, got \"lots\"");
}

TEST(OptionsTest, FlagsWithEqualsSetEveryOption) {
  ServerOptions o =
      MustLoad({"--http-addr=0.0.0.0:0", "--grpc-addr=[::1]:9000", "--data-dir=/var/lib/qm",
                "--database-url=postgres://db/qm", "--pg-bin-dir=/usr/lib/postgresql/15/bin",
                "--log-level=debug", "--log-format=json", "--sample-inventory=true",
                "--db-pool-size=8", "--watch-history=500"});
  EXPECT_EQ(o.http_addr, "0.0.0.0:0");
  EXPECT_EQ(o.grpc_addr, "[::1]:9000");
  EXPECT_EQ(o.data_dir, "/var/lib/qm");
  EXPECT_EQ(o.database_url, "postgres://db/qm");
  EXPECT_EQ(o.pg_bin_dir, "/usr/lib/postgresql/15/bin");
  EXPECT_EQ(o.log_level, "debug");
  EXPECT_EQ(o.log_format, "json");
  EXPECT_TRUE(o.sample_inventory);
  EXPECT_EQ(o.db_pool_size, 8);
  EXPECT_EQ(o.watch_history, 500);
}

TEST(OptionsTest, FlagsTakeValueFromNextArgument) {
  ServerOptions o =
      MustLoad({"--http-addr", "0.0.0.0:9999", "--db-pool-size", "3", "--log-level", "warn"});
  EXPECT_EQ(o.http_addr, "0.0.0.0:9999");
  EXPECT_EQ(o.db_pool_size, 3);
  EXPECT_EQ(o.log_level, "warn");
}

TEST(OptionsTest, EmptyValueAfterEqualsIsAValue) {
  ServerOptions o = MustLoad({"--database-url=postgres://x", "--database-url="});
  EXPECT_EQ(o.database_url, "");
}

TEST(OptionsTest, BareSampleInventoryMeansTrue) {
  ServerOptions o = MustLoad({"--sample-inventory", "--log-level=warn"});
  EXPECT_TRUE(o.sample_inventory);
  EXPECT_EQ(o.log_level, "warn");  // the next argument was not taken as its value
  EXPECT_FALSE(MustLoad({"--sample-inventory=false"}).sample_inventory);
  EXPECT_FALSE(MustLoad({"--sample-inventory=0"}).sample_inventory);
}

TEST(OptionsTest, SchedulerRunsUnlessTurnedOff) {
  EXPECT_TRUE(MustLoad({}).scheduler);
  EXPECT_FALSE(MustLoad({"--scheduler=false"}).scheduler);
  ServerOptions o = MustLoad({"--scheduler", "--log-level=warn"});
  EXPECT_TRUE(o.scheduler);
  EXPECT_EQ(o.log_level, "warn");
}

TEST(OptionsTest, LaterFlagWins) {
  EXPECT_EQ(MustLoad({"--log-level=debug", "--log-level=error"}).log_level, "error");
}

TEST(OptionsTest, EnvironmentOverridesDefaults) {
  ServerOptions o = MustLoad({}, {"PATH=/bin", "QM_LOG_LEVEL=warn", "QM_DB_POOL_SIZE=5",
                                  "QM_SAMPLE_INVENTORY=true", "QM_HTTP_ADDR=0.0.0.0:80"});
  EXPECT_EQ(o.log_level, "warn");
  EXPECT_EQ(o.db_pool_size, 5);
  EXPECT_TRUE(o.sample_inventory);
  EXPECT_EQ(o.http_addr, "0.0.0.0:80");
}

TEST(OptionsTest, EnvironmentNeedsExactVariableName) {
  ServerOptions o = MustLoad({}, {"QM_LOG_LEVELX=warn", "XQM_LOG_LEVEL=warn", "qm_log_level=warn"});
  EXPECT_EQ(o.log_level, "info");
}

TEST(OptionsTest, PrecedenceIsFileThenEnvironmentThenFlags) {
  std::string path = WriteConfig("precedence",
                                 "# settings\n"
                                 "\n"
                                 "log-level = debug\n"
                                 "  log-format = json  \n"
                                 "data-dir=/from/file\n"
                                 "db-pool-size = 7\n");
  ServerOptions o = MustLoad({"--config=" + path, "--log-level=error"},
                             {"QM_LOG_LEVEL=warn", "QM_DATA_DIR=/from/env"});
  EXPECT_EQ(o.log_level, "error");           // flag > env > file
  EXPECT_EQ(o.data_dir, "/from/env");        // env > file
  EXPECT_EQ(o.log_format, "json");           // file > default
  EXPECT_EQ(o.db_pool_size, 7);              // file > default
  EXPECT_EQ(o.http_addr, "127.0.0.1:8080");  // default
}

TEST(OptionsTest, ConfigFlagTakesSeparateValueToo) {
  std::string path = WriteConfig("separate", "watch-history = 9\n");
  EXPECT_EQ(MustLoad({"--config", path}).watch_history, 9);
}

TEST(OptionsTest, BadPortIsInvalidArgumentNamingFlag) {
  absl::Status st = LoadError({"--http-addr=127.0.0.1:70000"});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Msg(st), "--http-addr: want host:port, got \"127.0.0.1:70000\"");
  EXPECT_THAT(Msg(LoadError({"--grpc-addr=localhost"})), StartsWith("--grpc-addr:"));
  EXPECT_THAT(Msg(LoadError({"--grpc-addr=:80"})), StartsWith("--grpc-addr:"));
  EXPECT_THAT(Msg(LoadError({"--http-addr=h:-1"})), StartsWith("--http-addr:"));
}

TEST(OptionsTest, InsecureHttpKeepsTheNodeAgentPortOnLoopbackToo) {
  EXPECT_THAT(
      Msg(LoadError({"--insecure-http", "--http-addr=127.0.0.1:0", "--grpc-addr=0.0.0.0:8081"})),
      StartsWith("--insecure-http also serves the node-agent gRPC API without TLS"));
  auto o = LoadServerOptions({"--insecure-http", "--grpc-addr=[::1]:0"}, {});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->grpc_addr, "[::1]:0");
}

TEST(OptionsTest, BadLogLevelIsInvalidArgumentNamingFlag) {
  absl::Status st = LoadError({"--log-level=loud"});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Msg(st), "--log-level: want trace|debug|info|warn|error|off, got \"loud\"");
  EXPECT_THAT(Msg(LoadError({"--log-format=xml"})), StartsWith("--log-format:"));
}

TEST(OptionsTest, BadNumbersAreInvalidArgumentNamingFlag) {
  absl::Status st = LoadError({"--db-pool-size=0"});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Msg(st), "--db-pool-size: want an integer >= 1, got \"0\"");
  EXPECT_THAT(Msg(LoadError({"--db-pool-size=many"})), StartsWith("--db-pool-size:"));
  EXPECT_THAT(Msg(LoadError({"--watch-history=-5"})), StartsWith("--watch-history:"));
  EXPECT_THAT(Msg(LoadError({"--sample-inventory=maybe"})), StartsWith("--sample-inventory:"));
  EXPECT_EQ(Msg(LoadError({"--data-dir="})), "--data-dir must not be empty");
}

TEST(OptionsTest, BadEnvironmentValueNamesVariableAndFlag) {
  absl::Status st = LoadError({}, {"QM_LOG_LEVEL=loud"});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Msg(st),
            "QM_LOG_LEVEL: --log-level: want trace|debug|info|warn|error|off, got \"loud\"");
}

TEST(OptionsTest, BadFileValueNamesFileLineAndFlag) {
  std::string path = WriteConfig("bad_value", "log-level = info\ndb-pool-size = 0\n");
  absl::Status st = LoadError({"--config=" + path});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Msg(st), path + ":2: --db-pool-size: want an integer >= 1, got \"0\"");
}

TEST(OptionsTest, FileRejectsUnknownSettingAndMalformedLine) {
  std::string unknown = WriteConfig("unknown", "colour = blue\n");
  EXPECT_EQ(Msg(LoadError({"--config=" + unknown})), unknown + ":1: unknown setting \"colour\"");
  std::string malformed = WriteConfig("malformed", "# ok\nlog-level debug\n");
  EXPECT_EQ(Msg(LoadError({"--config=" + malformed})), malformed + ":2: want name = value");
}

TEST(OptionsTest, UnreadableConfigFileIsInvalidArgument) {
  std::string path = ::testing::TempDir() + "/qm_options_test_does_not_exist.conf";
  std::remove(path.c_str());
  absl::Status st = LoadError({"--config=" + path});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Msg(st), "--config: cannot read " + path);
}

TEST(OptionsTest, UnknownFlagIsInvalidArgument) {
  absl::Status st = LoadError({"--colour=blue"});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Msg(st), "unknown flag --colour (see --help)");
}

TEST(OptionsTest, PositionalArgumentIsInvalidArgument) {
  absl::Status st = LoadError({"serve"});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Msg(st), "unexpected argument \"serve\" (see --help)");
  // A bool flag does not consume the next argument.
  EXPECT_EQ(Msg(LoadError({"--sample-inventory", "false"})),
            "unexpected argument \"false\" (see --help)");
}

TEST(OptionsTest, FlagWithoutValueIsInvalidArgument) {
  absl::Status st = LoadError({"--data-dir"});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Msg(st), "--data-dir needs a value");
}

TEST(OptionsTest, HelpIsNotFoundCarryingHelpText) {
  for (const char* flag : {"--help", "-h"}) {
    absl::Status st = LoadError({"--log-level=debug", flag});
    EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << flag;
    EXPECT_EQ(Msg(st), ServerHelp()) << flag;
  }
}

TEST(OptionsTest, HelpWinsOverLaterBadFlags) {
  EXPECT_EQ(LoadError({"--help", "--bogus"}).code(), absl::StatusCode::kNotFound);
}

TEST(OptionsTest, HelpTextNamesEveryFlagAndVariable) {
  absl::Status st = LoadError({"--help"});
  std::string help(st.message());
  for (const char* name :
       {"config", "http-addr", "grpc-addr", "data-dir", "database-url", "pg-bin-dir", "log-level",
        "log-format", "sample-inventory", "db-pool-size", "watch-history", "help"}) {
    EXPECT_THAT(help, HasSubstr(std::string("--") + name)) << name;
  }
  for (const char* env : {"QM_HTTP_ADDR", "QM_GRPC_ADDR", "QM_DATA_DIR", "QM_DATABASE_URL",
                          "QM_PG_BIN_DIR", "QM_LOG_LEVEL", "QM_LOG_FORMAT", "QM_SAMPLE_INVENTORY",
                          "QM_DB_POOL_SIZE", "QM_WATCH_HISTORY"}) {
    EXPECT_THAT(help, HasSubstr(env)) << env;
  }
  EXPECT_THAT(help, HasSubstr("default: 127.0.0.1:8080"));
  EXPECT_THAT(help, HasSubstr("default: 16"));
}

}  // namespace
}  // namespace qm::config
