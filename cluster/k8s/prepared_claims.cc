#include "cluster/k8s/prepared_claims.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "ctl/cdi/cdi_host.h"

namespace vgpu::k8s {
namespace {

using nlohmann::json;

constexpr int kVersion = 1;
constexpr size_t kMaxBytes = 64 << 20;

json ToJson(const PreparedDevice& d) {
  return {{"requests", d.requests}, {"pool", d.pool}, {"device", d.device}, {"cdi_ids", d.cdi_ids}};
}

PreparedDevice DeviceFrom(const json& j) {
  return {j.at("requests").get<std::vector<std::string>>(), j.at("pool").get<std::string>(),
          j.at("device").get<std::string>(), j.at("cdi_ids").get<std::vector<std::string>>()};
}

}  // namespace

std::string PreparedClaims::Serialize(const std::map<std::string, PreparedClaim>& claims) {
  json out = json::object();
  for (const auto& [uid, c] : claims) {
    json devices = json::array();
    for (const PreparedDevice& d : c.devices) devices.push_back(ToJson(d));
    out[uid] = {{"namespace", c.ns}, {"name", c.name}, {"devices", devices}};
  }
  return json{{"version", kVersion}, {"claims", out}}.dump(1) + "\n";
}

Status PreparedClaims::Parse(const std::string& text, std::map<std::string, PreparedClaim>* out) {
  out->clear();
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return Status::Error(ErrorCode::kInval, "not a JSON object");
  try {
    if (j.at("version").get<int>() != kVersion) {
      return Status::Error(ErrorCode::kInval, "unknown checkpoint version " + j["version"].dump());
    }
    for (const auto& [uid, c] : j.at("claims").items()) {
      PreparedClaim claim{
          uid, c.at("namespace").get<std::string>(), c.at("name").get<std::string>(), {}};
      for (const json& d : c.at("devices")) claim.devices.push_back(DeviceFrom(d));
      (*out)[uid] = std::move(claim);
    }
  } catch (const std::exception& e) {
    out->clear();
    return Status::Error(ErrorCode::kInval, std::string("malformed checkpoint: ") + e.what());
  }
  return Status::Ok();
}

Status PreparedClaims::Load(std::string* warning) {
  warning->clear();
  claims_.clear();
  std::ifstream in(path_, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return Status::Ok();
    return Status::Error(ErrorCode::kIo, path_ + ": " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  Status st = s.size() > kMaxBytes ? Status::Error(ErrorCode::kTooBig, "larger than 64 MiB")
                                   : Parse(s, &claims_);
  if (st.ok()) return st;
  std::string aside = path_ + ".corrupt";
  if (std::rename(path_.c_str(), aside.c_str()) != 0) {
    return Status::Error(ErrorCode::kIo,
                         path_ + " is corrupt (" + st.message +
                             ") and cannot be moved aside: " + std::strerror(errno));
  }
  *warning = path_ + " was corrupt (" + st.message + "): moved to " + aside +
             "; starting with no prepared claims";
  return Status::Ok();
}

const PreparedClaim* PreparedClaims::Find(const std::string& uid) const {
  auto it = claims_.find(uid);
  return it == claims_.end() ? nullptr : &it->second;
}

Status PreparedClaims::Save(const std::map<std::string, PreparedClaim>& claims) const {
  return cdi::WriteFileAtomic(path_, Serialize(claims));
}

Status PreparedClaims::Put(const PreparedClaim& claim) {
  auto next = claims_;
  next[claim.uid] = claim;
  if (Status s = Save(next); !s.ok()) return s;
  claims_ = std::move(next);
  return Status::Ok();
}

Status PreparedClaims::Remove(const std::string& uid) {
  if (!claims_.contains(uid)) return Status::Ok();
  auto next = claims_;
  next.erase(uid);
  if (Status s = Save(next); !s.ok()) return s;
  claims_ = std::move(next);
  return Status::Ok();
}

}  // namespace vgpu::k8s
