#include "model/object.h"

#include <openssl/evp.h>

#include <stdexcept>
#include <utility>

namespace qm::model {

namespace {

constexpr std::string_view kSpecDigestPrefix = "sha256:";

bool IsHashed(const std::string& digest) { return digest.starts_with(kSpecDigestPrefix); }

}  // namespace

ObjectPtr Share(Object obj) { return ObjectPtr(std::make_unique<Object>(std::move(obj))); }

std::string SpecDigest(std::string_view canonical_spec) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(canonical_spec.data(), canonical_spec.size(), md, &len, EVP_sha256(), nullptr) !=
      1) {
    throw std::runtime_error("SHA-256 of a spec failed");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(kSpecDigestPrefix);
  out.reserve(kSpecDigestPrefix.size() + 2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 0xf]);
  }
  return out;
}

bool SameSpec(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty() || IsHashed(a) == IsHashed(b)) return a == b;
  return IsHashed(a) ? a == SpecDigest(b) : SpecDigest(a) == b;
}

const char* EventTypeName(EventType t) {
  switch (t) {
    case EventType::kAdded:
      return "ADDED";
    case EventType::kModified:
      return "MODIFIED";
    case EventType::kDeleted:
      return "DELETED";
  }
  return "ERROR";
}

}  // namespace qm::model
