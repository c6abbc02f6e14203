// Server-side printing: the columns and cells kubectl shows, per kind.
#include "api/rest/table.h"

#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/resource_types.h"

namespace qm::api {
namespace {

using nlohmann::json;

// 2026-11-22T02:06:17Z.
const std::chrono::system_clock::time_point kNow{std::chrono::seconds(1795313177)};

const model::ResourceType& Core(const std::string& kind) {
  const model::ResourceType* type = model::FindResourceTypeByKind("", kind);
  EXPECT_NE(type, nullptr) << kind;
  return *type;
}

std::vector<std::string> ColumnNames(const model::ResourceType& type, int priority) {
  std::vector<std::string> names;
  for (const json& c : TableColumns(type)) {
    if (c["priority"] == priority) names.push_back(c["name"]);
  }
  return names;
}

json Cells(const std::string& kind, const char* obj) {
  return TableRow(Core(kind), json::parse(obj), kNow)["cells"];
}

TEST(PodTableTest, ColumnsAsKubectlShowsThem) {
  EXPECT_EQ(ColumnNames(Core("Pod"), 0),
            (std::vector<std::string>{"Name", "Ready", "Status", "Restarts", "Age"}));
  EXPECT_EQ(ColumnNames(Core("Pod"), 1),
            (std::vector<std::string>{"IP", "Node", "Nominated Node", "Readiness Gates"}));
}

TEST(PodTableTest, PendingPod) {
  EXPECT_EQ(Cells("Pod", R"({"metadata":{"name":"pod1","creationTimestamp":"2026-11-22T02:05:17Z"},
      "spec":{"containers":[{"name":"a"},{"name":"b"}]},"status":{"phase":"Pending"}})"),
            json::parse(R"(["pod1","0/2","Pending","0","60s","<none>","<none>","<none>",
                            "<none>"])"));
}

TEST(PodTableTest, RunningBoundPod) {
  EXPECT_EQ(Cells("Pod", R"({"metadata":{"name":"p","creationTimestamp":"2026-11-22T01:06:17Z"},
      "spec":{"nodeName":"gpu-node-a","containers":[{"name":"a"},{"name":"b"}],
              "readinessGates":[{"conditionType":"example.com/ready"}]},
      "status":{"phase":"Running","podIPs":[{"ip":"10.1.0.7"}],"nominatedNodeName":"n2",
        "conditions":[{"type":"example.com/ready","status":"True"}],
        "containerStatuses":[
          {"name":"a","ready":true,"restartCount":2,"state":{"running":{}},
           "lastState":{"terminated":{"finishedAt":"2026-11-22T02:01:17Z"}}},
          {"name":"b","ready":false,"restartCount":1,"state":{"running":{}}}]}})"),
            json::parse(R"j(["p","1/2","Running","3 (5m ago)","60m","10.1.0.7","gpu-node-a",
                             "n2","1/1"])j"));
}

TEST(PodTableTest, StatusFollowsContainerAndInitStates) {
  EXPECT_EQ(Cells("Pod", R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"a"}]},
      "status":{"phase":"Pending","containerStatuses":[
        {"name":"a","state":{"waiting":{"reason":"ContainerCreating"}}}]}})")[2],
            "ContainerCreating");
  EXPECT_EQ(Cells("Pod", R"({"metadata":{"name":"p"},
      "spec":{"containers":[{"name":"a"}],"initContainers":[{"name":"i1"},{"name":"i2"}]},
      "status":{"phase":"Pending","initContainerStatuses":[
        {"name":"i1","state":{"terminated":{"exitCode":0}}},
        {"name":"i2","state":{"running":{}}}]}})")[2],
            "Init:1/2");
  EXPECT_EQ(Cells("Pod", R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"a"}]},
      "status":{"phase":"Pending","conditions":[
        {"type":"PodScheduled","status":"False","reason":"SchedulingGated"}]}})")[2],
            "SchedulingGated");
  EXPECT_EQ(Cells("Pod", R"({"metadata":{"name":"p","deletionTimestamp":"2026-11-22T02:06:00Z"},
      "spec":{"containers":[{"name":"a"}]},"status":{"phase":"Running"}})")[2],
            "Terminating");
  EXPECT_EQ(Cells("Pod", R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"a"}]},
      "status":{"phase":"Failed","reason":"Evicted"}})")[2],
            "Evicted");
}

