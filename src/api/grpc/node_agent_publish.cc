// NodeAgent.PublishResources: an agent replaces its node's ResourceSlices (node_agent_api.h).

#include "api/grpc/node_agent_api.h"

#include <algorithm>
#include <optional>
#include <set>

#include "api/grpc/node_agent_internal.h"
#include "api/rest/codec.h"
#include "api/rest/validation.h"
#include "common/status.h"
#include "model/json/stored.h"
#include "model/names.h"
#include "model/resource_types.h"
#include "service/audit_log.h"
#include "service/graceful_deletion.h"
#include "service/node_restriction.h"
#include "spdlog/spdlog.h"

namespace qm::api::nodeapi {

// ---- PublishResources ----------------------------------------------------------------------

absl::StatusOr<v1::PublishResourcesResponse> NodeAgentApi::PublishResources(
    const Caller& caller, const v1::PublishResourcesRequest& request) {
  const std::string& node = request.node_name();
  const std::string& driver = request.driver();
  QM_RETURN_IF_ERROR(CheckNode(caller, node));
  if (driver.empty()) return absl::InvalidArgumentError("driver: Required value");
  if (auto errors = model::IsDns1123Subdomain(driver); !errors.empty()) {
    return absl::InvalidArgumentError("driver: Invalid value: " + model::Quote(driver) + ": " +
                                      errors.front());
  }
  std::set<std::string> pool_names;
  for (int i = 0; i < request.pools_size(); ++i) {
    const auto& pool = request.pools(i);
    const std::string path = "pools[" + std::to_string(i) + "]";
    if (pool.name().empty()) return absl::InvalidArgumentError(path + ".name: Required value");
    if (!pool_names.insert(pool.name()).second) {
      return absl::InvalidArgumentError(path +
                                        ".name: Duplicate value: " + model::Quote(pool.name()));
    }
    if (pool.slices_size() == 0) {
      return absl::InvalidArgumentError(path +
                                        ".slices: Required value: a pool has at least "
                                        "one slice");
    }
    if (pool.generation() < 0) {
      return absl::InvalidArgumentError(
          path + ".generation: Invalid value: " + std::to_string(pool.generation()) +
          ": must be greater than or equal to 0");
    }
  }
  for (const char* verb : {"create", "update", "delete"}) {
    QM_RETURN_IF_ERROR(
        Authorize(caller, verb, model::kResourceGroup, "resourceslices", "", "", ""));
  }
  const model::ResourceType& type = SliceType();

  for (int attempt = 0;; ++attempt) {
    service::ListRequest list_request;
    list_request.store.resource = type.GroupResource();
    QM_ASSIGN_OR_RETURN(list_request.fields,
                        model::FieldSelector::Parse("spec.nodeName=" + node, type.field_selectors));
    QM_ASSIGN_OR_RETURN(store::ListResult list, objects_.List(list_request));
    std::map<std::string, std::pair<const model::Object*, json>> existing;  // this driver's
    std::map<std::string, int64_t> stored_generation;                       // by pool
    for (const auto& listed : list.items) {
      const model::Object& obj = *listed;
      auto it = obj.fields.find("spec.driver");
      if (it == obj.fields.end() || it->second != driver) continue;
      json hub = FromObject(type, obj);
      const json& pool = At(At(hub, "spec"), "pool");
      const json& gen = At(pool, "generation");
      int64_t& g = stored_generation[Str(pool, "name")];
      if (gen.is_number_integer()) g = std::max(g, gen.get<int64_t>());
      existing.emplace(obj.meta.name, std::make_pair(&obj, std::move(hub)));
    }

    struct Desired {
      std::string name;
      json hub;
      const model::Object* current = nullptr;
      const json* current_hub = nullptr;
    };
    std::vector<Desired> desired;
    std::set<std::string> desired_names;
    v1::PublishResourcesResponse resp;
    model::FieldErrors all_errors;
    std::string first_prefix;
    for (int i = 0; i < request.pools_size(); ++i) {
      const auto& pool = request.pools(i);
      const size_t count = static_cast<size_t>(pool.slices_size());
      const int64_t stored =
          stored_generation.contains(pool.name()) ? stored_generation[pool.name()] : 0;
      // Compare the published content with what is stored, generations aside.
      bool changed = false;
      const size_t first = desired.size();
      for (size_t j = 0; j < count; ++j) {
        Desired d;
        d.name = SliceName(node, driver, pool.name(), j, count);
        d.hub = ToHub(type, "v1",
                      SliceJson(pool.slices(static_cast<int>(j)), d.name, node, driver, pool.name(),
                                stored, static_cast<int64_t>(count)),
                      clock_);
        auto it = existing.find(d.name);
        if (it != existing.end()) {
          d.current = it->second.first;
          d.current_hub = &it->second.second;
          json a = At(d.hub, "spec"), b = At(*d.current_hub, "spec");
          a["pool"].erase("generation");
          if (b.is_object() && b.contains("pool") && b["pool"].is_object()) {
            b["pool"].erase("generation");
          }
          if (a != b) changed = true;
        } else {
          changed = true;
        }
        desired_names.insert(d.name);
        desired.push_back(std::move(d));
      }
      for (const auto& [name, entry] : existing) {
        if (Str(At(At(entry.second, "spec"), "pool"), "name") == pool.name() &&
            !desired_names.contains(name)) {
          changed = true;
        }
      }
      int64_t generation = pool.generation();
      const std::string path = "pools[" + std::to_string(i) + "]";
      if (generation == 0) {
        generation = changed || stored == 0 ? stored + 1 : stored;
      } else if (generation < stored) {
        return absl::FailedPreconditionError(
            path + ".generation: stale: " + std::to_string(generation) +
            " is older than the stored generation " + std::to_string(stored) + " of pool " +
            model::Quote(pool.name()));
      } else if (generation == stored && changed) {
        return absl::FailedPreconditionError(
            path + ".generation: " + std::to_string(generation) + " of pool " +
            model::Quote(pool.name()) +
            " is already published with different devices; publish a higher generation (or 0)");
      }
      auto* published = resp.add_pools();
      published->set_name(pool.name());
      published->set_generation(generation);
      for (size_t j = first; j < desired.size(); ++j) {
        Desired& d = desired[j];
        d.hub["spec"]["pool"]["generation"] = generation;
        // Metadata others may have set (labels, annotations) stays as it is.
        if (d.current_hub != nullptr) d.hub["metadata"] = (*d.current_hub)["metadata"];
        auto errors = ValidateObject(type, d.hub, d.current_hub);
        const std::string prefix = path + ".slices[" + std::to_string(j - first) + "]";
        for (auto& e : errors) {
          e.field = prefix + (e.field.empty() ? "" : "." + e.field);
          all_errors.push_back(std::move(e));
        }
        published->add_slice_names(d.name);
      }
    }
    if (!all_errors.empty()) return InvalidFields("", all_errors);

    std::vector<service::BatchWrite> writes;
    for (auto& d : desired) {
      QM_RETURN_IF_ERROR(
          Forbidden(type, d.name,
                    service::AdmitNodeWrite(caller.user, "ResourceSlice", "",
                                            model::json::NodeRelationsOf(d.current_hub),
                                            model::json::NodeRelationsOf(d.hub))));
      if (d.current_hub != nullptr && At(d.hub, "spec") == At(*d.current_hub, "spec")) continue;
      d.hub["metadata"].erase("resourceVersion");
      QM_ASSIGN_OR_RETURN(model::Object obj, ToObject(type, d.hub));
      service::BatchWrite w;
      w.object = std::move(obj);
      if (d.current != nullptr) {
        w.kind = service::BatchWrite::Kind::kUpdate;
        w.current = *d.current;
      } else {
        w.kind = service::BatchWrite::Kind::kCreate;
      }
      writes.push_back(std::move(w));
    }
    for (const auto& [name, entry] : existing) {
      if (desired_names.contains(name)) continue;
      QM_RETURN_IF_ERROR(Forbidden(
          type, name,
          service::AdmitNodeWrite(caller.user, "ResourceSlice", "",
                                  model::json::NodeRelationsOf(entry.second), std::nullopt)));
      service::BatchWrite w;
      w.kind = service::BatchWrite::Kind::kDelete;
      w.current = *entry.first;
      writes.push_back(std::move(w));
    }
    resp.set_resource_version(list.resource_version);
    if (writes.empty()) {
      resp.set_changed(false);
      return resp;
    }
    store::AuditRecord record =
        Record(caller, "update", model::kResourceGroup, "resourceslices", "", "", "");
    absl::StatusOr<std::vector<model::Object>> committed;
    {
      store::AuditScope scope(&record);
      committed = objects_.CommitBatch(std::move(writes));
    }
    if ((absl::IsAborted(committed.status()) || absl::IsAlreadyExists(committed.status()) ||
         absl::IsNotFound(committed.status())) &&
        attempt + 1 < kMaxAttempts) {
      continue;  // a concurrent writer: recompute from the fresh state
    }
    QM_RETURN_IF_ERROR(committed.status());
    int64_t rv = 0;
    for (const auto& o : *committed) rv = std::max(rv, o.meta.resource_version);
    resp.set_resource_version(rv);
    resp.set_changed(true);
    return resp;
  }
}

}  // namespace qm::api::nodeapi
