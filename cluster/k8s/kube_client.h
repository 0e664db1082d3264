// A minimal Kubernetes REST client: JSON over HTTPS with a bearer token, on
// cpp-httplib. Nothing here throws; every call returns a Status.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"

namespace httplib {
class Client;
}

namespace vgpu::k8s {

struct KubeConfig {
  std::string server;   // https://host:port, or http://127.0.0.1:port (tests)
  std::string token;    // bearer token; empty: no Authorization header
  // Where the token is read from before every request, when set (over
  // `token`): a projected service account token is rotated by the kubelet
  // and the one read at start expires (an hour by default).
  std::string token_file;
  std::string ca_file;  // PEM bundle that signs the server's certificate; empty: system CAs
  std::chrono::milliseconds timeout{10000};  // connect, and each read or write
};

// Reads a bearer token file (white space around it removed).
Status ReadToken(const std::string& path, std::string* token);

// The pod's service account: KUBERNETES_SERVICE_HOST/_PORT and the token and
// CA under /var/run/secrets/kubernetes.io/serviceaccount. kNoEnt outside a pod.
Status InClusterConfig(KubeConfig* config);

// Answers bigger than this are refused (kTooBig): the objects this driver
// reads are a few KiB; a list of all slices of a node stays far below.
inline constexpr size_t kMaxResponseBytes = size_t{8} << 20;

// Errors: kIo (no connection, server error), kTimedOut, kNoEnt (404), kExist
// (409: AlreadyExists on create, or Conflict: a stale resourceVersion; re-read
// and retry), kPerm (401, 403), kInval (400, 422: the object was refused),
// kBusy (429), kProto (a body that is not JSON), kTooBig. The message carries
// the API's own Status message when there is one. `http_status` (may be null)
// is the HTTP status, 0 when none arrived; `out` (may be null) is the parsed
// body of a 2xx answer.
class KubeClient {
 public:
  explicit KubeClient(KubeConfig config);
  ~KubeClient();
  KubeClient(const KubeClient&) = delete;
  KubeClient& operator=(const KubeClient&) = delete;

  Status Get(const std::string& path, nlohmann::json* out, int* http_status = nullptr);
  Status Post(const std::string& path, const nlohmann::json& body, nlohmann::json* out,
              int* http_status = nullptr);
  Status Put(const std::string& path, const nlohmann::json& body, nlohmann::json* out,
             int* http_status = nullptr);
  Status Delete(const std::string& path, nlohmann::json* out = nullptr, int* http_status = nullptr);

 private:
  Status Send(const char* method, const std::string& path, const nlohmann::json* body,
              nlohmann::json* out, int* http_status);

  KubeConfig config_;
  std::unique_ptr<httplib::Client> http_;
  Status setup_;  // why the client cannot be used, e.g. a malformed server URL
};

// Percent-encodes a query parameter value ("a=b,c" -> "a%3Db%2Cc").
std::string QueryEscape(const std::string& value);

}  // namespace vgpu::k8s
