#include "cluster/k8s/node_state.h"

#include <unistd.h>

#include <algorithm>

#include "ctl/control/client.h"

namespace vgpu::k8s {

bool NodeState::operator==(const NodeState& o) const {
  auto same_gpu = [](const driver::GpuModel& a, const driver::GpuModel& b) {
    return a.memory.uuid == b.memory.uuid && a.memory.index == b.memory.index &&
           a.memory.total == b.memory.total && a.product == b.product && a.cc_major == b.cc_major &&
           a.cc_minor == b.cc_minor;
  };
  return std::equal(gpus.begin(), gpus.end(), o.gpus.begin(), o.gpus.end(), same_gpu) &&
         drained == o.drained && vgpud == o.vgpud && oversubscribe == o.oversubscribe;
}

Status ReadNodeState(const driver::NodeGpus& nvml, const std::string& run_dir, NodeState* out,
                     std::string* warning) {
  *out = NodeState{};
  warning->clear();
  out->gpus = nvml.Models();
  if (out->gpus.empty()) return Status::Error(ErrorCode::kIo, "NVML lists no GPU");
  ctl::Request req;
  req.cmd = "ps";
  ctl::Response resp;
  Status s = ctl::CallDaemon(run_dir, req, nullptr, &resp, 2000);
  if (!s.ok() || !resp.ok) {
    *warning = "vgpud does not answer (" + (s.ok() ? resp.error : s.message) +
               "): no drained GPU known, physical memory advertised";
    return Status::Ok();
  }
  out->vgpud = true;
  const nlohmann::json& r = resp.result;
  out->oversubscribe = r.is_object() && r.value("oversubscribe", false);
  if (r.is_object() && r.contains("devices") && r["devices"].is_array()) {
    for (const nlohmann::json& d : r["devices"]) {
      if (d.is_object() && d.value("drained", false) && d.contains("uuid") &&
          d["uuid"].is_string()) {
        out->drained.push_back(d["uuid"].get<std::string>());
      }
    }
  }
  std::sort(out->drained.begin(), out->drained.end());
  return Status::Ok();
}

std::vector<SliceGpu> SliceGpus(const NodeState& s) {
  std::vector<SliceGpu> out;
  for (const driver::GpuModel& g : s.gpus) {
    SliceGpu sg;
    sg.index = g.memory.index;
    sg.uuid = g.memory.uuid;
    sg.product = g.product;
    sg.cc_major = g.cc_major;
    sg.cc_minor = g.cc_minor;
    sg.memory_bytes = g.memory.total;
    sg.drained = std::binary_search(s.drained.begin(), s.drained.end(), g.memory.uuid);
    out.push_back(sg);
  }
  return out;
}

std::vector<NodeGpu> ClaimGpus(const std::vector<driver::GpuModel>& gpus,
                               const std::string& dev_dir) {
  std::vector<NodeGpu> out;
  for (const driver::GpuModel& g : gpus) {
    std::string node = dev_dir + "/nvidia" + std::to_string(g.memory.index);
    if (::access(node.c_str(), F_OK) != 0) node.clear();
    out.push_back({g.memory.index, g.memory.uuid, g.memory.total, node});
  }
  return out;
}

double EffectiveOvercommit(const NodeState& s, double overcommit) {
  return s.vgpud && s.oversubscribe ? overcommit : 1.0;
}

}  // namespace vgpu::k8s
