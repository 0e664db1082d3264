// An in-process stand-in for the Kubernetes API server's ResourceSlice
// endpoints, enough for SlicePublisher's tests: objects in memory, a
// resourceVersion per write, field selectors on spec.nodeName and
// spec.driver, 409 on a stale resourceVersion or an existing name, bearer
// token checks. It departs from a real API server in what the tests do not
// need: no validation or defaulting of the spec (except a taint's
// timeAdded), no metadata.generation, no watch, no pagination, no
// admission, no server-side apply.
#pragma once

#include <httplib.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

namespace vgpu::k8s::testing {

// Returns once `server`'s listen loop (started on another thread) runs.
void WaitUntilRunning(const httplib::Server& server);

class FakeApiServer {
 public:
  explicit FakeApiServer(std::string token);
  ~FakeApiServer();

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // Direct access to the store, as another client of the API would have.
  void Insert(nlohmann::json slice);
  bool Remove(const std::string& name);
  std::map<std::string, nlohmann::json> Slices();
  // The next n updates find that someone else wrote the object first.
  void InjectConflicts(int n);
  int puts();
  int posts();
  int deletes();
  std::string last_authorization();

 private:
  bool Authorized(const httplib::Request& req, httplib::Response& res);
  void List(const httplib::Request& req, httplib::Response& res);
  void Create(const httplib::Request& req, httplib::Response& res);
  void Update(const httplib::Request& req, httplib::Response& res);
  void Erase(const httplib::Request& req, httplib::Response& res);
  void Stamp(nlohmann::json* slice);

  std::string token_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::map<std::string, nlohmann::json> slices_;
  int64_t resource_version_ = 1000;
  int conflicts_ = 0, puts_ = 0, posts_ = 0, deletes_ = 0, generated_ = 0;
  std::string last_authorization_;
};

}  // namespace vgpu::k8s::testing
