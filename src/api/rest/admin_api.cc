#include "api/rest/admin_api.h"

#include <cctype>
#include <cstdio>
#include <map>
#include <set>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "api/rest/discovery.h"
#include "api/rest/schema.h"
#include "api/rest/status.h"
#include "model/field_error.h"
#include "model/resource_types.h"
#include "nlohmann/json.hpp"
#include "service/device_match.h"
#include "service/utilization.h"

namespace qm::api {
namespace {

using nlohmann::json;

constexpr char kReviewKind[] = "DeviceMatchReview";
constexpr char kReviewResource[] = "devicematchreviews";
constexpr char kUtilizationKind[] = "UtilizationHistoryReview";
constexpr char kUtilizationResource[] = "utilizationhistoryreviews";
constexpr char kDeviceHistoryKind[] = "DeviceAllocationHistoryReview";
constexpr char kDeviceHistoryResource[] = "deviceallocationhistoryreviews";
constexpr int64_t kDefaultHistoryEvents = 200;
constexpr int64_t kMaxHistoryEvents = 5000;
constexpr int64_t kMaxBuckets = 1000;
// Groups x buckets at most in one answer (5,000 nodes at 200 buckets).
constexpr int64_t kMaxValues = 1'000'000;
constexpr int64_t kMaxRangeSeconds = 400LL * 24 * 3600;
constexpr size_t kDefaultLimit = 500;
constexpr size_t kMaxLimit = 5000;
constexpr size_t kMaxSelectors = 32;

std::string GroupVersion() { return absl::StrCat(kAdminGroup, "/", kAdminVersion); }
std::string GroupPath() { return absl::StrCat("/apis/", kAdminGroup); }
std::string VersionPath() { return absl::StrCat(GroupPath(), "/", kAdminVersion); }

HttpResponse Json(int code, const json& body) {
  return HttpResponse{code, "application/json", ResponseText(body), {}};
}

HttpResponse Error(const HttpError& e) { return Json(e.code, e.status); }

// An attribute as the API writes it ({"string": ...}, {"ints": [...]}, ...).
json EncodeAttribute(const model::AttributeValue& value) {
  struct Visitor {
    json operator()(std::monostate) const { return json::object(); }
    json operator()(int64_t v) const { return {{"int", v}}; }
    json operator()(bool v) const { return {{"bool", v}}; }
    json operator()(const std::string& v) const { return {{"string", v}}; }
    json operator()(const model::Version& v) const { return {{"version", v.value}}; }
    json operator()(const std::vector<int64_t>& v) const { return {{"ints", v}}; }
    json operator()(const std::vector<bool>& v) const { return {{"bools", v}}; }
    json operator()(const std::vector<std::string>& v) const { return {{"strings", v}}; }
    json operator()(const std::vector<model::Version>& v) const {
      json out = json::array();
      for (const auto& x : v) out.push_back(x.value);
      return {{"versions", out}};
    }
  };
  return std::visit(Visitor{}, value);
}

json EncodeDevice(const service::MatchedDevice& d) {
  json out = {{"driver", d.driver}, {"pool", d.pool}, {"device", d.name}};
  if (!d.node_name.empty()) out["nodeName"] = d.node_name;
  if (d.all_nodes) out["allNodes"] = true;
  json attributes = json::object();
  for (const auto& [name, value] : d.attributes) attributes[name] = EncodeAttribute(value);
  out["attributes"] = std::move(attributes);
  json capacity = json::object();
  for (const auto& [name, c] : d.capacity) capacity[name] = {{"value", c.value.String()}};
  out["capacity"] = std::move(capacity);
  if (!d.taints.empty()) {
    json taints = json::array();
    for (const auto& t : d.taints) {
      json taint = {{"key", t.key}, {"effect", t.effect}};
      if (!t.value.empty()) taint["value"] = t.value;
      taints.push_back(std::move(taint));
    }
    out["taints"] = std::move(taints);
  }
  if (!d.allocated_to.empty()) out["allocatedTo"] = d.allocated_to;
  return out;
}

// The kind and apiVersion of a review body, when given, must be these.
void CheckTypeMeta(const json& body, const char* kind, model::FieldErrors* errors) {
  if (body.contains("kind") && body["kind"] != kind) {
    errors->push_back(model::Invalid("kind", body["kind"].dump(), absl::StrCat("must be ", kind)));
  }
  if (body.contains("apiVersion") && body["apiVersion"] != GroupVersion()) {
    errors->push_back(model::Invalid("apiVersion", body["apiVersion"].dump(),
                                     absl::StrCat("must be ", GroupVersion())));
  }
}

// "90s", "15m", "24h", "7d", or several of them ("1h30m"): whole seconds, > 0. -1 otherwise.
int64_t ParseDuration(const std::string& text) {
  int64_t total = 0;
  size_t i = 0;
  if (text.empty()) return -1;
  while (i < text.size()) {
    int64_t n = 0;
    size_t digits = 0;
    for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, ++digits) {
      if (n > kMaxRangeSeconds) return -1;
      n = n * 10 + (text[i] - '0');
    }
    if (digits == 0 || i == text.size()) return -1;
    switch (text[i++]) {
      case 's':
        break;
      case 'm':
        n *= 60;
        break;
      case 'h':
        n *= 3600;
        break;
      case 'd':
        n *= 24 * 3600;
        break;
      default:
        return -1;
    }
    total += n;
    if (total > kMaxRangeSeconds) return -1;
  }
  return total > 0 ? total : -1;
}

// spec.<name> as a duration (ParseDuration) into *out; false, with a field error when it is
// malformed, when it is absent or malformed.
bool DurationField(const json& spec, const char* name, int64_t* out, model::FieldErrors* errors) {
  if (!spec.contains(name)) return false;
  const json& v = spec[name];
  const int64_t parsed = v.is_string() ? ParseDuration(v.get<std::string>()) : -1;
  if (parsed <= 0) {
    errors->push_back(model::Invalid(absl::StrCat("spec.", name), v.dump(),
                                     "must be a duration such as 90s, 15m, 24h or 7d"));
    return false;
  }
  *out = parsed;
  return true;
}

// spec.<name> as an RFC 3339 time into *out, as DurationField.
bool TimeField(const json& spec, const char* name, std::chrono::system_clock::time_point* out,
               model::FieldErrors* errors) {
  if (!spec.contains(name)) return false;
  const json& v = spec[name];
  if (!v.is_string() || !ParseRfc3339(v.get<std::string>(), out)) {
    errors->push_back(
        model::Invalid(absl::StrCat("spec.", name), v.dump(), "must be an RFC 3339 time"));
    return false;
  }
  return true;
}

// fieldValidation on a review, as on every other write: fields the schema table does not know
// are refused with Strict, reported as warnings with Warn (the default), let through with Ignore.
absl::Status CheckReviewFields(const char* kind, const json& body, const HttpRequest& req,
                               std::vector<std::string>* warnings) {
  auto it = req.query.find("fieldValidation");
  const std::string mode = it == req.query.end() ? "" : it->second;
  if (mode == "Ignore") return absl::OkStatus();
  return ApplyFieldValidation(mode, UnknownFields(kAdminGroup, kAdminVersion, kind, body),
                              warnings);
}

}  // namespace

