#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace qm::model {

// A parsed Kubernetes label selector ("app=demo,tier!=x,env in (a,b),!legacy").
class LabelSelector {
 public:
  enum class Op { kEquals, kNotEquals, kIn, kNotIn, kExists, kDoesNotExist, kGreater, kLess };
  struct Requirement {
    std::string key;
    Op op;
    std::vector<std::string> values;
  };

  // Parses the selector text; an empty string selects everything. InvalidArgument with a
  // message naming the offending part on bad syntax.
  static absl::StatusOr<LabelSelector> Parse(const std::string& text);

  bool Matches(const std::map<std::string, std::string>& labels) const;
  bool Empty() const { return requirements_.empty(); }
  const std::vector<Requirement>& requirements() const { return requirements_; }

 private:
  std::vector<Requirement> requirements_;
};

// A parsed field selector ("metadata.name=x,spec.nodeName!=y"). Only equality tests exist.
class FieldSelector {
 public:
  struct Requirement {
    std::string field;
    bool equals;
    std::string value;
  };

  // Parses the text and checks every field against `supported` (field paths besides
  // metadata.name and metadata.namespace). Unsupported fields are InvalidArgument with
  // Kubernetes' message: `field label not supported: spec.foo`.
  static absl::StatusOr<FieldSelector> Parse(const std::string& text,
                                             const std::vector<std::string>& supported);

  // `name` and `nspace` are the object's metadata.name and metadata.namespace; `fields` holds
  // its other selectable values (model::Object::fields). A missing field counts as "".
  bool Matches(const std::string& name, const std::string& nspace,
               const std::map<std::string, std::string>& fields) const;
  bool Empty() const { return requirements_.empty(); }
  const std::vector<Requirement>& requirements() const { return requirements_; }

 private:
  std::vector<Requirement> requirements_;
};

}  // namespace qm::model
