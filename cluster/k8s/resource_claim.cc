#include "cluster/k8s/resource_claim.h"

#include <algorithm>
#include <set>

#include "cluster/k8s/quantity.h"

namespace vgpu::k8s {
namespace {

using nlohmann::json;

Status Malformed(const std::string& where, std::string_view why) {
  return Status::Error(ErrorCode::kInval, "ResourceClaim " + where + ": " + std::string(why));
}

// `obj[key]` as a string into `*out`; absent is an error only when required.
Status GetString(const json& obj, const char* key, const std::string& where, bool required,
                 std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return required ? Malformed(where + "." + key, "missing") : Status::Ok();
  }
  if (!it->is_string()) return Malformed(where + "." + key, "not a string");
  *out = it->get<std::string>();
  return Status::Ok();
}

// consumedCapacity[name], with the domain prefix of our driver or without.
Status GetCapacity(const json& consumed, std::string_view driver, const std::string& name,
                   const std::string& where, int64_t* out) {
  int found = 0;
  for (const std::string& key : {name, std::string(driver) + "/" + name}) {
    auto it = consumed.find(key);
    if (it == consumed.end()) continue;
    if (++found > 1) return Malformed(where, "both " + name + " and " + key);
    if (!it->is_string()) return Malformed(where + "." + key, "not a quantity string");
    Status st = ParseQuantity(it->get<std::string>(), out);
    if (!st.ok()) return Malformed(where + "." + key, st.message);
  }
  return Status::Ok();
}

Status ParseResult(const json& r, std::string_view driver, const std::string& where,
                   ClaimDevice* d) {
  if (!r.is_object()) return Malformed(where, "not an object");
  for (auto [key, out] :
       {std::pair{"request", &d->request}, {"pool", &d->pool}, {"device", &d->device}}) {
    if (Status st = GetString(r, key, where, true, out); !st.ok()) return st;
  }
  if (Status st = GetString(r, "shareID", where, false, &d->share_id); !st.ok()) return st;
  auto consumed = r.find("consumedCapacity");
  if (consumed == r.end() || consumed->is_null()) return Status::Ok();
  if (!consumed->is_object()) return Malformed(where + ".consumedCapacity", "not an object");
  std::string cw = where + ".consumedCapacity";
  if (Status st = GetCapacity(*consumed, driver, "memory", cw, &d->memory_bytes); !st.ok()) {
    return st;
  }
  return GetCapacity(*consumed, driver, "compute", cw, &d->compute_percent);
}

// Our devices; `drivers` collects every driver seen, for the error that says
// whose claim this is.
Status ParseResults(const json& devices, std::string_view driver, ParsedClaim* out,
                    std::set<std::string>* drivers) {
  auto results = devices.find("results");
  if (results == devices.end() || results->is_null()) return Status::Ok();
  if (!results->is_array()) return Malformed("status.allocation.devices.results", "not a list");
  for (size_t i = 0; i < results->size(); ++i) {
    const json& r = (*results)[i];
    std::string where = "status.allocation.devices.results[" + std::to_string(i) + "]";
    std::string d;
    if (!r.is_object()) return Malformed(where, "not an object");
    if (Status st = GetString(r, "driver", where, true, &d); !st.ok()) return st;
    drivers->insert(d);
    if (d != driver) continue;
    ClaimDevice device;
    if (Status st = ParseResult(r, driver, where, &device); !st.ok()) return st;
    out->devices.push_back(std::move(device));
  }
  return Status::Ok();
}

Status IntInRange(const json& v, const std::string& where, int* out) {
  if (!v.is_number_integer()) return Malformed(where, "not an integer");
  int64_t n = v.get<int64_t>();
  if (n < 1 || n > 100) return Malformed(where, "out of range 1..100");
  *out = static_cast<int>(n);
  return Status::Ok();
}

Status ApplyParameter(const std::string& key, const json& v, const std::string& where,
                      ClaimParameters* p) {
  std::string w = where + "." + key;
  if (key == "apiVersion") {
    return v == kParametersApiVersion ? Status::Ok() : Malformed(w, "not vgpu.io/v1alpha1");
  }
  if (key == "kind")
    return v == kParametersKind ? Status::Ok() : Malformed(w, "not ClaimParameters");
  if (key == "priority") {
    if (!v.is_string()) return Malformed(w, "not a string");
    std::string s = v.get<std::string>();
    if (s != "low" && s != "normal" && s != "high") return Malformed(w, "not low, normal or high");
    p->priority = s;
    return Status::Ok();
  }
  if (key == "weight") return IntInRange(v, w, &p->weight);
  if (key == "share") return IntInRange(v, w, &p->share);
  if (key == "timeSliced") {
    if (!v.is_boolean()) return Malformed(w, "not a boolean");
    p->time_sliced = v.get<bool>();
    return Status::Ok();
  }
  return Malformed(w, "unknown parameter");
}

Status ApplyParameters(const json& params, const std::string& where, ClaimParameters* p) {
  if (!params.is_object()) return Malformed(where, "not an object");
  if (!params.contains("apiVersion") || !params.contains("kind")) {
    return Malformed(where, "apiVersion and kind are required");
  }
  for (const auto& [key, value] : params.items()) {
    if (Status st = ApplyParameter(key, value, where, p); !st.ok()) return st;
  }
  return Status::Ok();
}

bool RequestMatches(const std::string& result_request, const std::string& config_request) {
  if (result_request == config_request) return true;
  return result_request.size() > config_request.size() &&
         result_request.compare(0, config_request.size(), config_request) == 0 &&
         result_request[config_request.size()] == '/';
}

// Whether a config entry with this `requests` list applies to our devices.
Status AppliesToUs(const json& entry, const std::string& where, const ParsedClaim& claim,
                   bool* applies) {
  auto requests = entry.find("requests");
  *applies = true;
  if (requests == entry.end() || requests->is_null()) return Status::Ok();
  if (!requests->is_array()) return Malformed(where + ".requests", "not a list");
  if (requests->empty()) return Status::Ok();
  *applies = false;
  for (const json& r : *requests) {
    if (!r.is_string()) return Malformed(where + ".requests", "not a list of strings");
    for (const ClaimDevice& d : claim.devices) {
      if (RequestMatches(d.request, r.get<std::string>())) *applies = true;
    }
  }
  return Status::Ok();
}

// Applies our entries of `config` whose source is `source`, in order.
Status ApplyConfig(const json& config, std::string_view driver, std::string_view source,
                   ParsedClaim* out) {
  for (size_t i = 0; i < config.size(); ++i) {
    const json& entry = config[i];
    std::string where = "status.allocation.devices.config[" + std::to_string(i) + "]";
    std::string src, entry_driver;
    if (!entry.is_object()) return Malformed(where, "not an object");
    if (Status st = GetString(entry, "source", where, true, &src); !st.ok()) return st;
    if (src != "FromClass" && src != "FromClaim") return Malformed(where + ".source", "unknown");
    auto opaque = entry.find("opaque");
    if (src != source || opaque == entry.end() || opaque->is_null()) continue;
    if (!opaque->is_object()) return Malformed(where + ".opaque", "not an object");
    if (Status st = GetString(*opaque, "driver", where + ".opaque", true, &entry_driver);
        !st.ok()) {
      return st;
    }
    if (entry_driver != driver) continue;
    bool applies = false;
    if (Status st = AppliesToUs(entry, where, *out, &applies); !st.ok() || !applies) return st;
    auto params = opaque->find("parameters");
    if (params == opaque->end()) return Malformed(where + ".opaque.parameters", "missing");
    std::string pw = where + ".opaque.parameters";
    if (Status st = ApplyParameters(*params, pw, &out->params); !st.ok()) return st;
    if (source == "FromClass") {
      if (Status st = ApplyParameters(*params, pw, &out->class_params); !st.ok()) return st;
    }
  }
  return Status::Ok();
}

Status ParseReservedFor(const json& status, ParsedClaim* out) {
  auto reserved = status.find("reservedFor");
  if (reserved == status.end() || reserved->is_null()) return Status::Ok();
  if (!reserved->is_array()) return Malformed("status.reservedFor", "not a list");
  for (size_t i = 0; i < reserved->size(); ++i) {
    const json& ref = (*reserved)[i];
    std::string where = "status.reservedFor[" + std::to_string(i) + "]";
    std::string group, resource;
    PodRef pod;
    if (!ref.is_object()) return Malformed(where, "not an object");
    for (auto [key, dst, required] : {std::tuple{"apiGroup", &group, false},
                                      {"resource", &resource, true},
                                      {"name", &pod.name, true},
                                      {"uid", &pod.uid, true}}) {
      if (Status st = GetString(ref, key, where, required, dst); !st.ok()) return st;
    }
    if (group.empty() && resource == "pods") out->pods.push_back(std::move(pod));
  }
  return Status::Ok();
}

Status ParseMetadata(const json& obj, ParsedClaim* out) {
  if (!obj.is_object()) return Malformed("", "not an object");
  auto meta = obj.find("metadata");
  if (meta == obj.end() || !meta->is_object()) return Malformed("metadata", "missing");
  for (auto [key, dst] :
       {std::pair{"name", &out->name}, {"namespace", &out->ns}, {"uid", &out->uid}}) {
    if (Status st = GetString(*meta, key, "metadata", true, dst); !st.ok()) return st;
  }
  return Status::Ok();
}

Status NotOurs(const ParsedClaim& claim, std::string_view driver,
               const std::set<std::string>& drivers) {
  std::string others;
  for (const std::string& d : drivers) others += (others.empty() ? "" : ", ") + d;
  return Status::Error(ErrorCode::kNoEnt,
                       "ResourceClaim " + claim.ns + "/" + claim.name + " has no device of " +
                           std::string(driver) + " (it is for " +
                           (others.empty() ? std::string("no driver") : others) + ")");
}

Status Parse(const json& obj, std::string_view driver, ParsedClaim* out) {
  if (Status st = ParseMetadata(obj, out); !st.ok()) return st;
  auto status = obj.find("status");
  const json* allocation = nullptr;
  if (status != obj.end() && status->is_object()) {
    auto a = status->find("allocation");
    if (a != status->end() && !a->is_null()) allocation = &*a;
  } else if (status != obj.end() && !status->is_null()) {
    return Malformed("status", "not an object");
  }
  if (allocation == nullptr) {
    return Status::Error(ErrorCode::kBusy,
                         "ResourceClaim " + out->ns + "/" + out->name + " is not allocated");
  }
  if (!allocation->is_object()) return Malformed("status.allocation", "not an object");
  out->allocated = true;
  static const json kEmpty = json::object();
  auto devices_it = allocation->find("devices");
  const json& devices = devices_it == allocation->end() ? kEmpty : *devices_it;
  if (!devices.is_object()) return Malformed("status.allocation.devices", "not an object");
  std::set<std::string> drivers;
  if (Status st = ParseResults(devices, driver, out, &drivers); !st.ok()) return st;
  if (out->devices.empty()) return NotOurs(*out, driver, drivers);
  auto config = devices.find("config");
  if (config != devices.end() && !config->is_null()) {
    if (!config->is_array()) return Malformed("status.allocation.devices.config", "not a list");
    for (std::string_view source : {"FromClass", "FromClaim"}) {
      if (Status st = ApplyConfig(*config, driver, source, out); !st.ok()) return st;
    }
  }
  return ParseReservedFor(*status, out);
}

}  // namespace

Status ParseResourceClaim(const json& obj, std::string_view driver, ParsedClaim* out) {
  ParsedClaim claim;
  Status st;
  try {
    st = Parse(obj, driver, &claim);
  } catch (const json::exception& e) {
    st = Malformed("", e.what());
  }
  if (st.ok()) *out = std::move(claim);
  return st;
}

int EffectiveComputePercent(const ClaimDevice& device, const ClaimParameters& params) {
  // A device published without consumable capacity is the whole GPU.
  int consumed = device.compute_percent > 0
                     ? static_cast<int>(std::min<int64_t>(device.compute_percent, 100))
                     : 100;
  return params.share > 0 ? std::min(consumed, params.share) : consumed;
}

}  // namespace vgpu::k8s
