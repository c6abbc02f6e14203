// libFuzzer target for JSON decoding, defaulting, conversion and validation of every served
// kind, through RestApi::Handle over an in-memory store.
//
// Input: three header bytes, then `first` [kSeparator `second`].
//   byte 0: the kind, model::AllResourceTypes()[byte % count]; '*' takes the kind and version
//           named by `first`'s apiVersion and kind (so seeds stay valid when the table changes).
//   byte 1: low nibble % 9, what is sent:
//           0 POST first                         5 POST first, PATCH (json patch) second
//           1 POST first, PUT second             6 PATCH (apply) first, then PATCH (apply) second
//           2 POST first, PUT second on /status  7 POST first as protobuf
//           3 POST first, PATCH (merge) second   8 POST first, DELETE with body second
//           4 POST first, PATCH (strategic) second
//   byte 2: bits 0-1 the served version (index % count) unless byte 0 is '*';
//           bit 2 fieldValidation=Strict; bit 3 dryRun=All; bits 4-5 the user: 3 admin
//           (system:masters; so a digit means admin), 2 system:node:node-1, 1 jane (no
//           roles), 0 none (as the manifest loader calls it).
// After that the object is read back in another served version, listed (plain and as a Table)
// and deleted. See fuzz_util.h for what counts as a finding.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "auth/user.h"
#include "fuzz_util.h"
#include "model/resource_types.h"

namespace {

using nlohmann::json;
using qm::api::HttpRequest;
using qm::api::HttpResponse;

std::string StringField(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

const qm::model::ResourceType& PickType(uint8_t b, const json& first) {
  const auto& types = qm::model::AllResourceTypes();
  if (b == '*' && first.is_object()) {
    std::string api_version = StringField(first, "apiVersion");
    std::string group;
    if (auto slash = api_version.find('/'); slash != std::string::npos) {
      group = api_version.substr(0, slash);
    }
    if (const auto* t = qm::model::FindResourceTypeByKind(group, StringField(first, "kind"))) {
      return *t;
    }
  }
  return types[b % types.size()];
}

std::string CollectionPath(const qm::model::ResourceType& type, const std::string& version) {
  std::string p = type.group.empty() ? "/api/" + version : "/apis/" + type.group + "/" + version;
  if (type.namespaced) p += "/namespaces/default";
  return p + "/" + type.plural;
}

// A length-delimited protobuf field.
std::string Bytes(int field, const std::string& s) {
  std::string out(1, static_cast<char>(field << 3 | 2));
  size_t n = s.size();
  do {
    uint8_t b = n & 0x7f;
    n >>= 7;
    out += static_cast<char>(n ? b | 0x80 : b);
  } while (n);
  return out + s;
}

// `raw` in the runtime.Unknown envelope typed clients send, for apiVersion/kind of `type`.
std::string ProtobufBody(const qm::model::ResourceType& type, const std::string& version,
                         const std::string& raw) {
  std::string type_meta = Bytes(1, type.ApiVersion(version)) + Bytes(2, type.kind);
  return std::string("k8s\0", 4) + Bytes(1, type_meta) + Bytes(2, raw);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  qm::fuzz::CurrentInput() = std::string_view(reinterpret_cast<const char*>(data), size);
  if (size < 3) return 0;
  auto [first, second] =
      qm::fuzz::SplitOnce(std::string_view(reinterpret_cast<const char*>(data) + 3, size - 3));
  const json first_json = qm::fuzz::ParseObject(first);
  const qm::model::ResourceType& type = PickType(data[0], first_json);
  const int op = (data[1] & 0x0f) % 9;
  std::string version = type.versions[(data[2] & 3) % type.versions.size()];
  if (data[0] == '*' && first_json.is_object()) {
    const std::string api_version = StringField(first_json, "apiVersion");
    const std::string named = api_version.substr(api_version.find('/') + 1);
    if (type.ServesVersion(named)) version = named;
  }
  const std::string& other_version = type.versions[((data[2] & 3) + 1) % type.versions.size()];
  std::map<std::string, std::string> query;
  if (data[2] & 4) query["fieldValidation"] = "Strict";
  if (data[2] & 8) query["dryRun"] = "All";

  std::optional<qm::auth::UserInfo> user;
  switch ((data[2] >> 4) & 3) {
    case 3:
      user = qm::auth::UserInfo{"admin", "admin", {"system:masters", "system:authenticated"}};
      break;
    case 2:
      user = qm::auth::UserInfo{"system:node:node-1", "", {"system:nodes", "system:authenticated"}};
      break;
    case 1:
      user = qm::auth::UserInfo{"jane", "jane-uid", {"system:authenticated"}};
      break;
    default:
      break;
  }

  qm::fuzz::InMemoryApi api;
  const std::string collection = CollectionPath(type, version);
  auto call = [&](const std::string& method, const std::string& path, const std::string& body,
                  const std::string& content_type, std::map<std::string, std::string> q) {
    HttpRequest req;
    req.method = method;
    req.path = path;
    req.query = std::move(q);
    req.content_type = content_type;
    req.body = body;
    req.user = user;
    return api.Handle(req);
  };

  // The object's name: the one the server gave it, else the one the body asks for.
  std::string name = first_json.is_object() && first_json.contains("metadata") &&
                             first_json["metadata"].is_object()
                         ? StringField(first_json["metadata"], "name")
                         : "";
  auto created_name = [&](const HttpResponse& r) {
    if (r.code != 201) return;
    json obj = qm::fuzz::ParseObject(r.body);
    if (obj.is_object() && obj["metadata"].is_object()) {
      std::string n = StringField(obj["metadata"], "name");
      if (!n.empty()) name = n;
    }
  };
  if (name.empty() || name.find('/') != std::string::npos) name = "fuzz";

  switch (op) {
    case 6:
      call("PATCH", collection + "/" + name, first, "application/apply-patch+yaml", query);
      call("PATCH", collection + "/" + name, second, "application/apply-patch+yaml", query);
      break;
    case 7:
      created_name(call("POST", collection, ProtobufBody(type, version, first),
                        "application/vnd.kubernetes.protobuf", query));
      break;
    default: {
      created_name(call("POST", collection, first, "application/json", query));
      const std::string item = collection + "/" + name;
      if (op == 1) call("PUT", item, second, "application/json", query);
      if (op == 2) {
        call("PUT", type.has_status ? item + "/status" : item, second, "application/json", query);
      }
      if (op == 3) call("PATCH", item, second, "application/merge-patch+json", query);
      if (op == 4) call("PATCH", item, second, "application/strategic-merge-patch+json", query);
      if (op == 5) call("PATCH", item, second, "application/json-patch+json", query);
      if (op == 8) call("DELETE", item, second, "application/json", query);
      break;
    }
  }

  // Whatever was stored reads back in every form.
  const std::string other = CollectionPath(type, other_version);
  call("GET", other + "/" + name, "", "", {});
  call("GET", other, "", "", {});
  HttpRequest table;
  table.method = "GET";
  table.path = other;
  table.accept = "application/json;as=Table;v=v1;g=meta.k8s.io";
  table.user = user;
  api.Handle(table);
  call("DELETE", other + "/" + name, "", "", {});
  return 0;
}