HttpResponse AdminApi::DeviceMatchReview(const json& body) {
  model::FieldErrors errors;
  CheckTypeMeta(body, kReviewKind, &errors);
  const json spec = body.value("spec", json::object());
  service::DeviceMatchRequest request;
  request.limit = kDefaultLimit;
  if (!spec.is_object()) {
    errors.push_back(model::Invalid("spec", "", "must be an object"));
  } else {
    if (spec.contains("className")) {
      if (spec["className"].is_string()) {
        request.class_name = spec["className"].get<std::string>();
      } else {
        errors.push_back(
            model::Invalid("spec.className", spec["className"].dump(), "must be a string"));
      }
    }
    if (spec.contains("selectors")) {
      const json& selectors = spec["selectors"];
      if (!selectors.is_array()) {
        errors.push_back(model::Invalid("spec.selectors", "", "must be a list"));
      } else if (selectors.size() > kMaxSelectors) {
        errors.push_back(model::TooMany("spec.selectors", selectors.size(), kMaxSelectors));
      } else {
        for (size_t i = 0; i < selectors.size(); ++i) {
          const std::string path = absl::StrCat("spec.selectors[", i, "].cel.expression");
          const json& s = selectors[i];
          const json* expression = nullptr;
          if (s.is_object() && s.contains("cel") && s["cel"].is_object() &&
              s["cel"].contains("expression")) {
            expression = &s["cel"]["expression"];
          }
          if (expression == nullptr) {
            errors.push_back(model::Required(path));
          } else if (!expression->is_string()) {
            errors.push_back(model::Invalid(path, expression->dump(), "must be a string"));
          } else {
            request.selectors.push_back(expression->get<std::string>());
          }
        }
      }
    }
    if (spec.contains("limit")) {
      const json& limit = spec["limit"];
      if (!limit.is_number_integer() || limit.get<int64_t>() < 1) {
        errors.push_back(model::Invalid("spec.limit", limit.dump(), "must be a positive integer"));
      } else {
        request.limit = std::min<size_t>(limit.get<uint64_t>(), kMaxLimit);
      }
    }
    if (errors.empty() && request.class_name.empty() && request.selectors.empty()) {
      errors.push_back(model::Required("spec", "className or selectors are required"));
    }
  }
  if (!errors.empty()) return Error(InvalidError(kReviewKind, kAdminGroup, "", errors));

  auto result = service::PreviewDeviceMatches(objects_, inventories_, request);
  if (!result.ok()) return Error(ToHttpError(result.status(), StatusDetails{}));

  json status = {{"matchedDevices", result->matched},
                 {"allocatedDevices", result->allocated},
                 {"nodes", result->nodes},
                 {"truncated", result->devices.size() < result->matched}};
  json devices = json::array();
  for (const auto& d : result->devices) devices.push_back(EncodeDevice(d));
  status["devices"] = std::move(devices);
  json issues = json::array();
  for (const auto& issue : result->issues) {
    json e = {{"field", issue.field}, {"message", issue.message}};
    if (issue.line > 0) {
      e["line"] = issue.line;
      e["column"] = issue.column;
      e["offset"] = issue.offset;
    }
    issues.push_back(std::move(e));
  }
  status["errors"] = std::move(issues);
  status["evaluationErrors"] = result->evaluation_errors;
  json out = {{"apiVersion", GroupVersion()},
              {"kind", kReviewKind},
              {"metadata", body.value("metadata", json::object())},
              {"spec", spec},
              {"status", std::move(status)}};
  return Json(201, out);
}

