// Stream capture: a capturing stream appends its operations to a graph as a
// chain; the capture's open ends (Graph::capture_deps) are what the next
// captured node depends on, and what cuStreamUpdateCaptureDependencies edits.
// Capturing one graph from several streams (fork/join through events) is not
// modelled (see api_stream.cc).
#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "sim/api/api_common.h"
#include "sim/engine/graph.h"
#include "sim/api/graph_api.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

std::atomic<uint64_t> g_capture_ids{1};
// cuThreadExchangeStreamCaptureMode's per-thread mode (recorded: the sim
// does not refuse unsafe calls during a capture by mode).
thread_local CUstreamCaptureMode t_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

bool ValidMode(CUstreamCaptureMode mode) {
  int m = RawEnum(mode);
  return m >= CU_STREAM_CAPTURE_MODE_GLOBAL && m <= CU_STREAM_CAPTURE_MODE_RELAXED;
}

// The sim's edges are all default ones (no ports, no programmatic edges).
bool DefaultEdges(const CUgraphEdgeData* data, size_t n) {
  if (data == nullptr) return true;
  for (size_t i = 0; i < n; ++i) {
    if (data[i].from_port != 0 || data[i].to_port != 0 ||
        data[i].type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT) {
      return false;
    }
  }
  return true;
}

// Nodes that all belong to g (g->mu held).
bool NodesOf(Graph* g, const CUgraphNode* nodes, size_t n, std::vector<GraphNode*>* out) {
  if (n > 0 && nodes == nullptr) return false;
  for (size_t i = 0; i < n; ++i) {
    GraphNode* node = NodeOf(nodes[i]);
    if (node == nullptr || node->owner != g) return false;
    out->push_back(node);
  }
  return true;
}

CUresult StartCapture(Stream* s, Graph* g, CUstreamCaptureMode mode) {
  if (s->legacy()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (s->capture_graph() != nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  g->capturing = s;
  s->set_capture(g, mode, g_capture_ids.fetch_add(1));
  return CUDA_SUCCESS;
}

CUresult BeginCapture(CUstream h, CUstreamCaptureMode mode, bool ptds) {
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptds, &s); r != CUDA_SUCCESS) return r;
  if (s->legacy()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (s->capture_graph() != nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  if (!ValidMode(mode)) return CUDA_ERROR_INVALID_VALUE;
  return StartCapture(s, NewGraph(), mode);
}

CUresult BeginCaptureToGraph(CUstream h, CUgraph hg, const CUgraphNode* deps,
                             const CUgraphEdgeData* data, size_t n, CUstreamCaptureMode mode,
                             bool ptds) {
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptds, &s); r != CUDA_SUCCESS) return r;
  auto* g = reinterpret_cast<Graph*>(hg);
  if (!LiveGraph(g) || !ValidMode(mode) || !DefaultEdges(data, n)) return CUDA_ERROR_INVALID_VALUE;
  if (g->capturing != nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  std::vector<GraphNode*> open;
  {
    std::lock_guard<std::mutex> lock(g->mu);
    if (!NodesOf(g, deps, n, &open)) return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = StartCapture(s, g, mode); r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(g->mu);
  g->capture_into_existing = true;
  g->capture_invalidated = false;
  g->capture_deps = std::move(open);
  return CUDA_SUCCESS;
}

CUresult EndCapture(CUstream h, CUgraph* out, bool ptds) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptds, &s); r != CUDA_SUCCESS) return r;
  Graph* g = s->capture_graph();
  if (g == nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  s->set_capture(nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL, 0);
  g->capturing = nullptr;
  {
    std::lock_guard<std::mutex> lock(g->mu);
    g->capture_deps.clear();
  }
  const bool existing = g->capture_into_existing;
  g->capture_into_existing = false;
  if (g->capture_invalidated) {
    *out = nullptr;
    g->capture_invalidated = false;
    // A graph the capture made is gone; the caller's own graph stays theirs.
    if (!existing) DeleteGraph(g);
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  *out = reinterpret_cast<CUgraph>(g);
  return CUDA_SUCCESS;
}

CUresult IsCapturing(CUstream h, CUstreamCaptureStatus* status, bool ptds) {
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptds, &s); r != CUDA_SUCCESS) return r;
  *status = s->capture_graph() != nullptr ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                                          : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

