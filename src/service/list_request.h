#pragma once

#include "model/object.h"
#include "model/selector.h"
#include "store/store.h"

namespace qm::service {

// A list (or the initial state of a watch): which resource and namespace, where to continue,
// how many, and the label and field selectors to apply.
struct ListRequest {
  store::ListOptions store;
  model::LabelSelector labels;
  model::FieldSelector fields;

  bool Matches(const model::Object& obj) const {
    return (store.namespace_.empty() || obj.meta.namespace_ == store.namespace_) &&
           labels.Matches(obj.meta.labels) &&
           fields.Matches(obj.meta.name, obj.meta.namespace_, obj.fields);
  }
};

}  // namespace qm::service