HttpResponse AdminApi::UtilizationHistoryReview(const json& body) {
  using std::chrono::seconds;
  using std::chrono::system_clock;
  model::FieldErrors errors;
  CheckTypeMeta(body, kUtilizationKind, &errors);
  const json spec = body.value("spec", json::object());
  // "Now" rounded up to a whole second: the newest allocation is always inside the range.
  const system_clock::time_point now =
      std::chrono::ceil<seconds>(clock_.Now().time_since_epoch()) + system_clock::time_point();
  service::UtilizationRequest request;
  request.end = now;
  int64_t range = 3600;
  if (!spec.is_object()) {
    errors.push_back(model::Invalid("spec", "", "must be an object"));
  } else {
    const bool has_range = DurationField(spec, "range", &range, &errors);
    const bool has_start = TimeField(spec, "start", &request.start, &errors);
    TimeField(spec, "end", &request.end, &errors);
    if (has_range && has_start) {
      errors.push_back(model::Forbidden("spec.range", "may not be set together with spec.start"));
    }
    if (!has_start) request.start = request.end - seconds(range);
    if (request.end <= request.start) {
      errors.push_back(
          model::Invalid("spec.end", spec.value("end", json()).dump(), "must be after spec.start"));
    } else if (request.end - request.start > seconds(kMaxRangeSeconds)) {
      errors.push_back(model::Invalid("spec.start", spec.value("start", json()).dump(),
                                      "the range may span at most 400 days"));
    }
    range = std::chrono::duration_cast<seconds>(request.end - request.start).count();
    int64_t step = std::max<int64_t>(1, (range + 59) / 60);
    DurationField(spec, "step", &step, &errors);
    request.step = seconds(step);
    if (range > 0 && (range + step - 1) / step > kMaxBuckets) {
      errors.push_back(model::Invalid(
          "spec.step", spec.value("step", json()).dump(),
          absl::StrCat("gives more than ", kMaxBuckets, " buckets; use a larger step")));
    }
    const std::string group_by = spec.value("groupBy", json("")).is_string()
                                     ? spec.value("groupBy", std::string())
                                     : std::string("?");
    if (group_by == "") {
      request.group_by = service::UtilizationGroupBy::kNone;
    } else if (group_by == "class") {
      request.group_by = service::UtilizationGroupBy::kClass;
    } else if (group_by == "model") {
      request.group_by = service::UtilizationGroupBy::kModel;
    } else if (group_by == "node") {
      request.group_by = service::UtilizationGroupBy::kNode;
    } else if (group_by == "namespace") {
      request.group_by = service::UtilizationGroupBy::kNamespace;
    } else {
      errors.push_back(model::NotSupported("spec.groupBy", spec["groupBy"].dump(),
                                           {"", "class", "model", "node", "namespace"}));
    }
  }
  if (!errors.empty()) return Error(InvalidError(kUtilizationKind, kAdminGroup, "", errors));

  auto history = objects_.store().ReadAllocationHistory(request.start);
  if (absl::IsUnimplemented(history.status())) {
    return Error(MakeError(501, "NotImplemented", std::string(history.status().message())));
  }
  if (!history.ok()) return Error(ToHttpError(history.status(), StatusDetails{}));
  auto inventory = inventories_.Get();
  if (!inventory.ok()) return Error(ToHttpError(inventory.status(), StatusDetails{}));
  service::UtilizationResult result = service::ComputeUtilization(**inventory, *history, request);
  if (static_cast<int64_t>(result.groups.size() * result.bucket_starts.size()) > kMaxValues) {
    const std::string message =
        absl::StrCat(result.groups.size(), " groups x ", result.bucket_starts.size(),
                     " buckets are too many values; use a larger step");
    errors.push_back(model::Invalid("spec.step", spec.value("step", json()).dump(), message));
    return Error(InvalidError(kUtilizationKind, kAdminGroup, "", errors));
  }

  json times = json::array();
  for (const auto& t : result.bucket_starts) {
    times.push_back(std::chrono::duration_cast<seconds>(t.time_since_epoch()).count());
  }
  json groups = json::array();
  for (const auto& g : result.groups) {
    json group = {
        {"name", g.name}, {"allocated", g.allocated}, {"peakAllocated", g.peak_allocated}};
    if (request.group_by != service::UtilizationGroupBy::kNamespace) {
      group["devices"] = g.devices;
      group["tainted"] = g.tainted;
      group["unhealthy"] = g.unhealthy;
      group["free"] = g.free;
    }
    groups.push_back(std::move(group));
  }
  json status = {{"start", FormatRfc3339(request.start)},
                 {"end", FormatRfc3339(request.end)},
                 {"stepSeconds", request.step.count()},
                 {"times", std::move(times)},
                 {"groups", std::move(groups)}};
  json out = {{"apiVersion", GroupVersion()},
              {"kind", kUtilizationKind},
              {"metadata", body.value("metadata", json::object())},
              {"spec", spec},
              {"status", std::move(status)}};
  return Json(201, out);
}

