#include "intercept/migration.h"

#include <unistd.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/byte_size.h"
#include "common/log.h"
#include "driver/real_driver.h"
#include "intercept/device_map.h"
#include "intercept/node_devices.h"
#include "intercept/nvml_view.h"
#include "quota/quota_ledger.h"
#include "residency/quiesce_gate.h"
#include "share/compute_share.h"

namespace vgpu {
namespace {

using ctl::ErrorCode;
using ctl::Response;

std::string DriverUuid(DriverOrdinal ordinal) {
  CUuuid u{};
  if (REAL_CALL(cuDeviceGetUuid_v2, &u, ordinal.value()) != CUDA_SUCCESS) return "";
  return FormatUuid(u);
}

bool DriverSaysRunning() {
  CUprocessState st = CU_PROCESS_STATE_RUNNING;
  CUresult r = REAL_CALL(cuCheckpointProcessGetState, getpid(), &st);
  return r != CUDA_SUCCESS || st == CU_PROCESS_STATE_RUNNING;
}

}  // namespace

void Migration::LearnNodeUuids() {
  if (!node_uuids_.empty()) return;
  int n = 0;
  if (REAL_CALL(cuDeviceGetCount, &n) != CUDA_SUCCESS) return;
  // Before the first migration, ordinal p is node device p.
  for (int p = 0; p < n && p < kNodeDevices; ++p)
    node_uuids_.push_back(DriverUuid(DriverOrdinal(p)));
}

// The UUID of node device n ("" if unknown: a GPU the node did not list).
std::string Migration::UuidOf(NodeIndex n) const {
  return n.valid() && n.value() < static_cast<int>(node_uuids_.size()) ? node_uuids_[n.value()]
                                                                       : "";
}

NodeIndex Migration::NodeOf(const std::string& uuid) const {
  for (size_t i = 0; i < node_uuids_.size(); ++i) {
    if (!uuid.empty() && node_uuids_[i] == uuid) return NodeIndex(static_cast<int>(i));
  }
  return NodeIndex();
}

Response Migration::Refuse(ErrorCode code, const std::string& why) {
  for (const Move& m : moves_) {
    if (QuotaLedger* l = ports_.ledger(); l != nullptr) l->Release(m.to.value(), m.bytes);
  }
  moves_.clear();
  return Response::Error(code, why);
}

// Reads the driver's ordinal -> GPU map and makes libvgpu's view follow it.
// Called with mu_ held and the gate closed.
nlohmann::json Migration::Reconcile() {
  DeviceMap& devices = *ports_.devices;
  for (int p = 0; p < static_cast<int>(node_uuids_.size()); ++p) {
    NodeIndex n = NodeOf(DriverUuid(DriverOrdinal(p)));
    if (n.valid()) SetNodeDevice(DriverOrdinal(p), n);
  }
  nlohmann::json moved = nlohmann::json::array();
  for (const Move& m : moves_) {
    // Where the ordinal that named `from` points now: the target, the source
    // (the move failed), or a third GPU (a stranded job recovered elsewhere).
    const NodeIndex now = NodeDevice(m.ordinal);
    QuotaLedger* l = ports_.ledger();
    if (l != nullptr && now != m.to) {
      l->Release(m.to.value(), m.bytes);  // the reservation made for the target
      if (now != m.from && !l->TryReserve(now.value(), m.bytes)) {
        VGPU_LOG(kWarn, "migration: the group's quota on {} is exceeded by this job's {} bytes",
                 UuidOf(now).c_str(), m.bytes);
      }
    }
    if (l != nullptr && now != m.from) l->Release(m.from.value(), m.bytes);
    if (now == m.from) continue;
    if (ComputeShare* cs = ports_.share(); cs != nullptr) {
      if (Status s = cs->Join(now.value()); !s.ok()) {
        VGPU_LOG(kWarn, "migration: compute share on the target: {}", s.message.c_str());
      }
    }
    moved.push_back({{"from", UuidOf(m.from)}, {"to", UuidOf(now)}, {"bytes", m.bytes}});
  }
  for (int v = 0; v < devices.count(); ++v) {
    std::string u = DriverUuid(devices.ToPhysical(VisibleIndex(v)));
    if (!u.empty()) devices.SetUuid(VisibleIndex(v), u);
  }
  FollowMigrationInNvmlView();
  moves_.clear();
  prepared_ = false;
  if (gate_ours_) residency::OpenGate();
  return moved;
}

// vgpuctl gone before its finish: finish once the driver lets the job run.
void Migration::Watchdog(uint64_t generation, int64_t hold_ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!prepared_ || generation_ != generation) return;
      if (DriverSaysRunning()) {
        VGPU_LOG(kWarn, "migration: no finish within {} ms; reopening the job", hold_ms);
        Reconcile();
        return;
      }
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

Response Migration::Prepare(const nlohmann::json& args) {
  std::lock_guard<std::mutex> lock(mu_);
  if (prepared_) return Response::Error(ErrorCode::kBusy, "a migration of this job is in progress");
  // A suspended or checkpointed job moves too (its contexts; its memory is
  // off the device and comes back on the target at resume or restore). Its
  // gate is closed already, by the suspension, and stays so.
  gate_ours_ = ports_.running();
  LearnNodeUuids();
  const nlohmann::json pairs = args.value("pairs", nlohmann::json::array());
  if (!pairs.is_array() || pairs.empty()) return Response::Error(ErrorCode::kInval, "no GPU pairs");
  DeviceMap& devices = *ports_.devices;
  moves_.clear();
  for (const auto& pr : pairs) {
    if (!pr.is_object() || !pr.contains("from") || !pr.contains("to") || !pr["from"].is_string() ||
        !pr["to"].is_string()) {
      return Refuse(ErrorCode::kInval, "a GPU pair needs \"from\" and \"to\" UUIDs");
    }
    const std::string from = pr["from"], to = pr["to"];
    Move m;
    for (int v = 0; v < devices.count(); ++v) {
      if (devices.uuid(VisibleIndex(v)) == from) {
        m.ordinal = devices.ToPhysical(VisibleIndex(v));
        m.from = NodeDevice(m.ordinal);
      }
    }
    m.to = NodeOf(to);
    if (!m.from.valid()) return Refuse(ErrorCode::kInval, "the job has no device " + from);
    if (!m.to.valid()) return Refuse(ErrorCode::kInval, "no GPU " + to + " on this node");
    if (QuotaLedger* l = ports_.ledger(); l != nullptr) {
      const int from_node = m.from.value(), to_node = m.to.value();
      m.bytes = l->SelfUsed(from_node);
      if (l->Limit(to_node) == kUnlimited && l->Limit(from_node) != kUnlimited) {
        l->SetLimit(to_node, l->Limit(from_node));  // the job's quota goes with it
      }
      if (m.from != m.to && !l->TryReserve(to_node, m.bytes)) {
        return Refuse(ErrorCode::kBusy, "the job's " + FormatByteSize(m.bytes) +
                                            " do not fit its group's quota on " + to + " (" +
                                            FormatByteSize(l->Used(to_node)) + " of " +
                                            FormatByteSize(l->Limit(to_node)) + " used)");
      }
      if (m.from == m.to) m.bytes = 0;
    }
    moves_.push_back(m);
  }
  if (gate_ours_) residency::CloseGate();
  prepared_ = true;
  const uint64_t generation = ++generation_;
  const int64_t hold_ms = args.value("hold_ms", int64_t{300000});
  try {
    std::thread([this, generation, hold = hold_ms < 1000 ? 1000 : hold_ms] {
      Watchdog(generation, hold);  // the Runtime, and this, are never destroyed
    }).detach();
  } catch (const std::exception& e) {
    Reconcile();
    return Response::Error(ErrorCode::kIo, std::string("cannot start the migration watchdog: ") + e.what());
  }
  return Response::Ok({{"held", true}});
}

Response Migration::Finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!prepared_)
    return Response::Error(ErrorCode::kInval, "no migration of this job is in progress");
  nlohmann::json moved = Reconcile();
  return Response::Ok({{"moved", moved}});
}

}  // namespace vgpu
