// The process's half of a migration (residency/migration.h) on a fake host: a
// node of four GPUs, a job that sees one, the driver's ordinal -> GPU map as a
// test sets it (what cuCheckpointProcessRestore with GPU pairs leaves), and a
// private quota ledger. The compute share is not reached (native policy).
#include "residency/migration.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "quota/quota_ledger.h"

namespace vgpu {
namespace {

using json = nlohmann::json;
constexpr uint64_t kMiB = 1024 * 1024;

class FakeHost : public MigrationHost {
 public:
  std::vector<std::string> driver = {"GPU-0", "GPU-1", "GPU-2", "GPU-3"};  // by ordinal
  std::vector<int> node = {0, 1, 2, 3};                                    // by ordinal
  std::vector<std::string> visible_uuid = {"GPU-0"};
  std::vector<int> visible_ordinal = {0};
  std::unique_ptr<QuotaLedger> quota;
  bool running = true;
  std::atomic<bool> driver_running{true};  // read by the watchdog thread
  bool gate_closed = false;
  int view_moves = 0;
  std::string sharing;

  int DriverDeviceCount() override { return static_cast<int>(driver.size()); }
  std::string DriverUuid(DriverOrdinal p) override {
    return p.valid() && p.value() < DriverDeviceCount() ? driver[p.value()] : "";
  }
  bool DriverSaysRunning() override { return driver_running; }
  int VisibleCount() override { return static_cast<int>(visible_uuid.size()); }
  std::string VisibleUuid(VisibleIndex v) override { return visible_uuid[v.value()]; }
  DriverOrdinal OrdinalOf(VisibleIndex v) override {
    return DriverOrdinal(visible_ordinal[v.value()]);
  }
  void SetVisibleUuid(VisibleIndex v, const std::string& u) override {
    visible_uuid[v.value()] = u;
  }
  NodeIndex NodeOf(DriverOrdinal p) override { return NodeIndex(node[p.value()]); }
  void SetNode(DriverOrdinal p, NodeIndex n) override { node[p.value()] = n.value(); }
  void ViewMoved() override { ++view_moves; }
  QuotaLedger* ledger() override { return quota.get(); }
  ComputeShare* share() override { return nullptr; }
  bool Running() override { return running; }
  void CloseGate() override {
    EXPECT_FALSE(gate_closed) << "closed twice";
    gate_closed = true;
  }
  void OpenGate() override {
    EXPECT_TRUE(gate_closed) << "opened a gate it did not close";
    gate_closed = false;
  }
  std::string SharingRefusal() override { return sharing; }
};

json Pairs(std::vector<std::pair<std::string, std::string>> pairs, int64_t hold_ms = 300000) {
  json a = json::array();
  for (const auto& [from, to] : pairs) a.push_back({{"from", from}, {"to", to}});
  return {{"pairs", a}, {"hold_ms", hold_ms}};
}

class MigrationTest : public ::testing::Test {
 protected:
  // A private ledger: 1 GiB on every GPU, the job holding 100 MiB on GPU-0.
  void SetUp() override {
    auto opened = QuotaLedger::Open("", {1024 * kMiB, 1024 * kMiB, 1024 * kMiB, 1024 * kMiB});
    ASSERT_TRUE(opened.ok()) << opened.status().message;
    host_.quota = std::move(opened.value());
    ASSERT_TRUE(host_.quota->TryReserve(0, 100 * kMiB));
  }
  uint64_t Used(int node) { return host_.quota->Used(node); }
  // What the driver's restore with the pair GPU-0 -> `to` leaves behind.
  void DriverMoved(const std::string& to) { host_.driver[0] = to; }

