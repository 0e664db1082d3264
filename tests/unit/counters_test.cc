// The counters table (common/counters.h): names unique and snake_case, each
// matching its enumerator, units known, help a sentence, every counter
// documented in docs/counters.md; counting is per id and relaxed-atomic.
#include "common/counters.h"

#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace vgpu::counters {
namespace {

bool IsSnakeCase(const std::string& s) {
  if (s.empty() || !std::islower(static_cast<unsigned char>(s[0])) || s.back() == '_') return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool ok = std::islower(static_cast<unsigned char>(c)) ||
              std::isdigit(static_cast<unsigned char>(c)) || c == '_';
    if (!ok || (c == '_' && s[i + 1] == '_')) return false;
  }
  return true;
}

// kAllocationsRefused -> allocations_refused.
std::string SnakeOf(const std::string& id) {
  std::string out;
  for (size_t i = 1; i < id.size(); ++i) {
    char c = id[i];
    if (std::isupper(static_cast<unsigned char>(c))) {
      if (!out.empty()) out += '_';
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else {
      out += c;
    }
  }
  return out;
}

TEST(CountersTable, NamesAreUniqueSnakeCaseAndMatchTheirIds) {
  std::set<std::string> seen;
  for (const Info& c : kInfo) {
    EXPECT_TRUE(IsSnakeCase(c.name)) << c.name;
    EXPECT_TRUE(seen.insert(c.name).second) << c.name << " is declared twice";
    EXPECT_EQ(SnakeOf(c.id), c.name) << "the wire name must follow the enumerator " << c.id;
  }
  EXPECT_EQ(seen.size(), kCount);
}

TEST(CountersTable, UnitsAreKnownAndHelpIsASentence) {
  const std::set<std::string> units = {"allocations", "bytes", "launches",
                                       "ns",          "calls", "operations"};
  for (const Info& c : kInfo) {
    EXPECT_TRUE(units.count(c.unit)) << c.name << ": unit '" << c.unit << "'";
    std::string help = c.help;
    ASSERT_FALSE(help.empty()) << c.name;
    EXPECT_TRUE(std::isupper(static_cast<unsigned char>(help[0]))) << c.name;
    EXPECT_EQ(help.back(), '.') << c.name;
    bool ns = std::string(c.name).ends_with("_ns"), bytes = std::string(c.name).ends_with("_bytes");
    if (ns) {
      EXPECT_EQ(std::string(c.unit), "ns") << c.name;
    }
    if (bytes) {
      EXPECT_EQ(std::string(c.unit), "bytes") << c.name;
    }
  }
}

TEST(CountersTable, EveryCounterIsDocumented) {
  std::ifstream file(std::string(VGPU_DOCS_DIR) + "/counters.md");
  ASSERT_TRUE(file.good()) << VGPU_DOCS_DIR "/counters.md is missing";
  std::vector<std::string> rows;
  for (std::string line; std::getline(file, line);) {
    if (line.starts_with("| `")) rows.push_back(line);
  }
  for (const Info& c : kInfo) {
    std::string row;
    for (const auto& r : rows) {
      if (r.starts_with("| `" + std::string(c.name) + "` |")) row = r;
    }
    ASSERT_FALSE(row.empty()) << c.name << " has no row in docs/counters.md";
    EXPECT_NE(row.find("| " + std::string(c.unit) + " |"), std::string::npos)
        << c.name << ": the row must give the unit " << c.unit;
  }
  EXPECT_EQ(rows.size(), kCount) << "docs/counters.md lists a counter the table does not have";
}

TEST(Counters, AddCountsPerIdFromManyThreads) {
  uint64_t refused = Get(Id::kAllocationsRefused);
  uint64_t bytes = Get(Id::kQuotaChargedBytes);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < 1000; ++i) Add(Id::kAllocationsRefused);
    });
  }
  for (auto& t : threads) t.join();
  Add(Id::kQuotaChargedBytes, 1 << 20);
  EXPECT_EQ(Get(Id::kAllocationsRefused), refused + 4000);
  EXPECT_EQ(Get(Id::kQuotaChargedBytes), bytes + (1 << 20));
  EXPECT_EQ(Get(static_cast<size_t>(Id::kQuotaChargedBytes)), Get(Id::kQuotaChargedBytes));
}

TEST(Counters, EachCellHasItsOwnCacheLine) {
  static_assert(alignof(Cell) == 64 && sizeof(Cell) == 64);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(&g_cells[1]) - reinterpret_cast<uintptr_t>(&g_cells[0]),
            64u);
}

TEST(ScopedWait, CountsOnlyWhenItWaited) {
  uint64_t events = Get(Id::kLaunchesThrottled);
  uint64_t ns = Get(Id::kThrottleWaitNs);
  { ScopedWait w(Id::kLaunchesThrottled, Id::kThrottleWaitNs); }
  EXPECT_EQ(Get(Id::kLaunchesThrottled), events) << "no wait, no count";
  {
    ScopedWait w(Id::kLaunchesThrottled, Id::kThrottleWaitNs);
    w.Waiting();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    w.Waiting();  // a second wait in the same scope is the same launch
  }
  EXPECT_EQ(Get(Id::kLaunchesThrottled), events + 1);
  EXPECT_GE(Get(Id::kThrottleWaitNs) - ns, 4'000'000u);
}

}  // namespace
}  // namespace vgpu::counters
