#pragma once

// Objects stored straight into a store, for the tests of the layers above it: with what the
// object service fills in (uid, generation, creation time) and the body as it is given, no
// codec and no validation.

#include <map>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/id_generator.h"
#include "model/object.h"
#include "store/store.h"

namespace qm::testing {

// Creates the object in `store` and returns it as stored (a failed create fails the test and
// returns the object as it was to be stored).
inline model::Object PutObject(store::Store& store, IdGenerator& ids, const Clock& clock,
                               const std::string& resource, const std::string& ns,
                               const std::string& name, const nlohmann::json& body,
                               std::map<std::string, std::string> labels = {}) {
  model::Object o;
  o.resource = resource;
  o.meta.namespace_ = ns;
  o.meta.name = name;
  o.meta.uid = ids.NewUid();
  o.meta.generation = 1;
  o.meta.creation_timestamp = clock.Now();
  o.meta.labels = std::move(labels);
  o.body = body.dump();
  auto created = store.Create(o);
  EXPECT_TRUE(created.ok()) << created.status();
  return created.ok() ? *created : o;
}

}  // namespace qm::testing
