// Reads the simulated node's own accounting, as a GPU's per-process counters
// would be read, for podman_test.sh: `node_busy NODE [DEVICE]` prints
//   now <monotonic ns>
//   ns <pid namespace inode> <engine ns its processes used on DEVICE>
//   pid <pid namespace inode> <pid in it> <engine ns>
//   lease_changes <count>
// one "ns" line per pid namespace (per container; the host's too), summed
// over that namespace's live process slots, one "pid" line per process, and
// the node's scheduler region's count of lease changes on DEVICE (hand-overs;
// -1 without a region). Creates nothing: exit 1 if the node does not exist.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "share/sched_region.h"
#include "sim/node/node_region.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: node_busy NODE [DEVICE]\n");
    return 2;
  }
  const int device = argc > 2 ? std::atoi(argv[2]) : 0;
  std::string error;
  vgpu::sim::NodeRegion* node = vgpu::sim::NodeRegion::Attach(argv[1], &error);
  if (node == nullptr) {
    std::fprintf(stderr, "node_busy: %s\n", error.c_str());
    return 1;
  }
  std::map<uint64_t, uint64_t> busy;
  std::printf("now %llu\n", static_cast<unsigned long long>(vgpu::sim::NowNs()));
  for (const auto& slot : node->header()->processes) {
    if (slot.pid.load() <= 0) continue;
    const uint64_t b = slot.busy_ns[device].load();
    busy[slot.pid_ns.load()] += b;
    std::printf("pid %llu %d %llu\n", static_cast<unsigned long long>(slot.pid_ns.load()),
                slot.pid.load(), static_cast<unsigned long long>(b));
  }
  // Only an existing region is read (Open would create one).
  std::unique_ptr<vgpu::SchedRegion> region;
  if (access(("/dev/shm" + std::string(vgpu::kNodeSchedRegion)).c_str(), F_OK) == 0) {
    region = std::move(vgpu::SchedRegion::Open(vgpu::kNodeSchedRegion).value());
  }
  std::printf("lease_changes %lld\n",
              region ? static_cast<long long>(region->device(device).gen.load()) : -1ll);
  for (const auto& [ns, ns_busy] : busy) {
    std::printf("ns %llu %llu\n", static_cast<unsigned long long>(ns),
                static_cast<unsigned long long>(ns_busy));
  }
  return 0;
}
