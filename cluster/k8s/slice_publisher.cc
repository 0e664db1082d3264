#include "cluster/k8s/slice_publisher.h"

#include <algorithm>
#include <string>
#include <utility>

namespace vgpu::k8s {
namespace {

using nlohmann::json;

constexpr char kSlicesPath[] = "/apis/resource.k8s.io/v1/resourceslices";

// json::value() on a path of objects that may be missing or of another type.
const json* Find(const json& obj, std::initializer_list<const char*> keys) {
  const json* at = &obj;
  for (const char* key : keys) {
    if (!at->is_object()) return nullptr;
    auto it = at->find(key);
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at;
}

std::string StringAt(const json& obj, std::initializer_list<const char*> keys) {
  const json* v = Find(obj, keys);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

int64_t Generation(const json& slice) {
  const json* v = Find(slice, {"spec", "pool", "generation"});
  return v != nullptr && v->is_number_integer() ? v->get<int64_t>() : 0;
}

const json* FindByName(const json& list, const std::string& name) {
  if (!list.is_array()) return nullptr;
  for (const json& item : list) {
    if (item.is_object() && item.value("name", json()) == name) return &item;
  }
  return nullptr;
}

// Keeps the timeAdded of taints the existing slice already has: the API
// fills in "now" for a taint written without one, and a taint that stays
// should not look new on every update.
void KeepTaintTimes(const json& existing, json* desired) {
  const json* old_devices = Find(existing, {"spec", "devices"});
  json* devices = &(*desired)["spec"]["devices"];
  if (old_devices == nullptr) return;
  for (json& device : *devices) {
    const json* old = FindByName(*old_devices, device.value("name", ""));
    if (old == nullptr || !device.contains("taints")) continue;
    const json* old_taints = Find(*old, {"taints"});
    if (old_taints == nullptr || !old_taints->is_array()) continue;
    for (json& taint : device["taints"]) {
      for (const json& t : *old_taints) {
        if (!t.is_object() || !t.contains("timeAdded")) continue;
        if (t.value("key", "") == taint.value("key", "") &&
            t.value("value", "") == taint.value("value", "") &&
            t.value("effect", "") == taint.value("effect", "")) {
          taint["timeAdded"] = t["timeAdded"];
        }
      }
    }
  }
}

}  // namespace

SlicePublisher::SlicePublisher(KubeClient* client, SliceOptions options)
    : client_(client), options_(std::move(options)) {}

Status SlicePublisher::Publish(const std::vector<SliceGpu>& gpus, PublishOutcome* outcome) {
  if (options_.node_name.empty()) {
    return Status::Error(ErrorCode::kInval, "ResourceSlice: no node name");
  }
  if (gpus.size() > kMaxDevicesWithTaints) {
    return Status::Error(ErrorCode::kInval, "ResourceSlice: " + std::to_string(gpus.size()) +
                                                " GPUs, more than one slice may hold");
  }
  PublishOutcome done = PublishOutcome::kUnchanged;
  Status st;
  // A 409 means another writer got there first (or our list was stale):
  // what we read is out of date, so read again, once.
  for (int attempt = 0; attempt < 2; ++attempt) {
    st = PublishOnce(gpus, &done);
    if (st.code != ErrorCode::kExist) break;
  }
  if (st.ok() && outcome != nullptr) *outcome = done;
  return st;
}

Status SlicePublisher::PublishOnce(const std::vector<SliceGpu>& gpus, PublishOutcome* outcome) {
  std::vector<json> existing;
  if (Status st = ListOurs(&existing); !st.ok()) return st;
  if (existing.empty()) {
    int64_t generation = last_generation_ + 1;
    json created;
    Status st =
        client_->Post(kSlicesPath, BuildResourceSlice(gpus, options_, generation), &created);
    if (!st.ok()) return st;
    last_generation_ = generation;
    *outcome = PublishOutcome::kCreated;
    return Status::Ok();
  }
  const json& keeper = existing.front();
  json desired = BuildResourceSlice(gpus, options_, Generation(keeper));
  if (existing.size() == 1 && SliceSpecEqual(desired, keeper)) {
    last_generation_ = std::max(last_generation_, Generation(keeper));
    *outcome = PublishOutcome::kUnchanged;
    return Status::Ok();
  }
  if (Status st = Replace(existing, std::move(desired)); !st.ok()) return st;
  *outcome = PublishOutcome::kUpdated;
  return Status::Ok();
}

// Our pool's slices, the one to keep first: the one with our deterministic
// name if there is one.
Status SlicePublisher::ListOurs(std::vector<json>* slices) {
  std::string selector = "spec.nodeName=" + options_.node_name + ",spec.driver=" + options_.driver;
  json list;
  Status st =
      client_->Get(std::string(kSlicesPath) + "?fieldSelector=" + QueryEscape(selector), &list);
  if (!st.ok()) return st;
  const json* items = Find(list, {"items"});
  if (items == nullptr || items->is_null()) return Status::Ok();
  if (!items->is_array()) {
    return Status::Error(ErrorCode::kProto, "ResourceSlice list: items is not a list");
  }
  std::string own_name = StringAt(BuildResourceSlice({}, options_, 0), {"metadata", "name"});
  for (const json& item : *items) {
    // Slices of another pool are not ours to touch; a real API server
    // honours the field selector, the other checks are for one that does not.
    if (StringAt(item, {"spec", "pool", "name"}) != options_.node_name ||
        StringAt(item, {"spec", "nodeName"}) != options_.node_name ||
        StringAt(item, {"spec", "driver"}) != options_.driver) {
      continue;
    }
    if (StringAt(item, {"metadata", "name"}).empty()) {
      return Status::Error(ErrorCode::kProto, "ResourceSlice list: an item has no name");
    }
    slices->push_back(item);
  }
  std::stable_partition(slices->begin(), slices->end(), [&](const json& s) {
    return !own_name.empty() && StringAt(s, {"metadata", "name"}) == own_name;
  });
  return Status::Ok();
}

// Writes `desired` over existing[0] one generation above every slice of the
// pool, then deletes the others: consumers that still see a stray ignore it,
// its generation being lower.
Status SlicePublisher::Replace(const std::vector<json>& existing, json desired) {
  int64_t generation = last_generation_;
  for (const json& s : existing) generation = std::max(generation, Generation(s));
  ++generation;
  const json& keeper = existing.front();
  desired["spec"]["pool"]["generation"] = generation;
  // The read metadata carries resourceVersion (the API refuses a stale one
  // with 409) and whatever labels or owners others have set.
  desired["metadata"] = keeper["metadata"];
  KeepTaintTimes(keeper, &desired);
  std::string name = StringAt(keeper, {"metadata", "name"});
  json updated;
  if (Status st =
          client_->Put(std::string(kSlicesPath) + "/" + QueryEscape(name), desired, &updated);
      !st.ok()) {
    return st;
  }
  last_generation_ = generation;
  for (size_t i = 1; i < existing.size(); ++i) {
    std::string stray = StringAt(existing[i], {"metadata", "name"});
    Status st = client_->Delete(std::string(kSlicesPath) + "/" + QueryEscape(stray));
    if (!st.ok() && st.code != ErrorCode::kNoEnt) return st;
  }
  return Status::Ok();
}

}  // namespace vgpu::k8s