  FakeHost host_;
  std::unique_ptr<Migration> migration_ = std::make_unique<Migration>(&host_);
};

TEST_F(MigrationTest, PrepareReservesOnTheTargetAndHoldsTheJob) {
  Result<json> r = migration_->Prepare(Pairs({{"GPU-0", "GPU-2"}}));
  ASSERT_TRUE(r.ok()) << r.status().message;
  EXPECT_EQ(r.value()["held"], true);
  EXPECT_TRUE(host_.gate_closed);
  EXPECT_EQ(Used(0), 100 * kMiB) << "still charged on the source";
  EXPECT_EQ(Used(2), 100 * kMiB) << "reserved on the target";
}

// A job that shares device memory with another process does not move alone.
TEST_F(MigrationTest, AJobSharingMemoryIsRefusedBeforeAnythingIsHeld) {
  host_.sharing = "memory shared with PIDs 12 (CUDA IPC)";
  Result<json> r = migration_->Prepare(Pairs({{"GPU-0", "GPU-2"}}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code, ErrorCode::kBusy);
  EXPECT_EQ(r.status().message, host_.sharing);
  EXPECT_FALSE(host_.gate_closed);
  EXPECT_EQ(Used(2), 0u) << "nothing reserved on the target";
}

TEST_F(MigrationTest, FinishMovesTheChargeAndTheViewWhereTheDriverMovedTheJob) {
  ASSERT_TRUE(migration_->Prepare(Pairs({{"GPU-0", "GPU-2"}})).ok());
  DriverMoved("GPU-2");
  Result<json> r = migration_->Finish();
  ASSERT_TRUE(r.ok()) << r.status().message;
  EXPECT_EQ(r.value()["moved"],
            (json::array({{{"from", "GPU-0"}, {"to", "GPU-2"}, {"bytes", 100 * kMiB}}})));
  EXPECT_EQ(Used(0), 0u);
  EXPECT_EQ(Used(2), 100 * kMiB);
  EXPECT_EQ(host_.node[0], 2) << "ordinal 0 names node device 2 now";
  EXPECT_EQ(host_.visible_uuid[0], "GPU-2");
  EXPECT_EQ(host_.view_moves, 1);
  EXPECT_FALSE(host_.gate_closed);
}

TEST_F(MigrationTest, AFailedMoveLeavesTheChargeOnTheSource) {
  ASSERT_TRUE(migration_->Prepare(Pairs({{"GPU-0", "GPU-2"}})).ok());
  Result<json> r = migration_->Finish();  // the driver kept the job where it was
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.value()["moved"].empty());
  EXPECT_EQ(Used(0), 100 * kMiB);
  EXPECT_EQ(Used(2), 0u) << "the target's reservation is dropped";
  EXPECT_EQ(host_.node[0], 0);
  EXPECT_FALSE(host_.gate_closed);
}

TEST_F(MigrationTest, AJobRecoveredOnAThirdGpuIsChargedThere) {
  ASSERT_TRUE(migration_->Prepare(Pairs({{"GPU-0", "GPU-2"}})).ok());
  DriverMoved("GPU-3");
  ASSERT_TRUE(migration_->Finish().ok());
  EXPECT_EQ(Used(0), 0u);
  EXPECT_EQ(Used(2), 0u);
  EXPECT_EQ(Used(3), 100 * kMiB);
  EXPECT_EQ(host_.visible_uuid[0], "GPU-3");
}

TEST_F(MigrationTest, ATargetOverTheQuotaIsRefusedBeforeAnythingIsHeld) {
  uint64_t used = 0;
  ASSERT_TRUE(host_.quota->TrySetLimit(2, 50 * kMiB, &used));
  Result<json> r = migration_->Prepare(Pairs({{"GPU-0", "GPU-2"}}));
  EXPECT_EQ(r.status().code, ErrorCode::kBusy);
  EXPECT_NE(r.status().message.find("do not fit its group's quota on GPU-2"), std::string::npos)
      << r.status().message;
  EXPECT_FALSE(host_.gate_closed);
  EXPECT_EQ(Used(2), 0u);
  EXPECT_EQ(migration_->Finish().status().code, ErrorCode::kInval) << "nothing is in progress";
}

TEST_F(MigrationTest, ARefusedPairReleasesTheReservationsOfTheOthers) {
  host_.visible_uuid = {"GPU-0", "GPU-1"};
  host_.visible_ordinal = {0, 1};
  Result<json> r = migration_->Prepare(Pairs({{"GPU-0", "GPU-2"}, {"GPU-1", "GPU-9"}}));
  EXPECT_EQ(r.status().code, ErrorCode::kInval);
  EXPECT_NE(r.status().message.find("no GPU GPU-9"), std::string::npos) << r.status().message;
  EXPECT_EQ(Used(2), 0u) << "the first pair's reservation is returned";
  EXPECT_FALSE(host_.gate_closed);
}

TEST_F(MigrationTest, MalformedRequestsAreRefused) {
  EXPECT_EQ(migration_->Prepare(json::object()).status().code, ErrorCode::kInval);
  EXPECT_EQ(migration_->Prepare(Pairs({{"GPU-7", "GPU-2"}})).status().code, ErrorCode::kInval);
  json bad = {{"pairs", json::array({{{"from", 3}}})}};
  EXPECT_EQ(migration_->Prepare(bad).status().code, ErrorCode::kInval);
  EXPECT_FALSE(host_.gate_closed);
}

TEST_F(MigrationTest, OneMigrationAtATime) {
  ASSERT_TRUE(migration_->Prepare(Pairs({{"GPU-0", "GPU-2"}})).ok());
  EXPECT_EQ(migration_->Prepare(Pairs({{"GPU-0", "GPU-1"}})).status().code, ErrorCode::kBusy);
  ASSERT_TRUE(migration_->Finish().ok());
  EXPECT_EQ(migration_->Finish().status().code, ErrorCode::kInval);
  // The next migration, after the first finished, may start.
  EXPECT_TRUE(migration_->Prepare(Pairs({{"GPU-0", "GPU-1"}})).ok());
}

TEST_F(MigrationTest, TheQuotaGoesWithTheJobToAnUnlimitedGpu) {
  host_.quota->SetLimit(1, kUnlimited);
  ASSERT_TRUE(migration_->Prepare(Pairs({{"GPU-0", "GPU-1"}})).ok());
  EXPECT_EQ(host_.quota->Limit(1), 1024 * kMiB);
}

TEST_F(MigrationTest, ASuspendedJobsGateStaysClosedByItsSuspension) {
  host_.running = false;
  host_.gate_closed = true;  // the suspension's
  ASSERT_TRUE(migration_->Prepare(Pairs({{"GPU-0", "GPU-2"}})).ok());
  DriverMoved("GPU-2");
  ASSERT_TRUE(migration_->Finish().ok());
  EXPECT_TRUE(host_.gate_closed) << "the resume opens it, not the migration";
  EXPECT_EQ(Used(2), 100 * kMiB);
}

// vgpuctl killed between prepare and finish: once the hold is over and the
// driver says the job runs, the watchdog finishes by itself.
TEST_F(MigrationTest, TheWatchdogNeverLeavesAJobHeld) {
  host_.driver_running = false;  // the driver still holds it locked
  ASSERT_TRUE(migration_->Prepare(Pairs({{"GPU-0", "GPU-2"}}, /*hold_ms=*/1000)).ok());
  DriverMoved("GPU-2");
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(migration_->Prepare(Pairs({{"GPU-0", "GPU-1"}})).status().code, ErrorCode::kBusy)
      << "not finished while the driver does not let the job run";
  host_.driver_running = true;
  bool finished = false;
  for (int i = 0; i < 200 && !finished; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    finished = migration_->Finish().status().code == ErrorCode::kInval;
  }
  EXPECT_TRUE(finished) << "the watchdog finished the migration";
  EXPECT_EQ(Used(2), 100 * kMiB);
  EXPECT_EQ(host_.visible_uuid[0], "GPU-2");
}

TEST_F(MigrationTest, DestroyingAHeldMigrationEndsItsWatchdog) {
  ASSERT_TRUE(migration_->Prepare(Pairs({{"GPU-0", "GPU-2"}})).ok());  // held 300 s
  migration_.reset();  // returns: the watchdog was woken, not left sleeping
  SUCCEED();
}

}  // namespace
}  // namespace vgpu