CUresult CaptureInfo(CUstream h, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
                     const CUgraphNode** deps, const CUgraphEdgeData** edges, size_t* num,
                     bool ptds) {
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptds, &s); r != CUDA_SUCCESS) return r;
  Graph* g = s->capture_graph();
  *status = g != nullptr ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  if (id != nullptr && g != nullptr) *id = s->capture_id();
  if (graph != nullptr) *graph = reinterpret_cast<CUgraph>(g);
  // Valid until the next capture call on this thread, as the driver documents
  // "until the next API call" for the returned array.
  static thread_local std::vector<CUgraphNode> open;
  static thread_local std::vector<CUgraphEdgeData> open_edges;
  open.clear();
  if (g != nullptr) {
    std::lock_guard<std::mutex> lock(g->mu);
    for (GraphNode* n : g->capture_deps) open.push_back(reinterpret_cast<CUgraphNode>(n));
  }
  open_edges.assign(open.size(), CUgraphEdgeData{});
  if (deps != nullptr) *deps = open.empty() ? nullptr : open.data();
  if (edges != nullptr) *edges = open.empty() ? nullptr : open_edges.data();
  if (num != nullptr) *num = open.size();
  return CUDA_SUCCESS;
}

CUresult UpdateCaptureDeps(CUstream h, const CUgraphNode* deps, const CUgraphEdgeData* data,
                           size_t n, unsigned flags, bool ptds) {
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptds, &s); r != CUDA_SUCCESS) return r;
  if (flags != CU_STREAM_ADD_CAPTURE_DEPENDENCIES && flags != CU_STREAM_SET_CAPTURE_DEPENDENCIES) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Graph* g = s->capture_graph();
  if (g == nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  if (!DefaultEdges(data, n)) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g->mu);
  std::vector<GraphNode*> nodes;
  if (!NodesOf(g, deps, n, &nodes)) return CUDA_ERROR_INVALID_VALUE;
  if (flags == CU_STREAM_SET_CAPTURE_DEPENDENCIES) g->capture_deps.clear();
  for (GraphNode* node : nodes) {
    if (std::find(g->capture_deps.begin(), g->capture_deps.end(), node) == g->capture_deps.end()) {
      g->capture_deps.push_back(node);
    }
  }
  return CUDA_SUCCESS;
}

}  // namespace

