// The shared-region opener behind the quota ledger and the scheduler region
// (common/shm_region.h): create, attach, and refusal of regions that are not
// exactly what the caller expects.
#include "common/shm_region.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

namespace vgpu {
namespace {

struct TestLayout {
  uint64_t magic;
  uint32_t version;
  uint32_t region_bytes;
  std::atomic<uint32_t> ready;
  uint32_t reserved;
  uint64_t payload[8];
};
static_assert(ShmRegionHeaderMatches<TestLayout>());

constexpr uint64_t kMagic = 0x5453455452485356ull;
constexpr uint32_t kVersion = 3;

class ShmRegionTest : public ::testing::Test {
 protected:
  void TearDown() override { shm_unlink(name_.c_str()); }

  ShmRegionSpec Spec(size_t bytes = sizeof(TestLayout), uint64_t magic = kMagic,
                     uint32_t version = kVersion) const {
    return {
        .name = name_, .what = "test region", .magic = magic, .version = version, .bytes = bytes};
  }

  // Opens as the caller of OpenShmRegion does: a creator initializes the header.
  Result<ShmRegionMapping> Open(const ShmRegionSpec& spec) {
    Result<ShmRegionMapping> m = OpenShmRegion(spec);
    if (m.ok() && m->created) {
      auto* l = static_cast<ShmRegionHeader*>(m->addr);
      l->magic = spec.magic;
      l->version = spec.version;
      l->region_bytes = static_cast<uint32_t>(spec.bytes);
      l->ready.store(1, std::memory_order_release);
    }
    return m;
  }

  // Expects `spec` to be refused with a one-line message naming the file and `why`.
  void ExpectRefused(const ShmRegionSpec& spec, const std::string& why) {
    Result<ShmRegionMapping> m = OpenShmRegion(spec);
    EXPECT_EQ(m.status().code, ErrorCode::kIo);
    EXPECT_EQ(m->addr, nullptr);
    const std::string& error = m.status().message;
    EXPECT_NE(error.find("test region /dev/shm" + name_), std::string::npos) << error;
    EXPECT_NE(error.find(why), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }

  const std::string name_ = "/vgpu-shm-region-test-" + std::to_string(getpid()) + "-" +
                            ::testing::UnitTest::GetInstance()->current_test_info()->name();
};

TEST_F(ShmRegionTest, CreatesThenAttaches) {
  Result<ShmRegionMapping> first = Open(Spec());
  ASSERT_TRUE(first.ok()) << first.status().message;
  EXPECT_TRUE(first->created);
  struct stat st {};
  ASSERT_EQ(stat(("/dev/shm" + name_).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(static_cast<size_t>(st.st_size), sizeof(TestLayout));
  static_cast<TestLayout*>(first->addr)->payload[3] = 42;

  Result<ShmRegionMapping> second = Open(Spec());
  ASSERT_TRUE(second.ok()) << second.status().message;
  EXPECT_FALSE(second->created);
  EXPECT_EQ(second.status().message, "");
  EXPECT_EQ(static_cast<TestLayout*>(second->addr)->payload[3], 42u);  // the same memory
  munmap(first->addr, sizeof(TestLayout));
  munmap(second->addr, sizeof(TestLayout));
}

TEST_F(ShmRegionTest, ForeignSizeIsRefused) {
  Result<ShmRegionMapping> m = Open(Spec());
  ASSERT_TRUE(m.ok()) << m.status().message;
  ExpectRefused(Spec(sizeof(TestLayout) + 64), "has size " + std::to_string(sizeof(TestLayout)));
  // A header that disagrees with the file's size is refused too.
  static_cast<TestLayout*>(m->addr)->region_bytes = 12;
  ExpectRefused(Spec(), "header says 12");
  munmap(m->addr, sizeof(TestLayout));
}

TEST_F(ShmRegionTest, ForeignMagicOrVersionIsRefused) {
  Result<ShmRegionMapping> m = Open(Spec());
  ASSERT_TRUE(m.ok()) << m.status().message;
  ExpectRefused(Spec(sizeof(TestLayout), kMagic + 1), "bad magic");
  ExpectRefused(Spec(sizeof(TestLayout), kMagic, kVersion + 1), "has version 3");
  munmap(m->addr, sizeof(TestLayout));
}

TEST_F(ShmRegionTest, RegionOpenToOthersIsRefused) {
  Result<ShmRegionMapping> m = Open(Spec());
  ASSERT_TRUE(m.ok()) << m.status().message;
  ASSERT_EQ(chmod(("/dev/shm" + name_).c_str(), 0640), 0);
  ExpectRefused(Spec(), "mode 640");
  munmap(m->addr, sizeof(TestLayout));
}

// A node-wide region is created 0666, which the creator's umask narrows until
// its fchmod: an opener that comes in between waits for the creator instead of
// refusing a region that is about to be right.
TEST_F(ShmRegionTest, ANodeWideRegionIsJudgedOnceItsCreatorSizedIt) {
  ShmRegionSpec spec = Spec();
  spec.node_wide = true;
  int fd = shm_open(name_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(fchmod(fd, 0644), 0);  // as a 022 umask leaves it
  std::thread creator([fd] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_EQ(fchmod(fd, 0666), 0);
    ASSERT_EQ(ftruncate(fd, sizeof(TestLayout)), 0);
    void* p = mmap(nullptr, sizeof(TestLayout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ASSERT_NE(p, MAP_FAILED);
    auto* l = static_cast<TestLayout*>(p);
    l->magic = kMagic;
    l->version = kVersion;
    l->region_bytes = sizeof(TestLayout);
    l->ready.store(1, std::memory_order_release);
    munmap(p, sizeof(TestLayout));
  });
  Result<ShmRegionMapping> m = OpenShmRegion(spec);
  creator.join();
  close(fd);
  ASSERT_TRUE(m.ok()) << m.status().message;
  EXPECT_FALSE(m->created);
  munmap(m->addr, sizeof(TestLayout));
}

TEST_F(ShmRegionTest, PrivateRegionIsZero) {
  void* p = MapPrivateRegion(sizeof(TestLayout));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(static_cast<TestLayout*>(p)->ready.load(), 0u);
  munmap(p, sizeof(TestLayout));
}

}  // namespace
}  // namespace vgpu
