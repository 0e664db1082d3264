// vgpud's Prometheus exposition (docs/vgpud.md, "Metrics"): the text format
// 0.0.4 at /metrics, served by cpp-httplib on --metrics-listen (loopback by
// default). Rendering is a pure function of a snapshot so that a test can
// check it with promtool.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "ctl/vgpud/job.h"
#include "ctl/vgpud/node_gpus.h"

namespace vgpu::vgpud {

class Coordinator;

std::string RenderMetrics(const std::vector<Job>& jobs, const std::vector<GpuMemory>& gpus,
                          bool oversubscribe, const std::vector<std::string>& drained = {});

class MetricsServer {
 public:
  MetricsServer(Coordinator* c, bool oversubscribe);
  ~MetricsServer();
  // listen: "HOST:PORT".
  Status Start(const std::string& listen);
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vgpu::vgpud
