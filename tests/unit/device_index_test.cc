// The device index spaces (common/device_index.h): a visible index, a
// driver ordinal and a node device are different types, so code that hands
// one where another is meant does not compile; these checks fail the build if
// the types ever become interchangeable again.
#include "common/device_index.h"

#include <gtest/gtest.h>

#include <type_traits>

#include "intercept/device_map.h"
#include "intercept/node_devices.h"

namespace vgpu {
namespace {

static_assert(!std::is_convertible_v<int, VisibleIndex>, "an int is not silently an index");
static_assert(!std::is_convertible_v<VisibleIndex, DriverOrdinal>);
static_assert(!std::is_convertible_v<DriverOrdinal, VisibleIndex>);
static_assert(!std::is_convertible_v<DriverOrdinal, NodeIndex>);
static_assert(!std::is_convertible_v<NodeIndex, DriverOrdinal>);
static_assert(!std::is_constructible_v<DriverOrdinal, VisibleIndex>);
static_assert(!std::is_constructible_v<NodeIndex, DriverOrdinal>);
static_assert(!std::is_convertible_v<VisibleIndex, int>, "the number is asked for: value()");

// The conversions take the space they convert from, and only that one.
template <typename Arg>
concept ToOrdinalTakes = requires(const DeviceMap& m, Arg a) {
  m.ToOrdinal(a);
};
template <typename Arg>
concept ToVisibleTakes = requires(const DeviceMap& m, Arg a) {
  m.ToVisible(a);
};
template <typename Arg>
concept NodeDeviceTakes = requires(Arg a) { NodeDevice(a); };
static_assert(ToOrdinalTakes<VisibleIndex> && !ToOrdinalTakes<DriverOrdinal> &&
              !ToOrdinalTakes<NodeIndex> && !ToOrdinalTakes<int>);
static_assert(ToVisibleTakes<DriverOrdinal> && !ToVisibleTakes<VisibleIndex> &&
              !ToVisibleTakes<NodeIndex> && !ToVisibleTakes<int>);
static_assert(NodeDeviceTakes<DriverOrdinal> && !NodeDeviceTakes<VisibleIndex> &&
              !NodeDeviceTakes<NodeIndex> && !NodeDeviceTakes<int>);
static_assert(
    std::is_same_v<decltype(std::declval<DeviceMap>().ToOrdinal(VisibleIndex(0))), DriverOrdinal>);
static_assert(std::is_same_v<decltype(NodeDevice(DriverOrdinal(0))), NodeIndex>);

TEST(DeviceIndexTest, DefaultIsNone) {
  EXPECT_FALSE(VisibleIndex().valid());
  EXPECT_EQ(DriverOrdinal().value(), -1);
  EXPECT_TRUE(NodeIndex(0).valid());
  EXPECT_EQ(NodeIndex(3), NodeIndex(3));
  EXPECT_NE(NodeIndex(3), NodeIndex(4));
}

TEST(DeviceIndexTest, AnEmptyMapKnowsNoDevice) {
  DeviceMap map;
  EXPECT_FALSE(map.ToOrdinal(VisibleIndex(0)).valid());
  EXPECT_FALSE(map.ToVisible(DriverOrdinal(0)).valid());
  EXPECT_FALSE(map.ToOrdinal(VisibleIndex()).valid());
  EXPECT_EQ(map.uuid(VisibleIndex(0)), "") << "no out-of-range read";
  EXPECT_EQ(map.uuid(VisibleIndex()), "");
}

// VGPU_VISIBLE_DEVICES against a node of three GPUs: indices and UUIDs (any
// case), in the configured order; an item that names none is refused.
TEST(DeviceMapTest, BuildResolvesIndicesAndUuidsInTheirOrder) {
  const std::vector<std::string> node = {"GPU-aa", "GPU-bb", "GPU-cc"};
  DeviceMap map;
  ASSERT_TRUE(map.Build(node, {"gpu-CC", "0"}, true).ok());
  EXPECT_EQ(map.count(), 2);
  EXPECT_FALSE(map.identity());
  EXPECT_EQ(map.ToOrdinal(VisibleIndex(0)), DriverOrdinal(2));
  EXPECT_EQ(map.ToOrdinal(VisibleIndex(1)), DriverOrdinal(0));
  EXPECT_EQ(map.ToVisible(DriverOrdinal(1)), VisibleIndex()) << "hidden";
  EXPECT_EQ(map.uuid(VisibleIndex(0)), "GPU-cc");

  ASSERT_TRUE(map.Build(node, {}, false).ok());
  EXPECT_TRUE(map.identity());
  EXPECT_EQ(map.count(), 3);

  Status s = map.Build(node, {"3"}, true);
  EXPECT_EQ(s.code, ErrorCode::kInval);
  EXPECT_EQ(s.message,
            "VGPU_VISIBLE_DEVICES names '3', which is not one of the 3 devices of this node");
  EXPECT_EQ(map.Build(node, {"GPU-dd"}, true).code, ErrorCode::kInval);
  EXPECT_EQ(map.Build(node, {"1x"}, true).code, ErrorCode::kInval);
}

TEST(DeviceIndexTest, NodeDevicesFollowAMigration) {
  EXPECT_EQ(NodeDevice(DriverOrdinal(2)), NodeIndex(2)) << "before any migration";
  SetNodeDevice(DriverOrdinal(2), NodeIndex(5));
  EXPECT_EQ(NodeDevice(DriverOrdinal(2)), NodeIndex(5));
  EXPECT_EQ(OrdinalOfNodeDevice(NodeIndex(5)), DriverOrdinal(2));
  SetNodeDevice(DriverOrdinal(2), NodeIndex(2));
  EXPECT_EQ(OrdinalOfNodeDevice(NodeIndex(99)), DriverOrdinal()) << "no ordinal names it";
}

}  // namespace
}  // namespace vgpu
