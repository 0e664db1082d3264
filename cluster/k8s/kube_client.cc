#include "cluster/k8s/kube_client.h"

#include <httplib.h>

#include <cstdlib>
#include <exception>
#include <fstream>
#include <sstream>
#include <utility>

namespace vgpu::k8s {
namespace {

using nlohmann::json;

constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  *out = text.str();
  return static_cast<bool>(in) || in.eof();
}

std::string Trim(std::string s) {
  const char* kSpace = " \t\r\n";
  s.erase(s.find_last_not_of(kSpace) + 1);
  s.erase(0, s.find_first_not_of(kSpace));
  return s;
}

ErrorCode CodeForHttp(int status) {
  switch (status) {
    case 400:
    case 422:
      return ErrorCode::kInval;
    case 401:
    case 403:
      return ErrorCode::kPerm;
    case 404:
      return ErrorCode::kNoEnt;
    case 409:
      return ErrorCode::kExist;
    case 413:
      return ErrorCode::kTooBig;
    case 429:
      return ErrorCode::kBusy;
    case 504:
      return ErrorCode::kTimedOut;
    default:
      return ErrorCode::kIo;
  }
}

// "GET /path: 404 NotFound: resourceslices "x" not found": the API's own
// Status (reason, message) when the body is one.
Status HttpError(const char* method, const std::string& path, int status, const json& body) {
  std::string text = std::string(method) + " " + path + ": HTTP " + std::to_string(status);
  if (body.is_object()) {
    auto reason = body.find("reason");
    auto message = body.find("message");
    if (reason != body.end() && reason->is_string()) text += " " + reason->get<std::string>();
    if (message != body.end() && message->is_string()) text += ": " + message->get<std::string>();
  }
  return Status::Error(CodeForHttp(status), text);
}

Status TransportError(const char* method, const std::string& server, const std::string& path,
                      httplib::Error error) {
  ErrorCode code =
      error == httplib::Error::ConnectionTimeout ? ErrorCode::kTimedOut : ErrorCode::kIo;
  return Status::Error(
      code, std::string(method) + " " + server + path + ": " + httplib::to_string(error));
}

bool ValidServer(const std::string& server) {
  return server.rfind("https://", 0) == 0 || server.rfind("http://", 0) == 0;
}

}  // namespace

Status ReadToken(const std::string& path, std::string* token) {
  std::string text;
  if (!ReadFile(path, &text)) {
    return Status::Error(ErrorCode::kNoEnt, "cannot read the bearer token file " + path);
  }
  *token = Trim(std::move(text));
  return Status::Ok();
}

Status InClusterConfig(KubeConfig* config) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || port == nullptr || *host == '\0' || *port == '\0') {
    return Status::Error(ErrorCode::kNoEnt,
                         "not in a pod: KUBERNETES_SERVICE_HOST/_PORT are not set");
  }
  std::string h = host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";  // an IPv6 address
  KubeConfig c;
  c.server = "https://" + h + ":" + port;
  c.token_file = std::string(kServiceAccountDir) + "/token";
  if (Status st = ReadToken(c.token_file, &c.token); !st.ok()) return st;
  c.ca_file = std::string(kServiceAccountDir) + "/ca.crt";
  if (!std::ifstream(c.ca_file)) {
    return Status::Error(ErrorCode::kNoEnt, "cannot read the cluster CA " + c.ca_file);
  }
  *config = std::move(c);
  return Status::Ok();
}

KubeClient::KubeClient(KubeConfig config) : config_(std::move(config)) {
  if (!ValidServer(config_.server)) {
    setup_ = Status::Error(ErrorCode::kInval,
                           "API server URL \"" + config_.server + "\" is not http:// or https://");
    return;
  }
  try {
    http_ = std::make_unique<httplib::Client>(config_.server);
  } catch (const std::exception& e) {
    setup_ = Status::Error(ErrorCode::kInval, "API server URL " + config_.server + ": " + e.what());
    return;
  }
  if (!http_->is_valid()) {
    setup_ = Status::Error(ErrorCode::kInval, "cannot set up a client for " + config_.server);
    return;
  }
  auto sec = std::chrono::duration_cast<std::chrono::seconds>(config_.timeout);
  auto usec = std::chrono::duration_cast<std::chrono::microseconds>(config_.timeout - sec);
  http_->set_connection_timeout(sec.count(), usec.count());
  http_->set_read_timeout(sec.count(), usec.count());
  http_->set_write_timeout(sec.count(), usec.count());
  http_->set_url_encode(false);  // paths arrive escaped (QueryEscape)
  http_->set_keep_alive(true);
  if (config_.server.rfind("https://", 0) == 0) {
    if (!config_.ca_file.empty()) http_->set_ca_cert_path(config_.ca_file);
    http_->enable_server_certificate_verification(true);
  }
}

KubeClient::~KubeClient() = default;

Status KubeClient::Get(const std::string& path, json* out, int* http_status) {
  return Send("GET", path, nullptr, out, http_status);
}

Status KubeClient::Post(const std::string& path, const json& body, json* out, int* http_status) {
  return Send("POST", path, &body, out, http_status);
}

Status KubeClient::Put(const std::string& path, const json& body, json* out, int* http_status) {
  return Send("PUT", path, &body, out, http_status);
}

Status KubeClient::Delete(const std::string& path, json* out, int* http_status) {
  return Send("DELETE", path, nullptr, out, http_status);
}

Status KubeClient::Send(const char* method, const std::string& path, const json* body, json* out,
                        int* http_status) {
  if (http_status != nullptr) *http_status = 0;
  if (!setup_.ok()) return setup_;
  httplib::Request req;
  req.method = method;
  req.path = path;
  req.set_header("Accept", "application/json");
  std::string token = config_.token;
  if (!config_.token_file.empty()) {
    if (Status st = ReadToken(config_.token_file, &token); !st.ok()) return st;
  }
  if (!token.empty()) req.set_header("Authorization", "Bearer " + token);
  if (body != nullptr) {
    req.body = body->dump(-1, ' ', false, json::error_handler_t::replace);
    req.set_header("Content-Type", "application/json");
  }
  std::string received;
  bool too_big = false;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (received.size() + n > kMaxResponseBytes) return !(too_big = true);
    received.append(data, n);
    return true;
  };
  httplib::Result res = http_->send(req);
  if (too_big) {
    return Status::Error(ErrorCode::kTooBig, std::string(method) + " " + path +
                                                 ": answer larger than " +
                                                 std::to_string(kMaxResponseBytes) + " bytes");
  }
  if (!res) return TransportError(method, config_.server, path, res.error());
  if (http_status != nullptr) *http_status = res->status;
  json parsed = json::parse(received, nullptr, /*allow_exceptions=*/false);
  if (res->status < 200 || res->status > 299) return HttpError(method, path, res->status, parsed);
  if (parsed.is_discarded()) {
    return Status::Error(ErrorCode::kProto,
                         std::string(method) + " " + path + ": the answer is not JSON");
  }
  if (out != nullptr) *out = std::move(parsed);
  return Status::Ok();
}

std::string QueryEscape(const std::string& value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '.' || c == '_' || c == '~';
    if (plain) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace vgpu::k8s
