// The rule of quota/mapped_handles.h: a cuMemCreate handle released while
// mapped keeps its charge until its last mapping is unmapped; one released
// unmapped is not held; a reused handle value is another handle.
#include "quota/mapped_handles.h"

#include <gtest/gtest.h>

namespace vgpu {
namespace {

Charge Bytes(uint64_t n) {
  Charge c;
  c.bytes = n;
  c.device = 1;
  return c;
}

TEST(MappedHandlesTest, AReleasedHandleIsChargedUntilItsLastUnmap) {
  MappedHandles m;
  m.Mapped(0x1000, 0x1000, 7);
  m.Mapped(0x8000, 0x1000, 7);  // mapped twice
  ASSERT_TRUE(m.IsMapped(7));
  const uint64_t key = m.Defer(7, Bytes(4096));
  EXPECT_FALSE(m.IsMapped(7)) << "the value 7 names no live handle any more";
  EXPECT_TRUE(m.Unmapped(0x1000, 0x1000).empty()) << "still mapped at 0x8000";
  auto done = m.Unmapped(0x8000, 0x1000);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].first, key);
  EXPECT_EQ(done[0].second.bytes, 4096u);
  EXPECT_EQ(done[0].second.device, 1);
  EXPECT_TRUE(m.Unmapped(0x8000, 0x1000).empty()) << "returned once";
}

TEST(MappedHandlesTest, AHandleUnmappedBeforeItsReleaseIsNotHeld) {
  MappedHandles m;
  m.Mapped(0x1000, 0x1000, 7);
  EXPECT_TRUE(m.Unmapped(0x1000, 0x1000).empty());
  EXPECT_FALSE(m.IsMapped(7)) << "its release returns the charge itself";
}

TEST(MappedHandlesTest, AReusedHandleValueIsAnotherHandle) {
  MappedHandles m;
  m.Mapped(0x1000, 0x1000, 7);
  const uint64_t key = m.Defer(7, Bytes(4096));
  m.Mapped(0x4000, 0x1000, 7);  // the driver gave the value out again
  EXPECT_TRUE(m.IsMapped(7));
  // Unmapping the new handle returns nothing; the old one's charge stays.
  EXPECT_TRUE(m.Unmapped(0x4000, 0x1000).empty());
  auto done = m.Unmapped(0x1000, 0x1000);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].first, key);
}

TEST(MappedHandlesTest, OneUnmapMayCoverSeveralMappings) {
  MappedHandles m;
  m.Mapped(0x1000, 0x1000, 7);
  m.Mapped(0x2000, 0x1000, 8);
  m.Defer(7, Bytes(1));
  m.Defer(8, Bytes(2));
  EXPECT_EQ(m.Unmapped(0x1000, 0x2000).size(), 2u);
}

}  // namespace
}  // namespace vgpu