// CUDA 10.0's form: no mode argument; the driver treats it as global mode.
#undef cuStreamBeginCapture
SIM_EXPORT CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream) {
  SIM_ENTER("cuStreamBeginCapture");
  return BeginCapture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream hStream) {
  SIM_ENTER("cuStreamBeginCapture_ptsz");
  return BeginCapture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, true);
}
SIM_EXPORT CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) {
  SIM_ENTER("cuStreamBeginCapture_v2");
  return BeginCapture(hStream, mode, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream,
                                                         CUstreamCaptureMode mode) {
  SIM_ENTER("cuStreamBeginCapture_v2_ptsz");
  return BeginCapture(hStream, mode, true);
}
SIM_EXPORT CUresult CUDAAPI cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
                                                        const CUgraphNode* dependencies,
                                                        const CUgraphEdgeData* dependencyData,
                                                        size_t numDependencies,
                                                        CUstreamCaptureMode mode) {
  SIM_ENTER("cuStreamBeginCaptureToGraph");
  return BeginCaptureToGraph(hStream, hGraph, dependencies, dependencyData, numDependencies, mode,
                             false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph,
                                                             const CUgraphNode* dependencies,
                                                             const CUgraphEdgeData* dependencyData,
                                                             size_t numDependencies,
                                                             CUstreamCaptureMode mode) {
  SIM_ENTER("cuStreamBeginCaptureToGraph_ptsz");
  return BeginCaptureToGraph(hStream, hGraph, dependencies, dependencyData, numDependencies, mode,
                             true);
}
SIM_EXPORT CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph* phGraph) {
  SIM_ENTER("cuStreamEndCapture");
  return EndCapture(hStream, phGraph, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream, CUgraph* phGraph) {
  SIM_ENTER("cuStreamEndCapture_ptsz");
  return EndCapture(hStream, phGraph, true);
}
SIM_EXPORT CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream,
                                                CUstreamCaptureStatus* captureStatus) {
  SIM_ENTER("cuStreamIsCapturing");
  return IsCapturing(hStream, captureStatus, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream hStream,
                                                     CUstreamCaptureStatus* captureStatus) {
  SIM_ENTER("cuStreamIsCapturing_ptsz");
  return IsCapturing(hStream, captureStatus, true);
}
// CUDA 10.1's form: status and id only.
#undef cuStreamGetCaptureInfo
SIM_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream hStream,
                                                   CUstreamCaptureStatus* captureStatus_out,
                                                   cuuint64_t* id_out) {
  SIM_ENTER("cuStreamGetCaptureInfo");
  return CaptureInfo(hStream, captureStatus_out, id_out, nullptr, nullptr, nullptr, nullptr, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_ptsz(CUstream hStream,
                                                        CUstreamCaptureStatus* captureStatus_out,
                                                        cuuint64_t* id_out) {
  SIM_ENTER("cuStreamGetCaptureInfo_ptsz");
  return CaptureInfo(hStream, captureStatus_out, id_out, nullptr, nullptr, nullptr, nullptr, true);
}
SIM_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream hStream,
                                                      CUstreamCaptureStatus* captureStatus_out,
                                                      cuuint64_t* id_out, CUgraph* graph_out,
                                                      const CUgraphNode** dependencies_out,
                                                      size_t* numDependencies_out) {
  SIM_ENTER("cuStreamGetCaptureInfo_v2");
  return CaptureInfo(hStream, captureStatus_out, id_out, graph_out, dependencies_out, nullptr,
                     numDependencies_out, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream,
                                                           CUstreamCaptureStatus* captureStatus_out,
                                                           cuuint64_t* id_out, CUgraph* graph_out,
                                                           const CUgraphNode** dependencies_out,
                                                           size_t* numDependencies_out) {
  SIM_ENTER("cuStreamGetCaptureInfo_v2_ptsz");
  return CaptureInfo(hStream, captureStatus_out, id_out, graph_out, dependencies_out, nullptr,
                     numDependencies_out, true);
}
SIM_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_v3(CUstream hStream,
                                                      CUstreamCaptureStatus* captureStatus_out,
                                                      cuuint64_t* id_out, CUgraph* graph_out,
                                                      const CUgraphNode** dependencies_out,
                                                      const CUgraphEdgeData** edgeData_out,
                                                      size_t* numDependencies_out) {
  SIM_ENTER("cuStreamGetCaptureInfo_v3");
  return CaptureInfo(hStream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                     numDependencies_out, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream,
                                                           CUstreamCaptureStatus* captureStatus_out,
                                                           cuuint64_t* id_out, CUgraph* graph_out,
                                                           const CUgraphNode** dependencies_out,
                                                           const CUgraphEdgeData** edgeData_out,
                                                           size_t* numDependencies_out) {
  SIM_ENTER("cuStreamGetCaptureInfo_v3_ptsz");
  return CaptureInfo(hStream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                     numDependencies_out, true);
}

#undef cuStreamUpdateCaptureDependencies
SIM_EXPORT CUresult CUDAAPI cuStreamUpdateCaptureDependencies(CUstream hStream,
                                                              CUgraphNode* dependencies,
                                                              size_t numDependencies,
                                                              unsigned int flags) {
  SIM_ENTER("cuStreamUpdateCaptureDependencies");
  return UpdateCaptureDeps(hStream, dependencies, nullptr, numDependencies, flags, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamUpdateCaptureDependencies_ptsz(CUstream hStream,
                                                                   CUgraphNode* dependencies,
                                                                   size_t numDependencies,
                                                                   unsigned int flags) {
  SIM_ENTER("cuStreamUpdateCaptureDependencies_ptsz");
  return UpdateCaptureDeps(hStream, dependencies, nullptr, numDependencies, flags, true);
}
SIM_EXPORT CUresult CUDAAPI cuStreamUpdateCaptureDependencies_v2(
    CUstream hStream, CUgraphNode* dependencies, const CUgraphEdgeData* dependencyData,
    size_t numDependencies, unsigned int flags) {
  SIM_ENTER("cuStreamUpdateCaptureDependencies_v2");
  return UpdateCaptureDeps(hStream, dependencies, dependencyData, numDependencies, flags, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamUpdateCaptureDependencies_v2_ptsz(
    CUstream hStream, CUgraphNode* dependencies, const CUgraphEdgeData* dependencyData,
    size_t numDependencies, unsigned int flags) {
  SIM_ENTER("cuStreamUpdateCaptureDependencies_v2_ptsz");
  return UpdateCaptureDeps(hStream, dependencies, dependencyData, numDependencies, flags, true);
}

SIM_EXPORT CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  SIM_ENTER("cuThreadExchangeStreamCaptureMode");
  if (mode == nullptr || !ValidMode(*mode)) return CUDA_ERROR_INVALID_VALUE;
  CUstreamCaptureMode previous = t_capture_mode;
  t_capture_mode = *mode;
  *mode = previous;
  return CUDA_SUCCESS;
}
