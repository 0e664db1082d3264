#include "cluster/k8s/quantity.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

namespace vgpu::k8s {
namespace {

struct Case {
  const char* text;
  int64_t value;
};

TEST(QuantityTest, ParsesTheForms) {
  constexpr int64_t kGi = int64_t{1} << 30;
  const Case kCases[] = {
      {"0", 0},
      {"1", 1},
      {"+7", 7},
      {"512Mi", int64_t{512} << 20},
      {"8Gi", 8 * kGi},
      {"1.5Gi", 3 * kGi / 2},
      {"1Ki", 1024},
      {"2Ti", int64_t{2} << 40},
      {"1Pi", int64_t{1} << 50},
      {"7Ei", int64_t{7} << 60},
      {"1k", 1000},
      {"1M", 1000000},
      {"1.5G", 1500000000},
      {"2T", 2000000000000},
      {"1P", 1000000000000000},
      {"9E", 9000000000000000000},
      {"100", 100},
      {"1e3", 1000},
      {"1E3", 1000},
      {"1.25e2", 125},
      {"5e+1", 50},
      {"1e-3", 1},   // 0.001 rounds up
      {"1500m", 2},  // 1.5
      {"2000m", 2},  // exact
      {"0m", 0},
      {"1m", 1},
      {"1n", 1},
      {"999u", 1},
      {"0.1", 1},
      {"1.", 1},
      {".5Ki", 512},
      {"0.0009765625Ki", 1},   // exactly 1 byte
      {"0.00097656251Ki", 2},  // a hair above: rounds up
      {"007", 7},
      {"9223372036854775807", std::numeric_limits<int64_t>::max()},
  };
  for (const Case& c : kCases) {
    int64_t v = -1;
    Status st = ParseQuantity(c.text, &v);
    ASSERT_TRUE(st.ok()) << c.text << ": " << st.message;
    EXPECT_EQ(v, c.value) << c.text;
  }
}

TEST(QuantityTest, RefusesGarbageNegativesAndOverflow) {
  const char* kBad[] = {"",
                        "-1",
                        "-0",
                        "Gi",
                        "1 Gi",
                        " 1",
                        "1Gi ",
                        "1GiB",
                        "1g",
                        "1K",
                        "1KI",
                        "1.2.3",
                        "1e",
                        "1e+",
                        "1ee3",
                        "e3",
                        "1Mi1",
                        ".",
                        "+",
                        "1e99999",
                        "0x10",
                        "1,5",
                        "1.5.Gi",
                        "8Ei",
                        "9223372036854775808",
                        "10E",
                        "1e19",
                        "99999999999999999999",
                        "1Ei1",
                        "abc"};
  for (const char* text : kBad) {
    int64_t v = 42;
    Status st = ParseQuantity(text, &v);
    EXPECT_FALSE(st.ok()) << '"' << text << "\" parsed as " << v;
    EXPECT_EQ(st.code, ErrorCode::kInval) << text;
    EXPECT_EQ(v, 42) << "value written on error: " << text;
  }
}

TEST(QuantityTest, HugeNegativeExponentsStillRoundUpToOne) {
  int64_t v = 0;
  ASSERT_TRUE(ParseQuantity("1e-9999", &v).ok());
  EXPECT_EQ(v, 1);
  ASSERT_TRUE(ParseQuantity("0e9999", &v).ok());
  EXPECT_EQ(v, 0);
  EXPECT_FALSE(ParseQuantity(std::string(200, '1'), &v).ok());
}

TEST(QuantityTest, FormatsBytesCanonically) {
  EXPECT_EQ(FormatBytes(0), "0");
  EXPECT_EQ(FormatBytes(1), "1");
  EXPECT_EQ(FormatBytes(1000), "1000");
  EXPECT_EQ(FormatBytes(1023), "1023");
  EXPECT_EQ(FormatBytes(1024), "1Ki");
  EXPECT_EQ(FormatBytes(1536), "1536");  // 1.5Ki: not a whole number of Ki
  EXPECT_EQ(FormatBytes(3072), "3Ki");
  EXPECT_EQ(FormatBytes(int64_t{512} << 20), "512Mi");
  EXPECT_EQ(FormatBytes(int64_t{1536} << 20), "1536Mi");
  EXPECT_EQ(FormatBytes(int64_t{8} << 30), "8Gi");
  EXPECT_EQ(FormatBytes(int64_t{80} << 30), "80Gi");
  EXPECT_EQ(FormatBytes(int64_t{1} << 60), "1Ei");
  EXPECT_EQ(FormatBytes(std::numeric_limits<int64_t>::max()), "9223372036854775807");
}

TEST(QuantityTest, FormatThenParseIsTheIdentity) {
  for (int64_t v : {int64_t{0}, int64_t{1}, int64_t{4096}, int64_t{81559} << 20, int64_t{3} << 40,
                    std::numeric_limits<int64_t>::max()}) {
    int64_t back = -1;
    ASSERT_TRUE(ParseQuantity(FormatBytes(v), &back).ok()) << v;
    EXPECT_EQ(back, v);
  }
}

}  // namespace
}  // namespace vgpu::k8s
