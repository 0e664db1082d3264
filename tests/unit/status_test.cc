// vgpu's one error type (common/status.h): a Status never reads as success
// with an error code, and a Result holds either its value or why not.
#include "common/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace vgpu {
namespace {

TEST(StatusTest, AnErrorNeverCarriesOk) {
  Status s = Status::Error(ErrorCode::kOk, "lost");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code, ErrorCode::kIo);
  EXPECT_EQ(ErrorCodeName(ErrorCode::kBusy), "EBUSY");
  EXPECT_EQ(ErrorCodeFromName("EBUSY"), ErrorCode::kBusy);
  EXPECT_EQ(ErrorCodeFromName("ENOTACODE"), ErrorCode::kIo);
}

Result<std::unique_ptr<int>> Make(bool fail) {
  if (fail) return Status::Error(ErrorCode::kInval, "bad input");
  return std::make_unique<int>(7);
}

TEST(StatusTest, AResultHoldsItsValueOrItsError) {
  Result<std::unique_ptr<int>> good = Make(false);
  ASSERT_TRUE(good.ok());
  ASSERT_NE(good.value(), nullptr);
  EXPECT_EQ(*good.value(), 7);
  Result<std::unique_ptr<int>> bad = Make(true);
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code, ErrorCode::kInval);
  EXPECT_EQ(bad.status().message, "bad input");
  EXPECT_EQ(bad.value(), nullptr) << "an error's value is T{}, never garbage";
}

TEST(StatusTest, AnOkStatusIsNotAResult) {
  // Returning Status::Ok() where a value is due would read as success
  // without one: it becomes an internal error.
  Result<std::string> r = Status::Ok();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code, ErrorCode::kIo);
}

struct Report {
  int bytes = 0;
};

TEST(StatusTest, MembersOfTheValueAreReachedThroughTheArrow) {
  Result<Report> r = Report{42};
  EXPECT_EQ(r->bytes, 42);
  r->bytes = 43;
  EXPECT_EQ(r.value().bytes, 43);
}

}  // namespace
}  // namespace vgpu