TEST(PodTableTest, FinishedPodsCarryTheCompletedRowCondition) {
  json row = TableRow(Core("Pod"), json::parse(R"({"metadata":{"name":"p"},
      "spec":{"containers":[{"name":"a"}]},"status":{"phase":"Succeeded"}})"),
                      kNow);
  EXPECT_EQ(row["conditions"][0]["type"], "Completed");
  EXPECT_EQ(row["conditions"][0]["status"], "True");
  row = TableRow(Core("Pod"), json::parse(R"({"metadata":{"name":"p"},
      "spec":{"containers":[{"name":"a"}]},"status":{"phase":"Running"}})"),
                 kNow);
  EXPECT_FALSE(row.contains("conditions"));
  EXPECT_EQ(row["object"]["kind"], "PartialObjectMetadata");
}

TEST(EventTableTest, ColumnsAsKubectlShowsThem) {
  EXPECT_EQ(ColumnNames(Core("Event"), 0),
            (std::vector<std::string>{"Last Seen", "Type", "Reason", "Object", "Message"}));
  EXPECT_EQ(ColumnNames(Core("Event"), 1),
            (std::vector<std::string>{"Subobject", "Source", "First Seen", "Count", "Name"}));
}

TEST(EventTableTest, Cells) {
  EXPECT_EQ(Cells("Event", R"({"metadata":{"name":"pod1.1"},
      "involvedObject":{"kind":"Pod","name":"pod1","fieldPath":"spec.containers{a}"},
      "reason":"FailedScheduling","message":"  0/3 nodes are available \n","type":"Warning",
      "firstTimestamp":"2026-11-22T02:00:17Z","lastTimestamp":"2026-11-22T02:05:47Z","count":4,
      "source":{"component":"qm-scheduler","host":"node-x"}})"),
            json::parse(R"(["30s","Warning","FailedScheduling","pod/pod1","spec.containers{a}",
                            "qm-scheduler, node-x","0/3 nodes are available","6m",4,"pod1.1"])"));
}

TEST(EventTableTest, FallbacksForMissingTimesAndCount) {
  json cells = Cells("Event", R"({"metadata":{"name":"e"},"involvedObject":{"kind":"Node"},
      "reason":"R","reportingComponent":"qm","eventTime":"2026-11-22T02:06:07.000000Z"})");
  EXPECT_EQ(cells[0], "10s");  // last seen falls back to first seen, i.e. eventTime
  EXPECT_EQ(cells[3], "node");
  EXPECT_EQ(cells[5], "qm");
  EXPECT_EQ(cells[7], "10s");
  EXPECT_EQ(cells[8], 1);
  cells = Cells("Event", R"({"metadata":{"name":"e"},"involvedObject":{"kind":"Pod","name":"p"},
      "series":{"count":7,"lastObservedTime":"2026-11-22T02:06:16.000000Z"}})");
  EXPECT_EQ(cells[0], "1s");
  EXPECT_EQ(cells[7], "<unknown>");
  EXPECT_EQ(cells[8], 7);
}

