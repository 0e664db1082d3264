// The rules of residency/ipc_sharing.h: who counts as sharing memory with
// the process (suspend is refused while anyone does), and that a freed
// exported allocation stays allocated until its last importer is gone.
#include "residency/ipc_sharing.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace vgpu::residency {
namespace {

class IpcSharingTest : public ::testing::Test {
 protected:
  IpcSharing book_{[this](int64_t pid) { return dead_.count(pid) == 0; },
                   [this](uint64_t, uint64_t base) { freed_.push_back(base); }};
  std::set<int64_t> dead_;
  std::vector<uint64_t> freed_;
};

TEST_F(IpcSharingTest, ImportersAndExportersAreSharingPeers) {
  EXPECT_TRUE(book_.SharedWith({}).empty());
  EXPECT_FALSE(book_.Exporting());
  book_.NoteImporter(7, 300);
  book_.NoteImporter(8, 200);
  book_.NoteImporter(7, 200);
  EXPECT_TRUE(book_.Exporting());
  EXPECT_EQ(book_.SharedWith({100}), (std::vector<int64_t>{100, 200, 300}));
  book_.ForgetImporter(7, 200);
  EXPECT_EQ(book_.SharedWith({}), (std::vector<int64_t>{200, 300}));  // still imports buffer 8
  book_.ForgetImporter(8, 200);
  book_.ForgetImporter(7, 300);
  EXPECT_TRUE(book_.SharedWith({}).empty());
  EXPECT_FALSE(book_.Exporting());
}

// Two contexts of one process opened the buffer: it shares until both closed.
TEST_F(IpcSharingTest, EachMappingOfAProcessIsCounted) {
  book_.NoteImporter(7, 300);
  book_.NoteImporter(7, 300);
  ASSERT_TRUE(book_.DeferFree(7, 0x3000));
  book_.ForgetImporter(7, 300);
  EXPECT_EQ(book_.SharedWith({}), (std::vector<int64_t>{300}));
  EXPECT_TRUE(freed_.empty());
  book_.ForgetImporter(7, 300);
  EXPECT_TRUE(book_.SharedWith({}).empty());
  EXPECT_EQ(freed_, (std::vector<uint64_t>{0x3000}));
}

TEST_F(IpcSharingTest, ExitedProcessesShareNothing) {
  book_.NoteImporter(7, 300);
  dead_.insert(300);
  dead_.insert(100);
  EXPECT_TRUE(book_.SharedWith({100}).empty());
}

TEST_F(IpcSharingTest, FreeWaitsForTheLastImporter) {
  EXPECT_FALSE(book_.DeferFree(7, 0x1000)) << "nobody imports it: free at once";
  book_.NoteImporter(7, 300);
  book_.NoteImporter(7, 400);
  ASSERT_TRUE(book_.DeferFree(7, 0x1000));
  book_.ForgetImporter(7, 300);
  EXPECT_TRUE(freed_.empty()) << "400 still maps it";
  book_.ForgetImporter(7, 400);
  EXPECT_EQ(freed_, (std::vector<uint64_t>{0x1000}));
  book_.ForgetImporter(7, 400);  // a late close frees nothing twice
  EXPECT_EQ(freed_.size(), 1u);
}

TEST_F(IpcSharingTest, AnImporterThatExitedReleasesTheFree) {
  book_.NoteImporter(7, 300);
  ASSERT_TRUE(book_.DeferFree(7, 0x2000));
  dead_.insert(300);
  EXPECT_TRUE(book_.SharedWith({}).empty());
  EXPECT_EQ(freed_, (std::vector<uint64_t>{0x2000}));
}

TEST_F(IpcSharingTest, RefusalNamesThePeers) {
  EXPECT_EQ(SharedMemoryRefusal({}), "");
  EXPECT_EQ(SharedMemoryRefusal({12, 34}).rfind("memory shared with PIDs 12, 34 (CUDA IPC)", 0),
            0u);
}

}  // namespace
}  // namespace vgpu::residency
