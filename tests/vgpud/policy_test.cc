// vgpud's decision rules (ctl/vgpud/policy.h) on hand-made jobs and GPUs at a
// fixed time: who is suspended, in which order waiting jobs come back, what
// is parked to make room for a resume, when a move replaces a suspend, where a
// drained GPU's jobs go, and when parked memory spills to disk. Each test
// names the rule it guards; each fails when that rule is broken.
#include "ctl/vgpud/policy.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace vgpu::vgpud::policy {
namespace {

using std::chrono::seconds;
using Pids = std::vector<pid_t>;

constexpr uint64_t kGiB = 1ull << 30;
const Clock::time_point kNow = Clock::time_point{} + std::chrono::hours(100);

// A job resident on the devices given as (uuid, GiB), running for `ran`.
Job MakeJob(pid_t pid, Priority p, std::initializer_list<std::pair<const char*, uint64_t>> devices,
            Clock::duration ran = seconds(1000), int weight = 1) {
  Job j;
  j.pid = pid;
  j.priority = p;
  j.weight = weight;
  j.running_since = kNow - ran;
  for (const auto& [uuid, gib] : devices) {
    j.devices.push_back({uuid, gib * kGiB, gib * kGiB, 0});
  }
  return j;
}

Job Waiting(Job j, Clock::duration waited) {
  j.state = JobState::kWaiting;
  j.waiting_since = kNow - waited;
  for (JobDevice& d : j.devices) d.used = 0;
  return j;
}

Jobs Of(std::initializer_list<Job> list) {
  Jobs jobs;
  for (const Job& j : list) jobs[j.pid] = j;
  return jobs;
}

// GPUs of 16 GiB with the given GiB available.
Room Gpus(std::initializer_list<std::pair<const char*, uint64_t>> free_gib) {
  Room room;
  for (const auto& [uuid, gib] : free_gib) {
    room.push_back({uuid, 16 * kGiB, gib * kGiB, gib * kGiB});
  }
  return room;
}

Rules Quantum(int s) {
  Rules r;
  r.quantum = std::chrono::milliseconds(s * 1000);
  return r;
}

TEST(VictimsTest, LowerPriorityFirstAndNeverAHigherOne) {
  const Jobs jobs = Of({MakeJob(1, Priority::kHigh, {{"A", 4}}),
                        MakeJob(2, Priority::kNormal, {{"A", 4}}, seconds(500)),
                        MakeJob(3, Priority::kLow, {{"A", 4}}, seconds(5))});
  EXPECT_EQ(Victims(jobs, "A", 9, Priority::kNormal, Quantum(30), kNow), (Pids{3, 2}))
      << "the low job goes first though it ran less; the high job never goes for a normal one";
  EXPECT_EQ(Victims(jobs, "A", 9, Priority::kLow, Quantum(30), kNow), Pids{})
      << "a low job suspends nobody of higher priority, and the other low job has not had its "
         "quantum";
  EXPECT_EQ(Victims(jobs, "A", 9, Priority::kHigh, Quantum(30), kNow), (Pids{3, 2, 1}));
}

TEST(VictimsTest, ALowerPriorityNeedsNoQuantum) {
  const Jobs jobs = Of({MakeJob(3, Priority::kLow, {{"A", 4}}, seconds(1))});
  EXPECT_EQ(Victims(jobs, "A", 9, Priority::kNormal, Quantum(30), kNow), Pids{3});
}

TEST(VictimsTest, AnEqualPriorityOnlyAfterQuantumTimesWeight) {
  const Rules r = Quantum(10);
  auto victims = [&](Clock::duration ran, int weight) {
    return Victims(Of({MakeJob(5, Priority::kNormal, {{"A", 4}}, ran, weight)}), "A", 9,
                   Priority::kNormal, r, kNow);
  };
  EXPECT_EQ(victims(seconds(9), 1), Pids{});
  EXPECT_EQ(victims(seconds(11), 1), Pids{5});
  EXPECT_EQ(victims(seconds(29), 3), Pids{}) << "weight 3: three quanta";
  EXPECT_EQ(victims(seconds(31), 3), Pids{5});
}

TEST(VictimsTest, AmongEqualsTheOneThatHeldTheDeviceLongest) {
  const Jobs jobs = Of({MakeJob(1, Priority::kNormal, {{"A", 4}}, seconds(100)),
                        MakeJob(2, Priority::kNormal, {{"A", 4}}, seconds(300)),
                        MakeJob(3, Priority::kNormal, {{"A", 4}}, seconds(200))});
  EXPECT_EQ(Victims(jobs, "A", 9, Priority::kNormal, Quantum(30), kNow), (Pids{2, 3, 1}));
}

TEST(VictimsTest, ARecentRefusalBacksOff) {
  Job j = MakeJob(4, Priority::kLow, {{"A", 4}});
  j.refused_until = kNow + seconds(5);
  EXPECT_EQ(Victims(Of({j}), "A", 9, Priority::kNormal, Quantum(30), kNow), Pids{});
  EXPECT_EQ(Victims(Of({j}), "A", 9, Priority::kNormal, Quantum(30), kNow + seconds(5)), Pids{4});
}

// A job sharing device memory with another process (CUDA IPC) is never parked
// or moved alone: libvgpu would refuse, and half a group must not wait.
TEST(VictimsTest, AJobSharingMemoryIsNeverAVictim) {
  Job shared = MakeJob(4, Priority::kLow, {{"A", 4}});
  shared.shared_with = {5};
  const Jobs jobs = Of({shared, MakeJob(6, Priority::kLow, {{"A", 4}})});
  EXPECT_EQ(Victims(jobs, "A", 9, Priority::kNormal, Quantum(30), kNow), Pids{6});
}

// VGPU_PREEMPTIBLE=false (an admin's choice): never suspended, rotated or
// parked for anyone, not even a high-priority job that has waited its turn.
TEST(VictimsTest, ANonPreemptibleJobIsNeverAVictim) {
  Job exempt = MakeJob(4, Priority::kLow, {{"A", 4}}, seconds(1000));
  exempt.preemptible = false;
  const Jobs jobs = Of({exempt, MakeJob(6, Priority::kNormal, {{"A", 4}})});
  EXPECT_EQ(Victims(jobs, "A", 9, Priority::kHigh, Quantum(30), kNow), Pids{6});
  const Job w = Waiting(MakeJob(9, Priority::kHigh, {{"A", 8}}), seconds(100));
  const ResumePlan plan = PlanResume(w, Of({exempt, w}), Gpus({{"A", 4}}), Quantum(30), kNow);
  EXPECT_EQ(plan.kind, ResumePlan::Kind::kWait) << "only the exempt job could make room";
  const RoomPlan room =
      PlanRoom(w, "A", 8 * kGiB, Of({exempt}), Gpus({{"A", 4}, {"B", 16}}), {}, Quantum(30), kNow);
  EXPECT_TRUE(room.victims.empty());
  EXPECT_TRUE(room.moves.empty()) << "a move suspends it too";
}

// A stopped job (SIGSTOP, a Slurm suspend: /proc says T) cannot answer its
// agent's socket: never a victim, never moved, never drained, never resumed
// while stopped; a make_room that only it could serve waits, naming it.
TEST(VictimsTest, AStoppedJobIsNeverAVictimNorMovedNorResumed) {
  Job stopped = MakeJob(4, Priority::kLow, {{"A", 4}}, seconds(1000));
  stopped.stopped = true;
  const Jobs jobs = Of({stopped, MakeJob(6, Priority::kLow, {{"A", 4}})});
  EXPECT_EQ(Victims(jobs, "A", 9, Priority::kHigh, Quantum(30), kNow), Pids{6});
  const Job r = MakeJob(9, Priority::kHigh, {{"A", 4}});
  const RoomPlan room = PlanRoom(r, "A", 8 * kGiB, Of({r, stopped}), Gpus({{"A", 4}, {"B", 16}}),
                                 {}, Quantum(30), kNow);
  EXPECT_EQ(room.kind, RoomPlan::Kind::kWait);
  EXPECT_TRUE(room.moves.empty()) << "a move asks its agent too";
  EXPECT_EQ(room.stopped_holders, Pids{4});
  EXPECT_TRUE(PlanDrain(Of({stopped}), Gpus({{"A", 4}, {"B", 16}}), {"A"}, kNow).empty());
  Job stopped_waiting = Waiting(MakeJob(5, Priority::kHigh, {{"A", 4}}), seconds(50));
  stopped_waiting.stopped = true;
  EXPECT_EQ(ResumeOrder(
                Of({stopped_waiting, Waiting(MakeJob(7, Priority::kLow, {{"A", 4}}), seconds(1))})),
            Pids{7})
      << "a resume would not be answered";
}

TEST(VictimsTest, OnlyRunningJobsOnThatDeviceOtherThanTheRequester) {
  Job parked = Waiting(MakeJob(2, Priority::kLow, {{"A", 4}}), seconds(1));
  Job by_hand = MakeJob(3, Priority::kLow, {{"A", 4}});
  by_hand.state = JobState::kSuspended;
  const Jobs jobs =
      Of({MakeJob(1, Priority::kLow, {{"A", 4}}), parked, by_hand,
          MakeJob(4, Priority::kLow, {{"B", 4}}), MakeJob(5, Priority::kLow, {{"A", 0}})});
  EXPECT_EQ(Victims(jobs, "A", 9, Priority::kNormal, Quantum(30), kNow), Pids{1});
  EXPECT_EQ(Victims(jobs, "A", 1, Priority::kHigh, Quantum(30), kNow), Pids{}) << "not itself";
}

TEST(PolicyTest, PreemptionIsSuspendingALowerPriority) {
  EXPECT_TRUE(Preempts(MakeJob(1, Priority::kLow, {}), Priority::kNormal));
  EXPECT_FALSE(Preempts(MakeJob(1, Priority::kNormal, {}), Priority::kNormal));
}

TEST(ResumeOrderTest, HigherPriorityFirstThenLongestWaiting) {
  const Jobs jobs = Of({Waiting(MakeJob(1, Priority::kNormal, {{"A", 4}}), seconds(10)),
                        Waiting(MakeJob(2, Priority::kNormal, {{"A", 4}}), seconds(30)),
                        Waiting(MakeJob(3, Priority::kHigh, {{"A", 4}}), seconds(1)),
                        Waiting(MakeJob(4, Priority::kLow, {{"A", 4}}), seconds(99)),
                        MakeJob(5, Priority::kHigh, {{"A", 4}})});
  EXPECT_EQ(ResumeOrder(jobs), (Pids{3, 2, 1, 4}));
}

TEST(PlanResumeTest, ResumesWhenItsMemoryFitsOnEveryDevice) {
  const Job w = Waiting(MakeJob(1, Priority::kNormal, {{"A", 6}, {"B", 2}}), seconds(1));
  EXPECT_EQ(PlanResume(w, Of({w}), Gpus({{"A", 6}, {"B", 2}}), Quantum(30), kNow).kind,
            ResumePlan::Kind::kResume);
  EXPECT_TRUE(Fits(w, Gpus({{"A", 6}, {"B", 2}})));
  EXPECT_FALSE(Fits(w, Gpus({{"A", 6}, {"B", 1}}))) << "every device counts";
  EXPECT_FALSE(Fits(w, Gpus({{"A", 6}}))) << "an unknown device has no room";
}

TEST(PlanResumeTest, ParksTheFewestVictimsThatMakeRoomAtItsTurn) {
  const Job w = Waiting(MakeJob(1, Priority::kNormal, {{"A", 8}}), seconds(1));
  const Jobs jobs = Of({w, MakeJob(2, Priority::kNormal, {{"A", 5}}, seconds(100)),
                        MakeJob(3, Priority::kNormal, {{"A", 5}}, seconds(200)),
                        MakeJob(4, Priority::kNormal, {{"A", 5}}, seconds(300))});
  const ResumePlan plan = PlanResume(w, jobs, Gpus({{"A", 1}}), Quantum(30), kNow);
  ASSERT_EQ(plan.kind, ResumePlan::Kind::kParkThenResume);
  using Park = std::vector<std::pair<pid_t, std::string>>;
  EXPECT_EQ(plan.park, (Park{{4, "A"}, {3, "A"}})) << "1 + 5 < 8 <= 1 + 5 + 5: two, oldest first";
}

TEST(PlanResumeTest, WaitsWhileTheVictimsCouldNotMakeRoom) {
  const Job w = Waiting(MakeJob(1, Priority::kNormal, {{"A", 8}}), seconds(1));
  // The running job has not had its quantum: nothing can be freed yet.
  Jobs jobs = Of({w, MakeJob(2, Priority::kNormal, {{"A", 12}}, seconds(5))});
  EXPECT_EQ(PlanResume(w, jobs, Gpus({{"A", 4}}), Quantum(30), kNow).kind, ResumePlan::Kind::kWait);
  EXPECT_EQ(PlanResume(w, jobs, Gpus({{"A", 4}}), Quantum(30), kNow + seconds(30)).kind,
            ResumePlan::Kind::kParkThenResume);
  Rules off = Quantum(30);
  off.oversubscribe = false;
  EXPECT_EQ(PlanResume(w, jobs, Gpus({{"A", 4}}), off, kNow + seconds(30)).kind,
            ResumePlan::Kind::kWait)
      << "without oversubscription nothing is suspended for a resume";
}

TEST(PlanResumeTest, AHighPriorityJobPreemptsAtOnce) {
  const Job w = Waiting(MakeJob(1, Priority::kHigh, {{"A", 8}}), seconds(1));
  const Jobs jobs = Of({w, MakeJob(2, Priority::kNormal, {{"A", 12}}, seconds(1))});
  const ResumePlan plan = PlanResume(w, jobs, Gpus({{"A", 4}}), Quantum(30), kNow);
  ASSERT_EQ(plan.kind, ResumePlan::Kind::kParkThenResume);
  ASSERT_EQ(plan.park.size(), 1u);
  EXPECT_EQ(plan.park[0].first, 2);
}

TEST(PlanRoomTest, ProceedsWhenTheDeviceHasRoom) {
  const Job r = MakeJob(1, Priority::kNormal, {{"A", 2}});
  EXPECT_EQ(PlanRoom(r, "A", 4 * kGiB, Of({r}), Gpus({{"A", 4}}), {}, Quantum(30), kNow).kind,
            RoomPlan::Kind::kProceed);
}

TEST(PlanRoomTest, RefusesWithoutOversubscriptionOrWhenItCannotFitEvenAlone) {
  const Job r = MakeJob(1, Priority::kNormal, {{"A", 10}});
  const Jobs jobs = Of({r, MakeJob(2, Priority::kLow, {{"A", 5}})});
  Rules off = Quantum(30);
  off.oversubscribe = false;
  RoomPlan p = PlanRoom(r, "A", 4 * kGiB, jobs, Gpus({{"A", 1}}), {}, off, kNow);
  EXPECT_EQ(p.kind, RoomPlan::Kind::kRefuse);
  EXPECT_EQ(p.why, "oversubscription is off");
  p = PlanRoom(r, "A", 7 * kGiB, jobs, Gpus({{"A", 1}}), {}, Quantum(30), kNow);
  EXPECT_EQ(p.kind, RoomPlan::Kind::kRefuse) << "10 + 7 GiB > 16 GiB";
  EXPECT_EQ(p.why, "does not fit on the device even alone");
}

TEST(PlanRoomTest, MovesTheCheapestJobToTheRoomiestGpuInsteadOfSuspending) {
  const Job r = MakeJob(1, Priority::kNormal, {{"A", 4}});
  Job two_gpus = MakeJob(4, Priority::kLow, {{"A", 5}, {"C", 1}});
  const Jobs jobs = Of({r, MakeJob(2, Priority::kLow, {{"A", 6}}),
                        MakeJob(3, Priority::kLow, {{"A", 3}}), two_gpus});
  const RoomPlan p =
      PlanRoom(r, "A", 4 * kGiB, jobs, Gpus({{"A", 1}, {"B", 5}, {"C", 8}}), {}, Quantum(30), kNow);
  ASSERT_EQ(p.kind, RoomPlan::Kind::kMakeRoom);
  ASSERT_EQ(p.moves.size(), 2u) << "a job on two GPUs is not moved";
  EXPECT_EQ(p.moves[0].pid, 3) << "3 GiB is the cheapest move that makes room";
  EXPECT_EQ(p.moves[0].to, "C") << "the GPU with the most room";
  EXPECT_EQ(p.moves[0].bytes, 3 * kGiB);
  EXPECT_EQ(p.moves[1].pid, 2);
  EXPECT_EQ(p.victims, (Pids{2, 3, 4})) << "suspend only if no move succeeds";
}

TEST(PlanRoomTest, NoMoveOntoADrainedGpuOrOneWithoutRoom) {
  const Job r = MakeJob(1, Priority::kNormal, {{"A", 4}});
  const Jobs jobs = Of({r, MakeJob(2, Priority::kLow, {{"A", 6}})});
  RoomPlan p =
      PlanRoom(r, "A", 4 * kGiB, jobs, Gpus({{"A", 1}, {"B", 8}}), {"B"}, Quantum(30), kNow);
  EXPECT_TRUE(p.moves.empty());
  EXPECT_EQ(p.victims, Pids{2});
  p = PlanRoom(r, "A", 4 * kGiB, jobs, Gpus({{"A", 1}, {"B", 5}}), {}, Quantum(30), kNow);
  EXPECT_TRUE(p.moves.empty()) << "6 GiB does not fit in 5";
  EXPECT_EQ(p.kind, RoomPlan::Kind::kMakeRoom);
}

TEST(PlanRoomTest, WaitsWhenNothingMayGiveWay) {
  const Job r = MakeJob(1, Priority::kNormal, {{"A", 4}});
  Job refused = MakeJob(2, Priority::kLow, {{"A", 6}});
  refused.refused_until = kNow + seconds(1);
  const Jobs jobs = Of({r, refused, MakeJob(3, Priority::kHigh, {{"A", 4}})});
  // No other GPU: nothing to move to; the low job refused, the high one outranks it.
  const RoomPlan p = PlanRoom(r, "A", 4 * kGiB, jobs, Gpus({{"A", 1}}), {}, Quantum(30), kNow);
  EXPECT_EQ(p.kind, RoomPlan::Kind::kWait);
  EXPECT_EQ(PlanRoom(r, "A", 4 * kGiB, jobs, Gpus({{"A", 1}, {"B", 8}}), {}, Quantum(30), kNow)
                .moves.at(0)
                .pid,
            3)
      << "a move is no suspension: any priority may be moved";
}

TEST(PlanRoomTest, AJobPlacedByASchedulerIsSuspendedNeverMoved) {
  const Job r = MakeJob(1, Priority::kNormal, {{"A", 4}});
  Job placed = MakeJob(2, Priority::kLow, {{"A", 6}});
  placed.placed = true;  // a Slurm job's GRES, a DRA claim's device
  const Jobs jobs = Of({r, placed});
  const RoomPlan p =
      PlanRoom(r, "A", 4 * kGiB, jobs, Gpus({{"A", 1}, {"B", 8}}), {}, Quantum(30), kNow);
  EXPECT_TRUE(p.moves.empty()) << "B may be another job's GPU in the scheduler's books";
  EXPECT_EQ(p.kind, RoomPlan::Kind::kMakeRoom);
  EXPECT_EQ(p.victims, Pids{2}) << "time-sliced on its own GPU instead";
  EXPECT_TRUE(PlanDrain(jobs, Gpus({{"A", 1}, {"B", 8}}), {"A"}, kNow).size() == 1u)
      << "only the unplaced job leaves the drained GPU";
  EXPECT_EQ(PlanDrain(jobs, Gpus({{"A", 1}, {"B", 8}}), {"A"}, kNow).at(0).pid, 1);
}

TEST(PlanDrainTest, EachJobGoesWhereTheMovesBeforeItLeftTheMostRoom) {
  const Jobs jobs =
      Of({MakeJob(1, Priority::kNormal, {{"A", 5}}), MakeJob(2, Priority::kNormal, {{"A", 4}}),
          MakeJob(3, Priority::kNormal, {{"B", 2}})});
  const std::vector<Move> moves =
      PlanDrain(jobs, Gpus({{"A", 7}, {"B", 6}, {"C", 10}}), {"A"}, kNow);
  ASSERT_EQ(moves.size(), 2u) << "only jobs on the drained GPU move";
  EXPECT_EQ(moves[0].pid, 1);
  EXPECT_EQ(moves[0].to, "C") << "10 GiB free";
  EXPECT_EQ(moves[1].pid, 2);
  EXPECT_EQ(moves[1].to, "B") << "C has 5 GiB left after the first move, B 6";
  EXPECT_EQ(moves[1].from, "A");
}

TEST(PlanDrainTest, AJobThatFitsNowhereIsNamedAndARefusedOneWaits) {
  Job refused = MakeJob(2, Priority::kNormal, {{"A", 1}});
  refused.refused_until = kNow + seconds(3);
  Job parked = Waiting(MakeJob(3, Priority::kNormal, {{"A", 1}}), seconds(1));
  const Jobs jobs = Of({MakeJob(1, Priority::kNormal, {{"A", 9}}), refused, parked});
  const std::vector<Move> moves = PlanDrain(jobs, Gpus({{"A", 0}, {"B", 8}}), {"A"}, kNow);
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].pid, 1);
  EXPECT_TRUE(moves[0].to.empty()) << "no GPU has 9 GiB";
  EXPECT_TRUE(PlanDrain(jobs, Gpus({{"A", 0}, {"B", 8}}), {}, kNow).empty());
  EXPECT_EQ(TargetFor(kGiB, "A", Gpus({{"A", 16}, {"B", 8}}), {"B"}), "") << "drained or excepted";
}

TEST(HostBudgetTest, ParkedMemorySpillsToDiskPastTheBudget) {
  EXPECT_EQ(HostBudget(0, 64 * kGiB), 32 * kGiB) << "half of RAM by default";
  EXPECT_EQ(HostBudget(4 * kGiB, 64 * kGiB), 4 * kGiB);
  Job on_disk = Waiting(MakeJob(2, Priority::kNormal, {{"A", 8}}), seconds(1));
  on_disk.parked_on_disk = true;
  const Jobs jobs = Of({Waiting(MakeJob(1, Priority::kNormal, {{"A", 3}}), seconds(1)), on_disk,
                        MakeJob(3, Priority::kNormal, {{"A", 9}})});
  EXPECT_EQ(ParkedInHost(jobs), 3 * kGiB) << "what is on disk or running does not count";
  EXPECT_FALSE(ParkOnDisk(jobs, MakeJob(4, Priority::kNormal, {{"A", 1}}), 4 * kGiB));
  EXPECT_TRUE(ParkOnDisk(jobs, MakeJob(4, Priority::kNormal, {{"A", 2}}), 4 * kGiB));
}

}  // namespace
}  // namespace vgpu::vgpud::policy
