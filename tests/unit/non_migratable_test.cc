// What suspend is refused for (intercept/non_migratable.h): bytes noted under
// a key until forgotten, by key or with their context.
#include "intercept/non_migratable.h"

#include <gtest/gtest.h>

namespace vgpu {
namespace {

CUcontext Ctx(uintptr_t n) { return reinterpret_cast<CUcontext>(n); }

TEST(NonMigratableBookTest, NotedBytesAddUpUntilForgotten) {
  NonMigratableBook book;
  EXPECT_EQ(book.Bytes(), 0u);
  book.Note(1, 100, Ctx(0x10));
  book.Note(2, 50, nullptr);
  EXPECT_EQ(book.Bytes(), 150u);
  book.Note(1, 30, Ctx(0x10));  // the same holder, its new size
  EXPECT_EQ(book.Bytes(), 80u);
  book.Forget(2);
  EXPECT_EQ(book.Bytes(), 30u);
  book.Forget(99);  // never noted: nothing happens
  EXPECT_EQ(book.Bytes(), 30u);
}

TEST(NonMigratableBookTest, AContextTakesOnlyItsOwnMemoryWithIt) {
  NonMigratableBook book;
  book.Note(1, 100, Ctx(0x10));
  book.Note(2, 200, Ctx(0x20));
  book.Note(3, 400, nullptr);  // a graph pool: no context
  book.ForgetContext(Ctx(0x10));
  EXPECT_EQ(book.Bytes(), 600u);
  book.ForgetContext(Ctx(0x20));
  EXPECT_EQ(book.Bytes(), 400u);
}

}  // namespace
}  // namespace vgpu