namespace {

// Kubernetes' MicroTime: RFC 3339 with microseconds ("2026-11-27T06:30:01.123456Z").
std::string FormatMicroTime(std::chrono::system_clock::time_point t) {
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  const auto whole = std::chrono::system_clock::time_point(
      std::chrono::seconds(micros / 1000000 - (micros % 1000000 < 0 ? 1 : 0)));
  const int64_t fraction =
      micros -
      std::chrono::duration_cast<std::chrono::microseconds>(whole.time_since_epoch()).count();
  std::string text = FormatRfc3339(whole);  // "...:SSZ"
  text.pop_back();
  char buf[16];
  std::snprintf(buf, sizeof(buf), ".%06lldZ", static_cast<long long>(fraction));
  return text + buf;
}

}  // namespace

HttpResponse AdminApi::DeviceAllocationHistoryReview(const json& body) {
  using std::chrono::seconds;
  model::FieldErrors errors;
  CheckTypeMeta(body, kDeviceHistoryKind, &errors);
  const json spec = body.value("spec", json::object());
  const auto now = clock_.Now();
  std::string driver, pool, device;
  auto since = now - seconds(7 * 24 * 3600);
  int64_t limit = kDefaultHistoryEvents;
  if (!spec.is_object()) {
    errors.push_back(model::Invalid("spec", "", "must be an object"));
  } else {
    auto name_field = [&](const char* name, std::string* out) {
      const json v = spec.value(name, json());
      if (v.is_null() || (v.is_string() && v.get<std::string>().empty())) {
        errors.push_back(model::Required(absl::StrCat("spec.", name), ""));
      } else if (!v.is_string()) {
        errors.push_back(model::Invalid(absl::StrCat("spec.", name), v.dump(), "must be a string"));
      } else {
        *out = v.get<std::string>();
      }
    };
    name_field("driver", &driver);
    name_field("pool", &pool);
    name_field("device", &device);
    int64_t range = 0;
    if (DurationField(spec, "range", &range, &errors)) since = now - seconds(range);
    if (spec.contains("range") && spec.contains("start")) {
      errors.push_back(model::Forbidden("spec.range", "may not be set together with spec.start"));
    } else {
      TimeField(spec, "start", &since, &errors);
    }
    if (spec.contains("limit")) {
      const json& v = spec["limit"];
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > kMaxHistoryEvents) {
        errors.push_back(model::Invalid("spec.limit", v.dump(),
                                        absl::StrCat("must be between 1 and ", kMaxHistoryEvents)));
      } else {
        limit = v.get<int64_t>();
      }
    }
  }
  if (!errors.empty()) return Error(InvalidError(kDeviceHistoryKind, kAdminGroup, "", errors));

  bool truncated = false;
  auto history = objects_.store().ReadDeviceHistory(driver, pool, device, since, limit, &truncated);
  if (absl::IsUnimplemented(history.status())) {
    return Error(MakeError(501, "NotImplemented", std::string(history.status().message())));
  }
  if (!history.ok()) return Error(ToHttpError(history.status(), StatusDetails{}));
  // Claim names, from the claims that still exist (the history keeps uids and namespaces).
  std::map<std::string, std::string> names;  // uid -> name
  std::set<std::string> namespaces;
  for (const auto& r : history->current) namespaces.insert(r.claim_namespace);
  for (const auto& e : history->events) namespaces.insert(e.row.claim_namespace);
  for (const auto& ns : namespaces) {
    if (ns.empty()) continue;
    service::ListRequest list;
    list.store.resource = std::string("resourceclaims.") + model::kResourceGroup;
    list.store.namespace_ = ns;
    auto claims = objects_.List(list);
    if (!claims.ok()) return Error(ToHttpError(claims.status(), StatusDetails{}));
    for (const auto& c : claims->items) names[c->meta.uid] = c->meta.name;
  }
  auto claim_ref = [&](const store::AllocationRecord& r) {
    json ref = {{"namespace", r.claim_namespace}, {"uid", r.claim_uid}};
    if (auto it = names.find(r.claim_uid); it != names.end()) ref["name"] = it->second;
    return ref;
  };
  json holders = json::array();
  for (const auto& r : history->current) {
    json h = {{"claim", claim_ref(r)}, {"adminAccess", r.admin_access}};
    if (!r.share_id.empty()) h["shareID"] = r.share_id;
    holders.push_back(std::move(h));
  }
  json events = json::array();
  for (const auto& e : history->events) {
    json ev = {{"time", FormatMicroTime(e.time)},
               {"type", e.delta > 0 ? "Allocated" : "Released"},
               {"claim", claim_ref(e.row)},
               {"adminAccess", e.row.admin_access}};
    if (!e.row.share_id.empty()) ev["shareID"] = e.row.share_id;
    events.push_back(std::move(ev));
  }
  json status = {{"start", FormatRfc3339(since)},
                 {"end", FormatRfc3339(now)},
                 {"holders", std::move(holders)},
                 {"events", std::move(events)},
                 {"truncated", truncated}};
  json out = {{"apiVersion", GroupVersion()},
              {"kind", kDeviceHistoryKind},
              {"metadata", body.value("metadata", json::object())},
              {"spec", spec},
              {"status", std::move(status)}};
  return Json(201, out);
}

