// service::DecodedSlices: readers of the same slice version share one decoded copy, a new
// version (or other content under the same uid and version) is decoded again, nothing is kept
// once no reader holds it, and decode errors are not kept.
#include "service/decoded_slices.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/status/status.h"

namespace qm::service {
namespace {

model::Object SliceObject(const std::string& uid, int64_t rv, const std::string& body) {
  model::Object o;
  o.resource = "resourceslices.resource.k8s.io";
  o.meta.name = "slice-" + uid;
  o.meta.uid = uid;
  o.meta.resource_version = rv;
  o.body = body;
  return o;
}

class DecodedSlicesTest : public ::testing::Test {
 protected:
  // A decode that names the slice after its argument and counts its calls.
  auto Decoder(const std::string& name) {
    return [this, name]() -> absl::StatusOr<model::ResourceSlice> {
      ++decodes_;
      model::ResourceSlice s;
      s.name = name;
      return s;
    };
  }

  DecodedSlices slices_;
  int decodes_ = 0;
};

TEST_F(DecodedSlicesTest, ReadersOfOneVersionShareOneCopy) {
  const model::Object o = SliceObject("u1", 7, R"({"spec":{}})");
  auto first = slices_.Get(o, Decoder("a"));
  ASSERT_TRUE(first.ok());
  auto second = slices_.Get(o, Decoder("b"));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(first->get(), second->get());
  EXPECT_EQ((*second)->name, "a");
  EXPECT_EQ(decodes_, 1);
  EXPECT_EQ(slices_.live(), 1u);
}

TEST_F(DecodedSlicesTest, ANewVersionOrOtherContentIsDecodedAgain) {
  auto v7 = slices_.Get(SliceObject("u1", 7, "{}"), Decoder("v7"));
  auto v8 = slices_.Get(SliceObject("u1", 8, "{}"), Decoder("v8"));
  auto other_body = slices_.Get(SliceObject("u1", 8, R"({"x":1})"), Decoder("other"));
  auto other_uid = slices_.Get(SliceObject("u2", 8, R"({"x":1})"), Decoder("u2"));
  ASSERT_TRUE(v7.ok() && v8.ok() && other_body.ok() && other_uid.ok());
  EXPECT_EQ((*v7)->name, "v7");
  EXPECT_EQ((*v8)->name, "v8");
  EXPECT_EQ((*other_body)->name, "other");
  EXPECT_EQ((*other_uid)->name, "u2");
  EXPECT_EQ(decodes_, 4);
  // The newest version of u1 is the one shared from now on.
  auto again = slices_.Get(SliceObject("u1", 8, R"({"x":1})"), Decoder("again"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), other_body->get());
  EXPECT_EQ(decodes_, 4);
}

TEST_F(DecodedSlicesTest, NothingIsKeptOnceNoReaderHoldsIt) {
  const model::Object o = SliceObject("u1", 7, "{}");
  {
    auto held = slices_.Get(o, Decoder("first"));
    ASSERT_TRUE(held.ok());
    EXPECT_EQ(slices_.live(), 1u);
  }
  EXPECT_EQ(slices_.live(), 0u);
  auto later = slices_.Get(o, Decoder("second"));
  ASSERT_TRUE(later.ok());
  EXPECT_EQ((*later)->name, "second");
  EXPECT_EQ(decodes_, 2);
}

TEST_F(DecodedSlicesTest, DecodeErrorsAreReturnedAndNotKept) {
  const model::Object o = SliceObject("u1", 7, "{}");
  auto failing = [this]() -> absl::StatusOr<model::ResourceSlice> {
    ++decodes_;
    return absl::InvalidArgumentError("spec.driver: Required value");
  };
  auto bad = slices_.Get(o, failing);
  EXPECT_EQ(bad.status(), absl::InvalidArgumentError("spec.driver: Required value"));
  auto bad_again = slices_.Get(o, failing);
  EXPECT_FALSE(bad_again.ok());
  EXPECT_EQ(decodes_, 2);
  EXPECT_EQ(slices_.live(), 0u);
}

}  // namespace
}  // namespace qm::service
