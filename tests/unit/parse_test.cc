// The value parsers every front end shares (common/parse.h): what each accepts
// and, as much, what it refuses.
#include "common/parse.h"

#include <gtest/gtest.h>

#include <string>

namespace vgpu {
namespace {

TEST(ParseTest, IntegersAreDigitsWithinTheRange) {
  int64_t v = -1;
  ASSERT_TRUE(ParseInteger("1000", 1, 1000, &v));
  EXPECT_EQ(v, 1000);
  ASSERT_TRUE(ParseInteger("007", 0, 10, &v));
  EXPECT_EQ(v, 7);
  for (const char* bad :
       {"", "0", "1001", "-1", "+5", " 5", "5 ", "1e3", "0x10", "99999999999999999999999"}) {
    v = -1;
    EXPECT_FALSE(ParseInteger(bad, 1, 1000, &v)) << bad;
    EXPECT_EQ(v, -1) << bad;
  }
}

TEST(ParseTest, SharesArePercentagesAsPermille) {
  uint32_t p = 0;
  ASSERT_TRUE(ParseSharePermille("30", &p));
  EXPECT_EQ(p, 300u);
  ASSERT_TRUE(ParseSharePermille("12.5", &p));
  EXPECT_EQ(p, 125u);
  ASSERT_TRUE(ParseSharePermille(" 30%\t", &p));
  EXPECT_EQ(p, 300u);
  ASSERT_TRUE(ParseSharePermille("100", &p));
  EXPECT_EQ(p, 1000u);
  ASSERT_TRUE(ParseSharePermille("0.01", &p));
  EXPECT_EQ(p, 1u) << "a share too small to write in permille still runs a little";
  for (const char* bad : {"", "0", "100.1", "500", "-5", "1e1", "inf", "nan", "0x1e", "1.2.3", "%",
                          "30%%", "thirty", "30\n"}) {
    p = 7;
    EXPECT_FALSE(ParseSharePermille(bad, &p)) << bad;
    EXPECT_EQ(p, 7u) << bad;
  }
}

TEST(ParseTest, PercentagesAreAnyPlainDecimal) {
  double pct = -1;
  ASSERT_TRUE(ParsePercent(" 150.5% ", &pct));
  EXPECT_DOUBLE_EQ(pct, 150.5);
  ASSERT_TRUE(ParsePercent("0", &pct));
  EXPECT_DOUBLE_EQ(pct, 0);
  for (const char* bad : {"", "%", "-5", "1e3", "inf", "1.2.3", "0x10", "5 %"}) {
    EXPECT_FALSE(ParsePercent(bad, &pct)) << bad;
  }
}

TEST(ParseTest, WeightsAreOneToAThousand) {
  uint32_t w = 0;
  ASSERT_TRUE(ParseComputeWeight(" 7\t", &w));
  EXPECT_EQ(w, 7u);
  ASSERT_TRUE(ParseComputeWeight("1000", &w));
  EXPECT_EQ(w, kMaxComputeWeight);
  for (const char* bad : {"", "0", "1001", "\n5", "5\n", "+5", "2.5"}) {
    EXPECT_FALSE(ParseComputeWeight(bad, &w)) << bad;
  }
}

TEST(ParseTest, PercentagesPrintAsWritten) {
  EXPECT_EQ(FormatPercent(300), "30%");
  EXPECT_EQ(FormatPercent(125), "12.5%");
  EXPECT_EQ(FormatPercent(1), "0.1%");
  EXPECT_EQ(FormatPercent(1000), "100%");
}

TEST(ParseTest, SwitchesAreOnOrOffInAnyCase) {
  bool b = false;
  for (const char* on : {"on", "ON", "1", "true", " True "}) {
    b = false;
    ASSERT_TRUE(ParseSwitch(on, &b)) << on;
    EXPECT_TRUE(b) << on;
  }
  for (const char* off : {"off", "Off", "0", "false"}) {
    b = true;
    ASSERT_TRUE(ParseSwitch(off, &b)) << off;
    EXPECT_FALSE(b) << off;
  }
  // One meaning everywhere: libvgpu never took yes/no, so vgpud does not either.
  for (const char* bad : {"", "yes", "no", "2", "onn", "on\n"}) {
    EXPECT_FALSE(ParseSwitch(bad, &b)) << bad;
  }
}

TEST(ParseTest, DurationsTakeAUnitOrMeanSeconds) {
  int64_t ms = 0;
  ASSERT_TRUE(ParseDuration("30s", &ms));
  EXPECT_EQ(ms, 30000);
  ASSERT_TRUE(ParseDuration("250ms", &ms));
  EXPECT_EQ(ms, 250);
  ASSERT_TRUE(ParseDuration("2m", &ms));
  EXPECT_EQ(ms, 120000);
  ASSERT_TRUE(ParseDuration("1h", &ms));
  EXPECT_EQ(ms, 3600000);
  ASSERT_TRUE(ParseDuration("1.5s", &ms));
  EXPECT_EQ(ms, 1500);
  ASSERT_TRUE(ParseDuration("5", &ms));
  EXPECT_EQ(ms, 5000);
  for (const char* bad : {"", "5x", "ms", "-1s", "1.2.3s", "1e3", ".s"}) {
    ms = -1;
    EXPECT_FALSE(ParseDuration(bad, &ms)) << bad;
    EXPECT_EQ(ms, -1) << bad;
  }
}

TEST(ParseTest, DeviceIndicesAreCanonicalDecimals) {
  int i = -1;
  ASSERT_TRUE(ParseDeviceIndex("0", 15, &i));
  EXPECT_EQ(i, 0);
  ASSERT_TRUE(ParseDeviceIndex("15", 15, &i));
  EXPECT_EQ(i, 15);
  for (const char* bad : {"", "16", "01", "-1", "1a", "1000"}) {
    EXPECT_FALSE(ParseDeviceIndex(bad, 15, &i)) << bad;
  }
}

TEST(ParseTest, GpuUuidsComeOutInLowerCase) {
  std::string u;
  ASSERT_TRUE(ParseGpuUuid("gpu-0123ABCD-4567-89ab-cdef-0123456789AB", &u));
  EXPECT_EQ(u, "GPU-0123abcd-4567-89ab-cdef-0123456789ab");
  for (const char* bad :
       {"", "GPU-0123abcd-4567-89ab-cdef-0123456789a", "GPU-0123abcd-4567-89ab-cdef_0123456789ab",
        "GPU-0123abcg-4567-89ab-cdef-0123456789ab", "MIG-0123abcd-4567-89ab-cdef-0123456789ab"}) {
    EXPECT_FALSE(ParseGpuUuid(bad, &u)) << bad;
  }
}

}  // namespace
}  // namespace vgpu
