#include "residency/migration.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "common/byte_size.h"
#include "common/log.h"
#include "quota/quota_ledger.h"
#include "share/compute_share.h"

namespace vgpu {

using json = nlohmann::json;

Migration::~Migration() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (watchdog_.joinable()) watchdog_.join();
}

void Migration::AfterForkInChild() {
  if (watchdog_.joinable()) {
    // Names no thread here: destroying or joining it would terminate or hang.
    static_cast<void>(new std::thread(std::move(watchdog_)));
  }
  prepared_ = false;
  moves_.clear();
}

void Migration::LearnNodeUuids() {
  if (!node_uuids_.empty()) return;
  // Before the first migration, ordinal p is node device p.
  const int n = host_->DriverDeviceCount();
  for (int p = 0; p < n; ++p) node_uuids_.push_back(host_->DriverUuid(DriverOrdinal(p)));
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

Status Migration::Refuse(ErrorCode code, const std::string& why) {
  for (const Move& m : moves_) {
    if (QuotaLedger* l = host_->ledger(); l != nullptr) l->Release(m.to.value(), m.bytes);
  }
  moves_.clear();
  return Status::Error(code, why);
}

// One {from, to} pair: where the job's device is, and its charge reserved on the target.
Status Migration::PlanMove(const json& pr) {
  if (!pr.is_object() || !pr.contains("from") || !pr.contains("to") || !pr["from"].is_string() ||
      !pr["to"].is_string()) {
    return Refuse(ErrorCode::kInval, "a GPU pair needs \"from\" and \"to\" UUIDs");
  }
  const std::string from = pr["from"], to = pr["to"];
  Move m;
  for (int v = 0; v < host_->VisibleCount(); ++v) {
    if (host_->VisibleUuid(VisibleIndex(v)) == from) {
      m.ordinal = host_->OrdinalOf(VisibleIndex(v));
      m.from = host_->NodeOf(m.ordinal);
    }
  }
  m.to = NodeOf(to);
  if (!m.from.valid()) return Refuse(ErrorCode::kInval, "the job has no device " + from);
  if (!m.to.valid()) return Refuse(ErrorCode::kInval, "no GPU " + to + " on this node");
  if (QuotaLedger* l = host_->ledger(); l != nullptr) {
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
  return Status::Ok();
}

// The charge follows the ordinal to where it points now: the target, the
// source (the move failed), or a third GPU (a stranded job recovered elsewhere).
void Migration::MoveCharge(const Move& m, NodeIndex now) {
  QuotaLedger* l = host_->ledger();
  if (l == nullptr) return;
  if (now != m.to) {
    l->Release(m.to.value(), m.bytes);  // the reservation made for the target
    if (now != m.from && !l->TryReserve(now.value(), m.bytes)) {
      VGPU_LOG(kWarn, "migration: the group's quota on {} is exceeded by this job's {} bytes",
               UuidOf(now).c_str(), m.bytes);
    }
  }
  if (now != m.from) l->Release(m.from.value(), m.bytes);
}

// Reads the driver's ordinal -> GPU map and makes the process's view follow
// it. Called with mu_ held and the gate closed.
json Migration::Reconcile() {
  for (int p = 0; p < static_cast<int>(node_uuids_.size()); ++p) {
    NodeIndex n = NodeOf(host_->DriverUuid(DriverOrdinal(p)));
    if (n.valid()) host_->SetNode(DriverOrdinal(p), n);
  }
  json moved = json::array();
  for (const Move& m : moves_) {
    const NodeIndex now = host_->NodeOf(m.ordinal);
    MoveCharge(m, now);
    if (now == m.from) continue;
    if (ComputeShare* cs = host_->share(); cs != nullptr) {
      if (Status s = cs->Join(now.value()); !s.ok()) {
        VGPU_LOG(kWarn, "migration: compute share on the target: {}", s.message.c_str());
      }
    }
    moved.push_back({{"from", UuidOf(m.from)}, {"to", UuidOf(now)}, {"bytes", m.bytes}});
  }
  for (int v = 0; v < host_->VisibleCount(); ++v) {
    std::string u = host_->DriverUuid(host_->OrdinalOf(VisibleIndex(v)));
    if (!u.empty()) host_->SetVisibleUuid(VisibleIndex(v), u);
  }
  host_->ViewMoved();
  moves_.clear();
  prepared_ = false;
  if (gate_ours_) host_->OpenGate();
  cv_.notify_all();
  return moved;
}

// vgpuctl gone before its finish: finish once the driver lets the job run.
void Migration::Watchdog(uint64_t generation, int64_t hold_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  auto held = [&] { return Held(generation); };
  cv_.wait_for(lock, std::chrono::milliseconds(hold_ms), [&] { return !held(); });
  while (held()) {
    if (host_->DriverSaysRunning()) {
      VGPU_LOG(kWarn, "migration: no finish within {} ms; reopening the job", hold_ms);
      Reconcile();
      return;
    }
    cv_.wait_for(lock, std::chrono::seconds(1), [&] { return !held(); });
  }
}

Result<json> Migration::Prepare(const json& args) {
  std::unique_lock<std::mutex> lock(mu_);
  if (prepared_) return Status::Error(ErrorCode::kBusy, "a migration of this job is in progress");
  // The previous migration's watchdog has been told it is over: it returns at once.
  if (watchdog_.joinable()) {
    std::thread previous = std::move(watchdog_);
    lock.unlock();
    previous.join();
    lock.lock();
    if (prepared_) return Status::Error(ErrorCode::kBusy, "a migration of this job is in progress");
  }
  // A suspended or checkpointed job moves too (its contexts; its memory is
  // off the device and comes back on the target at resume or restore). Its
  // gate is closed already, by the suspension, and stays so.
  if (std::string why = host_->SharingRefusal(); !why.empty()) {
    return Status::Error(ErrorCode::kBusy, why);
  }
  gate_ours_ = host_->Running();
  LearnNodeUuids();
  const json pairs = args.value("pairs", json::array());
  if (!pairs.is_array() || pairs.empty()) return Status::Error(ErrorCode::kInval, "no GPU pairs");
  moves_.clear();
  for (const auto& pr : pairs) {
    if (Status s = PlanMove(pr); !s.ok()) return s;
  }
  if (gate_ours_) host_->CloseGate();
  prepared_ = true;
  const uint64_t generation = ++generation_;
  const int64_t hold_ms = std::max<int64_t>(args.value("hold_ms", int64_t{300000}), 1000);
  try {
    watchdog_ = std::thread([this, generation, hold_ms] { Watchdog(generation, hold_ms); });
  } catch (const std::exception& e) {
    Reconcile();
    return Status::Error(ErrorCode::kIo,
                         std::string("cannot start the migration watchdog: ") + e.what());
  }
  return json{{"held", true}};
}

Result<json> Migration::Finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!prepared_)
    return Status::Error(ErrorCode::kInval, "no migration of this job is in progress");
  return json{{"moved", Reconcile()}};
}

}  // namespace vgpu
