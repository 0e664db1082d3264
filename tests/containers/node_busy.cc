// Reads the simulated node's own accounting, as a GPU's per-process counters
// would be read, for podman_test.sh: `node_busy NODE [DEVICE]` prints
//   now <monotonic ns>
//   ns <pid namespace inode> <engine ns its processes used on DEVICE>
// one "ns" line per pid namespace (per container; the host's too), summed
// over that namespace's live process slots. Creates nothing: exit 1 if the
// node does not exist.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "sim/node_region.h"

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
  for (const auto& slot : node->header()->processes) {
    if (slot.pid.load() <= 0) continue;
    busy[slot.pid_ns.load()] += slot.busy_ns[device].load();
  }
  std::printf("now %llu\n", static_cast<unsigned long long>(vgpu::sim::NowNs()));
  for (const auto& [ns, ns_busy] : busy) {
    std::printf("ns %llu %llu\n", static_cast<unsigned long long>(ns),
                static_cast<unsigned long long>(ns_busy));
  }
  return 0;
}
