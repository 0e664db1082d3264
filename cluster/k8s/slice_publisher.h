// Publishes the node's ResourceSlice (resource_slice.h) through the API
// server and keeps it current.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "cluster/k8s/kube_client.h"
#include "cluster/k8s/resource_slice.h"
#include "common/status.h"

namespace vgpu::k8s {

enum class PublishOutcome { kCreated, kUpdated, kUnchanged };

// Keeps the node's one ResourceSlice of options.driver in step with its GPUs:
// lists the slices of this node and driver, creates one when there is none,
// replaces it (PUT with its resourceVersion, pool.generation one above every
// slice of the pool) when its spec differs or stray slices share the pool,
// and deletes the strays. A 409 (someone else wrote first) re-reads and
// retries once. Not thread-safe: one publisher per node, called from one
// thread.
class SlicePublisher {
 public:
  SlicePublisher(KubeClient* client, SliceOptions options);

  Status Publish(const std::vector<SliceGpu>& gpus, PublishOutcome* outcome = nullptr);
  // vgpud may start or stop time-slicing: the advertised memory follows.
  void set_memory_overcommit(double ratio) { options_.memory_overcommit = ratio; }

 private:
  Status PublishOnce(const std::vector<SliceGpu>& gpus, PublishOutcome* outcome);
  Status ListOurs(std::vector<nlohmann::json>* slices);
  Status Replace(const std::vector<nlohmann::json>& existing, nlohmann::json desired);

  KubeClient* client_;
  SliceOptions options_;
  // The last generation written: a slice deleted behind our back is recreated
  // above it, so consumers that cached the old one still prefer the new.
  int64_t last_generation_ = 0;
};

}  // namespace vgpu::k8s
