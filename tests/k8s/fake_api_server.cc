#include "tests/k8s/fake_api_server.h"

#include <chrono>
#include <sstream>
#include <utility>
#include <vector>

namespace vgpu::k8s::testing {
namespace {

using nlohmann::json;

constexpr char kSlices[] = "/apis/resource.k8s.io/v1/resourceslices";

void Reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

// The API's Status object for a failure.
void Fail(httplib::Response& res, int status, const std::string& reason,
          const std::string& message) {
  Reply(res, status,
        {{"kind", "Status"},
         {"apiVersion", "v1"},
         {"status", "Failure"},
         {"reason", reason},
         {"message", message},
         {"code", status}});
}

std::string At(const json& obj, const json::json_pointer& p) {
  return obj.contains(p) && obj[p].is_string() ? obj[p].get<std::string>() : "";
}

// "spec.nodeName=a,spec.driver=b" -> pointer/value pairs; false on an
// unsupported field (a real server answers 400 too).
bool ParseSelector(const std::string& selector,
                   std::vector<std::pair<std::string, std::string>>* out) {
  std::stringstream in(selector);
  std::string term;
  while (std::getline(in, term, ',')) {
    size_t eq = term.find('=');
    if (eq == std::string::npos) return false;
    std::string field = term.substr(0, eq), value = term.substr(eq + 1);
    if (field == "spec.nodeName") {
      out->emplace_back("/spec/nodeName", value);
    } else if (field == "spec.driver") {
      out->emplace_back("/spec/driver", value);
    } else if (field == "spec.pool.name") {
      out->emplace_back("/spec/pool/name", value);
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

FakeApiServer::FakeApiServer(std::string token) : token_(std::move(token)) {
  server_.Get(kSlices, [this](const auto& req, auto& res) {
    if (Authorized(req, res)) List(req, res);
  });
  server_.Post(kSlices, [this](const auto& req, auto& res) {
    if (Authorized(req, res)) Create(req, res);
  });
  std::string one = std::string(kSlices) + "/([^/]+)";
  server_.Put(one, [this](const auto& req, auto& res) {
    if (Authorized(req, res)) Update(req, res);
  });
  server_.Delete(one, [this](const auto& req, auto& res) {
    if (Authorized(req, res)) Erase(req, res);
  });
  port_ = server_.bind_to_any_port("127.0.0.1");
  thread_ = std::thread([this] { server_.listen_after_bind(); });
  WaitUntilRunning(server_);
}

void WaitUntilRunning(const httplib::Server& server) {
  // stop() before the loop has started is lost, and the loop would then
  // never end: the destructor's join would hang.
  for (int i = 0; i < 5000 && !server.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

FakeApiServer::~FakeApiServer() {
  server_.stop();
  thread_.join();
}

bool FakeApiServer::Authorized(const httplib::Request& req, httplib::Response& res) {
  std::lock_guard lock(mu_);
  last_authorization_ = req.get_header_value("Authorization");
  if (last_authorization_ == "Bearer " + token_) return true;
  Fail(res, 401, "Unauthorized", "Unauthorized");
  return false;
}

void FakeApiServer::List(const httplib::Request& req, httplib::Response& res) {
  std::vector<std::pair<std::string, std::string>> selector;
  if (!ParseSelector(req.get_param_value("fieldSelector"), &selector)) {
    return Fail(res, 400, "BadRequest", "unsupported field selector");
  }
  std::lock_guard lock(mu_);
  json items = json::array();
  for (const auto& [name, slice] : slices_) {
    bool match = true;
    for (const auto& [pointer, value] : selector) {
      match = match && At(slice, json::json_pointer(pointer)) == value;
    }
    if (match) items.push_back(slice);
  }
  Reply(res, 200,
        {{"kind", "ResourceSliceList"},
         {"apiVersion", "resource.k8s.io/v1"},
         {"metadata", {{"resourceVersion", std::to_string(resource_version_)}}},
         {"items", std::move(items)}});
}

// What the server adds on every write: a new resourceVersion, and a taint's
// timeAdded when the writer left it out.
void FakeApiServer::Stamp(json* slice) {
  (*slice)["metadata"]["resourceVersion"] = std::to_string(++resource_version_);
  if (!(*slice)["spec"].contains("devices")) return;
  for (json& device : (*slice)["spec"]["devices"]) {
    if (!device.contains("taints")) continue;
    for (json& taint : device["taints"]) {
      if (!taint.contains("timeAdded")) taint["timeAdded"] = "2025-01-01T00:00:00Z";
    }
  }
}

void FakeApiServer::Create(const httplib::Request& req, httplib::Response& res) {
  json slice = json::parse(req.body, nullptr, false);
  if (!slice.is_object() || !slice.contains("spec")) {
    return Fail(res, 400, "BadRequest", "not a ResourceSlice");
  }
  std::lock_guard lock(mu_);
  ++posts_;
  std::string name = At(slice, "/metadata/name"_json_pointer);
  if (name.empty()) {
    name = At(slice, "/metadata/generateName"_json_pointer) + "g" + std::to_string(++generated_);
  }
  if (slices_.count(name)) {
    return Fail(res, 409, "AlreadyExists", "resourceslices \"" + name + "\" already exists");
  }
  slice["metadata"]["name"] = name;
  slice["metadata"]["uid"] = "uid-" + name;
  Stamp(&slice);
  slices_[name] = slice;
  Reply(res, 201, slice);
}

void FakeApiServer::Update(const httplib::Request& req, httplib::Response& res) {
  std::string name = req.matches[1];
  json slice = json::parse(req.body, nullptr, false);
  if (!slice.is_object() || At(slice, "/metadata/name"_json_pointer) != name) {
    return Fail(res, 400, "BadRequest", "name in the body differs from the path");
  }
  std::lock_guard lock(mu_);
  ++puts_;
  auto it = slices_.find(name);
  if (it == slices_.end()) return Fail(res, 404, "NotFound", "not found");
  if (conflicts_ > 0) {
    --conflicts_;
    Stamp(&it->second);  // someone else's write lands first
  }
  if (At(slice, "/metadata/resourceVersion"_json_pointer) !=
      At(it->second, "/metadata/resourceVersion"_json_pointer)) {
    return Fail(res, 409, "Conflict",
                "Operation cannot be fulfilled on resourceslices \"" + name +
                    "\": the object has been modified; please apply your changes to the latest "
                    "version and try again");
  }
  Stamp(&slice);
  it->second = slice;
  Reply(res, 200, slice);
}

void FakeApiServer::Erase(const httplib::Request& req, httplib::Response& res) {
  std::lock_guard lock(mu_);
  ++deletes_;
  if (slices_.erase(req.matches[1]) == 0) return Fail(res, 404, "NotFound", "not found");
  Reply(res, 200, {{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Success"}});
}

void FakeApiServer::Insert(json slice) {
  std::lock_guard lock(mu_);
  Stamp(&slice);
  std::string name = slice["metadata"]["name"];
  slices_[name] = std::move(slice);
}

bool FakeApiServer::Remove(const std::string& name) {
  std::lock_guard lock(mu_);
  return slices_.erase(name) > 0;
}

std::map<std::string, json> FakeApiServer::Slices() {
  std::lock_guard lock(mu_);
  return slices_;
}

void FakeApiServer::InjectConflicts(int n) {
  std::lock_guard lock(mu_);
  conflicts_ = n;
}

int FakeApiServer::puts() {
  std::lock_guard lock(mu_);
  return puts_;
}

int FakeApiServer::posts() {
  std::lock_guard lock(mu_);
  return posts_;
}

int FakeApiServer::deletes() {
  std::lock_guard lock(mu_);
  return deletes_;
}

std::string FakeApiServer::last_authorization() {
  std::lock_guard lock(mu_);
  return last_authorization_;
}

}  // namespace vgpu::k8s::testing