TEST(ResourceQuotaTableTest, RequestAndLimitFromStatus) {
  EXPECT_EQ(ColumnNames(Core("ResourceQuota"), 0),
            (std::vector<std::string>{"Name", "Age", "Request", "Limit"}));
  EXPECT_EQ(Cells("ResourceQuota", R"({"metadata":{"name":"q",
      "creationTimestamp":"2026-11-22T02:06:07Z"},
      "spec":{"hard":{"count/pods":"99"}},
      "status":{"hard":{"count/pods":"10","limits.cpu":"4","requests.nvidia.com/gpu":2,
                        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices":"4000m"},
                "used":{"count/pods":"1","limits.cpu":"500m"}}})"),
            json::parse(R"(["q","10s",
              "count/pods: 1/10, gpu.nvidia.com.deviceclass.resource.k8s.io/devices: 0/4, requests.nvidia.com/gpu: 0/2",
              "limits.cpu: 500m/4"])"));
  // Without a status (no quota controller has seen it yet) both columns are empty.
  EXPECT_EQ(Cells("ResourceQuota", R"({"metadata":{"name":"q"},
      "spec":{"hard":{"count/pods":"10"}}})"),
            json::parse(R"(["q","<unknown>","",""])"));
}

TEST(TableTest, OtherKindsKeepTheirColumns) {
  EXPECT_EQ(ColumnNames(Core("Node"), 0),
            (std::vector<std::string>{"Name", "Status", "Roles", "Age", "Version"}));
  EXPECT_EQ(ColumnNames(Core("Namespace"), 0), (std::vector<std::string>{"Name", "Status", "Age"}));
}

const model::ResourceType& Rbac(const std::string& kind) {
  const model::ResourceType* type = model::FindResourceTypeByKind(model::kRbacGroup, kind);
  EXPECT_NE(type, nullptr) << kind;
  return *type;
}

TEST(RbacTableTest, RolesShowTheirCreationTime) {
  for (const char* kind : {"Role", "ClusterRole"}) {
    EXPECT_EQ(ColumnNames(Rbac(kind), 0), (std::vector<std::string>{"Name", "Created At"}));
    EXPECT_EQ(TableColumns(Rbac(kind))[1]["type"], "date");
    EXPECT_EQ(TableRow(Rbac(kind), json::parse(R"({"metadata":{"name":"r",
                                   "creationTimestamp":"2026-11-22T02:05:17Z"}})"),
                       kNow)["cells"],
              json::parse(R"(["r","2026-11-22T02:05:17Z"])"));
  }
}

TEST(RbacTableTest, BindingsShowRoleAndSubjectsByKind) {
  for (const char* kind : {"RoleBinding", "ClusterRoleBinding"}) {
    EXPECT_EQ(ColumnNames(Rbac(kind), 0), (std::vector<std::string>{"Name", "Role", "Age"}));
    EXPECT_EQ(ColumnNames(Rbac(kind), 1),
              (std::vector<std::string>{"Users", "Groups", "ServiceAccounts"}));
  }
  EXPECT_EQ(TableRow(Rbac("RoleBinding"), json::parse(R"({
      "metadata":{"name":"b","namespace":"team-a","creationTimestamp":"2026-11-22T02:05:17Z"},
      "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"},
      "subjects":[{"kind":"User","name":"alice"},{"kind":"User","name":"bob"},
                  {"kind":"Group","name":"devs"},{"kind":"ServiceAccount","name":"ci"},
                  {"kind":"ServiceAccount","name":"deployer","namespace":"tools"}]})"),
                     kNow)["cells"],
            json::parse(R"(["b","ClusterRole/view","60s","alice, bob","devs",
                            "ci, tools/deployer"])"));
}

TEST(ServiceAccountTableTest, CountsSecrets) {
  EXPECT_EQ(ColumnNames(Core("ServiceAccount"), 0),
            (std::vector<std::string>{"Name", "Secrets", "Age"}));
  EXPECT_EQ(Cells("ServiceAccount", R"({"metadata":{"name":"ci",
      "creationTimestamp":"2026-11-22T02:05:17Z"},"secrets":[{"name":"a"},{"name":"b"}]})"),
            json::parse(R"(["ci",2,"60s"])"));
}

}  // namespace
}  // namespace qm::api