bool IsAdminApiPath(const std::string& path) {
  const std::string group = GroupPath();
  return path == group || absl::StartsWith(path, group + "/");
}

HttpResponse AdminApi::Handle(const HttpRequest& req) {
  std::string path = req.path;
  if (path.size() > 1 && path.back() == '/') path.pop_back();
  if (path == GroupPath() && req.method == "GET") return Json(200, LegacyGroup(kAdminGroup));
  if (path == VersionPath() && req.method == "GET") {
    return Json(200, LegacyResourceList(kAdminGroup, kAdminVersion));
  }
  const std::string summaries = VersionPath() + "/" + kClusterSummaryResource;
  if (summary_ != nullptr && (path == summaries || absl::StartsWith(path, summaries + "/"))) {
    const std::string name = path == summaries ? "" : path.substr(summaries.size() + 1);
    if (name.find('/') != std::string::npos) {
      return Error(MakeError(404, "NotFound", "the server could not find the requested resource"));
    }
    if (req.method != "GET") {
      return Error(MakeError(405, "MethodNotAllowed",
                             "the server does not allow this method on the requested resource"));
    }
    return summary_->Get(name, req.accept.find("as=Table") != std::string::npos);
  }
  const bool match = path == VersionPath() + "/" + kReviewResource;
  const bool utilization = path == VersionPath() + "/" + kUtilizationResource;
  const bool device_history = path == VersionPath() + "/" + kDeviceHistoryResource;
  const bool holders = holders_ != nullptr && path == VersionPath() + "/" + kDeviceHolderResource;
  if (match || utilization || device_history || holders) {
    if (req.method != "POST") {
      return Error(MakeError(405, "MethodNotAllowed",
                             "the server does not allow this method on the requested resource"));
    }
    const json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded() || !body.is_object()) {
      return Error(MakeError(400, "BadRequest", "the request body is not a JSON object"));
    }
    const char* kind = match         ? kReviewKind
                       : utilization ? kUtilizationKind
                       : holders     ? kDeviceHolderKind
                                     : kDeviceHistoryKind;
    std::vector<std::string> warnings;
    if (auto st = CheckReviewFields(kind, body, req, &warnings); !st.ok()) {
      return Error(MakeError(400, "BadRequest", std::string(st.message())));
    }
    HttpResponse resp = match         ? DeviceMatchReview(body)
                        : utilization ? UtilizationHistoryReview(body)
                        : holders     ? holders_->Review(body)
                                      : DeviceAllocationHistoryReview(body);
    resp.warnings.insert(resp.warnings.end(), warnings.begin(), warnings.end());
    return resp;
  }
  return Error(MakeError(404, "NotFound", "the server could not find the requested resource"));
}

std::optional<HttpResponse> AdminApi::StartWatch(const HttpRequest& req,
                                                 std::shared_ptr<WatchSink> sink) {
  std::string path = req.path;
  if (path.size() > 1 && path.back() == '/') path.pop_back();
  const std::string summaries = VersionPath() + "/" + kClusterSummaryResource;
  if (summary_ != nullptr && (path == summaries || path == summaries + "/" + kClusterSummaryName)) {
    return summary_->StartWatch(req, std::move(sink));
  }
  return Error(MakeError(404, "NotFound", "the server could not find the requested resource"));
}

}  // namespace qm::api
