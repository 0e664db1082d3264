// Pure protocol tests (label unit): framing, validation, versioning, the run
// directory rules. No sockets are served here.
#include "ctl/control/protocol.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "ctl/control/run_dir.h"
#include "tests/ctl/test_util.h"

namespace vgpu::ctl {
namespace {

using nlohmann::json;

TEST(Protocol, ParsesAMinimalRequest) {
  Request r;
  ASSERT_TRUE(ParseRequest(R"({"v":1,"id":7,"cmd":"info"})", &r).ok());
  EXPECT_EQ(r.id, 7);
  EXPECT_EQ(r.cmd, "info");
  EXPECT_TRUE(r.args.is_object());
}

TEST(Protocol, IgnoresUnknownFields) {
  Request r;
  ASSERT_TRUE(
      ParseRequest(R"({"v":1,"cmd":"ping","future":{"x":[1,2]},"args":{"new":1}})", &r).ok());
  EXPECT_EQ(r.cmd, "ping");
  CheckpointArgs a;
  EXPECT_TRUE(ParseCheckpointArgs(json{{"dir", "/x"}, {"compression", "max"}}, &a).ok());
}

TEST(Protocol, RefusesUnknownOrMissingVersion) {
  Request r;
  Status s = ParseRequest(R"({"v":2,"id":3,"cmd":"info"})", &r);
  EXPECT_EQ(s.code, ErrorCode::kProto);
  EXPECT_EQ(r.id, 3) << "the id is still echoed";
  EXPECT_EQ(ParseRequest(R"({"cmd":"info"})", &r).code, ErrorCode::kProto);
  EXPECT_EQ(ParseRequest(R"({"v":"1","cmd":"info"})", &r).code, ErrorCode::kProto);
  EXPECT_EQ(ParseRequest(R"({"v":1.5,"cmd":"info"})", &r).code, ErrorCode::kProto);
}

TEST(Protocol, RejectsMalformedRequests) {
  for (const char* bad : {"", "garbage", "[1,2]", "42", R"({"v":1})", R"({"v":1,"cmd":5})",
                          R"({"v":1,"cmd":"info","id":"x"})", "{\"v\":1,\"cmd\":\"\xff\xfe\"}",
                          R"({"v":1,"cmd":"info")"}) {
    Request r;
    Status s = ParseRequest(bad, &r);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_FALSE(s.message.empty());
  }
}

TEST(Protocol, RejectsDeepNestingBeforeParsing) {
  std::string deep(100000, '[');
  Request r;
  EXPECT_EQ(ParseRequest(deep, &r).code, ErrorCode::kInval);
  EXPECT_EQ(JsonDepth(R"({"a":"[[[[[[[[","b":[{}]})"), 3) << "brackets in strings do not count";
  EXPECT_EQ(JsonDepth(R"({"a":"\"[[[["})"), 1);
}

TEST(Protocol, ValidatesArgumentTypes) {
  EXPECT_EQ(ValidateArgs("info", json::array()).code, ErrorCode::kInval);
  EXPECT_TRUE(ValidateArgs("info", json::object()).ok());
  EXPECT_EQ(ValidateArgs("checkpoint", {{"dir", 5}}).code, ErrorCode::kInval);
  EXPECT_EQ(ValidateArgs("checkpoint", {{"dir", "relative/dir"}}).code, ErrorCode::kInval);
  EXPECT_EQ(ValidateArgs("checkpoint", {{"leave_running", "yes"}}).code, ErrorCode::kInval);
  EXPECT_TRUE(ValidateArgs("checkpoint", {{"dir", "/ok"}, {"leave_running", true}}).ok());
  EXPECT_TRUE(ValidateArgs("checkpoint", {{"dir", nullptr}}).ok()) << "null = absent";
  // Empty is not absent: it is refused, not taken for the default directory.
  EXPECT_EQ(ValidateArgs("checkpoint", {{"dir", ""}}).code, ErrorCode::kInval);
  EXPECT_EQ(ValidateArgs("restore", {{"from", ""}}).code, ErrorCode::kInval);
  EXPECT_EQ(ValidateArgs("restore", {{"from", false}}).code, ErrorCode::kInval);
  EXPECT_EQ(ValidateArgs("set", json::object()).code, ErrorCode::kInval);
  EXPECT_EQ(ValidateArgs("set", {{"compute_share", 500}}).code, ErrorCode::kInval);
  EXPECT_EQ(ValidateArgs("set", {{"memory_limit", -1}}).code, ErrorCode::kInval);
  EXPECT_EQ(ValidateArgs("set", {{"memory_limit", 1.5}}).code, ErrorCode::kInval);
  SetArgs s;
  ASSERT_TRUE(ParseSetArgs({{"memory_limit", 18446744073709551615ull}, {"device", 1}}, &s).ok());
  EXPECT_EQ(*s.memory_limit, 18446744073709551615ull);
  EXPECT_EQ(*s.device, 1);
}

TEST(Protocol, SetArgsWeightAndPriority) {
  SetArgs s;
  ASSERT_TRUE(ParseSetArgs({{"weight", 3}, {"priority", "low"}}, &s).ok())
      << "weight or priority alone is something to set";
  EXPECT_EQ(*s.weight, 3);
  EXPECT_EQ(*s.priority, "low");
  EXPECT_FALSE(s.memory_limit);
  for (const char* p : {"high", "normal", "low"}) {
    EXPECT_TRUE(ValidateArgs("set", {{"priority", p}}).ok()) << p;
  }
  // Each refusal names the field.
  auto message = [](const json& args) { return ValidateArgs("set", args).message; };
  EXPECT_EQ(message({{"priority", "urgent"}}),
            "invalid argument 'priority': expected high, normal or low");
  EXPECT_EQ(message({{"priority", "HIGH"}}),
            "invalid argument 'priority': expected high, normal or low")
      << "the wire words are exact";
  EXPECT_EQ(message({{"priority", 1}}), "invalid argument 'priority': expected a string");
  EXPECT_EQ(message({{"weight", 0}}), "invalid argument 'weight': out of range");
  EXPECT_EQ(message({{"weight", 1001}}), "invalid argument 'weight': out of range");
  // As read from the wire, where nlohmann makes every non-negative literal
  // unsigned (a 0 built in C++ is signed): the lower bound holds for both.
  EXPECT_EQ(message(json::parse(R"({"weight":0})")), "invalid argument 'weight': out of range");
  EXPECT_EQ(message(json::parse(R"({"compute_share":0})")),
            "invalid argument 'compute_share': out of range");
  EXPECT_EQ(message({{"compute_share", 100.5}}), "invalid argument 'compute_share': out of range");
  EXPECT_EQ(message({{"compute_share", "30"}}),
            "invalid argument 'compute_share': expected a number");
  SetArgs share;
  ASSERT_TRUE(ParseSetArgs({{"compute_share", 12.5}}, &share).ok());
  EXPECT_EQ(share.share_permille, 125u) << "a fractional share, as VGPU_COMPUTE_SHARE takes it";
  ASSERT_TRUE(ParseSetArgs(ToJson(share), &share).ok());
  EXPECT_EQ(share.share_permille, 125u) << "round trip";
  EXPECT_EQ(message({{"weight", "2"}}), "invalid argument 'weight': expected an integer");
  EXPECT_EQ(message({{"weight", 2.5}}), "invalid argument 'weight': expected an integer");
  EXPECT_EQ(message({{"device", 0}}),
            "invalid argument 'args': nothing to set (memory_limit, compute_share, weight or "
            "priority)");
  EXPECT_TRUE(ValidateArgs("set", {{"weight", 1000}, {"priority", nullptr}}).ok())
      << "null = absent";
  // And back: ToJson carries the new fields, and only those given.
  SetArgs all{0, 0, 50, 7, "high"}, again;
  ASSERT_TRUE(ParseSetArgs(ToJson(all), &again).ok());
  EXPECT_EQ(*again.weight, 7);
  EXPECT_EQ(*again.priority, "high");
  EXPECT_EQ(*again.memory_limit, 0u) << "0 = unlimited travels as 0";
  EXPECT_FALSE(ToJson(SetArgs{std::nullopt, 1, std::nullopt, std::nullopt, std::nullopt})
                   .contains("priority"));
}

TEST(Protocol, TypedArgsRoundTrip) {
  CheckpointArgs c{"/ckpt", true}, c2;
  ASSERT_TRUE(ParseCheckpointArgs(ToJson(c), &c2).ok());
  EXPECT_EQ(c2.dir, "/ckpt");
  EXPECT_TRUE(c2.leave_running);
  RestoreArgs r{"/from"}, r2;
  ASSERT_TRUE(ParseRestoreArgs(ToJson(r), &r2).ok());
  EXPECT_EQ(r2.from, "/from");
  EXPECT_TRUE(ToJson(RestoreArgs{}).empty()) << "empty = the agent's default";
}

TEST(Protocol, InfoResultRoundTrip) {
  InfoResult in{42, 1000, "0.1.0", "g", "suspended", "python"};
  in.devices = {{0, "GPU-a", 1ull << 30, 5}, {1, "GPU-b", std::nullopt, 0}};
  json j = ToJson(in);
  EXPECT_TRUE(j["devices"][1]["quota"].is_null()) << "unlimited";
  InfoResult out;
  ASSERT_TRUE(ParseInfoResult(j, &out).ok());
  EXPECT_EQ(out.pid, 42);
  EXPECT_EQ(out.state, "suspended");
  ASSERT_EQ(out.devices.size(), 2u);
  EXPECT_EQ(*out.devices[0].quota, 1ull << 30);
  EXPECT_FALSE(out.devices[1].quota);
  EXPECT_FALSE(ParseInfoResult({{"devices", 3}}, &out).ok());
}

TEST(Protocol, InfoResultCarriesRuntimeSettings) {
  InfoResult in{42, 1000, "0.1.0", "g", "running", "python"};
  in.priority = "low";
  in.weight = 4;
  in.compute_policy = "fixed";
  in.devices = {{0, "GPU-a", std::nullopt, 0, 12.5}, {1, "GPU-b", std::nullopt, 0}};
  json j = ToJson(in);
  EXPECT_EQ(j["priority"], "low");
  EXPECT_EQ(j["weight"], 4);
  EXPECT_EQ(j["devices"][0]["compute_share"], 12.5);
  EXPECT_TRUE(j["devices"][1]["compute_share"].is_null()) << "no share";
  InfoResult out;
  ASSERT_TRUE(ParseInfoResult(j, &out).ok());
  EXPECT_EQ(out.priority, "low");
  EXPECT_EQ(out.weight, 4);
  EXPECT_EQ(out.compute_policy, "fixed");
  EXPECT_EQ(*out.devices[0].compute_share, 12.5);
  EXPECT_FALSE(out.devices[1].compute_share);
  // An agent older than runtime settings: the defaults.
  for (const char* key : {"priority", "weight", "compute_policy"}) j.erase(key);
  j["devices"][0].erase("compute_share");
  InfoResult older;
  ASSERT_TRUE(ParseInfoResult(j, &older).ok());
  EXPECT_EQ(older.priority, "normal");
  EXPECT_EQ(older.weight, 1);
  EXPECT_EQ(older.compute_policy, "native");
  EXPECT_FALSE(older.devices[0].compute_share);
  InfoResult bad;
  EXPECT_FALSE(ParseInfoResult({{"weight", "heavy"}}, &bad).ok());
  EXPECT_FALSE(ParseInfoResult({{"priority", 2}}, &bad).ok());
  EXPECT_FALSE(ParseInfoResult({{"devices", {{{"compute_share", "half"}}}}}, &bad).ok());
}

TEST(Protocol, InfoResultCarriesCounters) {
  InfoResult in{42, 1000, "0.1.0", "g", "running", "python"};
  in.counters = {{"allocations_refused", 3}, {"suspend_bytes", 5ull << 30}};
  json j = ToJson(in);
  EXPECT_EQ(j["counters"]["allocations_refused"], 3);
  InfoResult out;
  ASSERT_TRUE(ParseInfoResult(j, &out).ok());
  ASSERT_EQ(out.counters.size(), 2u);
  EXPECT_EQ(out.counters[1].first, "suspend_bytes");
  EXPECT_EQ(out.counters[1].second, 5ull << 30);
  InfoResult older;
  j.erase("counters");
  ASSERT_TRUE(ParseInfoResult(j, &older).ok()) << "an agent older than the counters";
  EXPECT_TRUE(older.counters.empty());
  InfoResult bad;
  EXPECT_FALSE(ParseInfoResult({{"counters", {{"suspends", -1}}}}, &bad).ok());
  EXPECT_FALSE(ParseInfoResult({{"counters", json::array()}}, &bad).ok());
}

TEST(Protocol, ProcessListOfIsAListOfOneInfo) {
  Response ps = ProcessListOf(Response::Ok({{"pid", 7}}));
  ASSERT_TRUE(ps.ok);
  ASSERT_EQ(ps.result["processes"].size(), 1u);
  EXPECT_EQ(ps.result["processes"][0]["pid"], 7);
  Response err = ProcessListOf(Response::Error(ErrorCode::kBusy, "busy"));
  EXPECT_FALSE(err.ok);
  EXPECT_EQ(err.code, ErrorCode::kBusy);
}

TEST(Protocol, ResponsesAreOneLine) {
  std::string ok = SerializeResponse(Response::Ok({{"a", "x\ny"}}));
  EXPECT_EQ(ok.find('\n'), ok.size() - 1);
  json j = json::parse(ok);
  EXPECT_EQ(j["v"], 1);
  EXPECT_EQ(j["ok"], true);
  std::string err = SerializeResponse(Response::Error(ErrorCode::kBusy, "busy"));
  j = json::parse(err);
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["code"], "EBUSY");
  EXPECT_EQ(j["error"], "busy");
}

TEST(Protocol, InvalidUtf8NeverThrows) {
  std::string s = SerializeResponse(Response::Error(ErrorCode::kNoSys, "unknown \xff\xfe"));
  EXPECT_FALSE(json::parse(s, nullptr, false).is_discarded());
}

// A deeply nested answer is refused before it is parsed: copying it (the
// response's result) recursed once per level and overflowed the stack under
// ASan (ctl_protocol_fuzz's crash).
TEST(Protocol, DeeplyNestedServerLineIsRefused) {
  const int n = 30000;
  const std::string line = "{\"ok\":true,\"result\":" + std::string(n, '[') + std::string(n, ']') + "}";
  ServerLine l;
  Status s = ParseServerLine(line, &l);
  EXPECT_EQ(s.code, ErrorCode::kProto) << s.message;
  const std::string shallow = "{\"ok\":true,\"result\":{\"a\":[[1]]}}";
  EXPECT_TRUE(ParseServerLine(shallow, &l).ok());
}

TEST(Protocol, ServerLines) {
  ServerLine l;
  ASSERT_TRUE(ParseServerLine(SerializeProgress(3, {10, 20, "copy"}), &l).ok());
  EXPECT_TRUE(l.is_progress);
  EXPECT_EQ(l.progress.done, 10u);
  EXPECT_EQ(l.progress.phase, "copy");
  ServerLine e;
  ASSERT_TRUE(ParseServerLine(R"({"ok":false,"error":"no","code":"EPERM"})", &e).ok());
  EXPECT_FALSE(e.response.ok);
  EXPECT_EQ(e.response.code, ErrorCode::kPerm);
  ServerLine f;
  ASSERT_TRUE(ParseServerLine(R"({"ok":false,"code":"EWHATEVER"})", &f).ok());
  EXPECT_EQ(f.response.code, ErrorCode::kIo) << "unknown codes read as EIO";
  EXPECT_FALSE(ParseServerLine("nope", &f).ok());
  EXPECT_FALSE(ParseServerLine(R"({"v":9,"ok":true})", &f).ok());
  EXPECT_FALSE(ParseServerLine(R"({"v":1})", &f).ok());
}

TEST(Protocol, ErrorCodeNames) {
  for (ErrorCode c : {ErrorCode::kPerm, ErrorCode::kInval, ErrorCode::kBusy, ErrorCode::kNoEnt,
                      ErrorCode::kIo, ErrorCode::kNoSys, ErrorCode::kProto, ErrorCode::kTooBig,
                      ErrorCode::kTimedOut, ErrorCode::kExist, ErrorCode::kUntrusted}) {
    EXPECT_EQ(ErrorCodeFromName(ErrorCodeName(c)), c);
  }
}

// --- Run directory ---

class RunDirEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : {"VGPU_RUN_DIR", "XDG_RUNTIME_DIR", "VGPU_DEVICE_MEMORY_LIMIT"}) {
      const char* old = std::getenv(v);
      saved_.emplace_back(v, old ? std::optional<std::string>(old) : std::nullopt);
      unsetenv(v);
    }
  }
  void TearDown() override {
    for (auto& [k, v] : saved_) {
      if (v)
        setenv(k, v->c_str(), 1);
      else
        unsetenv(k);
    }
  }
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

TEST_F(RunDirEnv, Precedence) {
  EXPECT_EQ(RunDir(), geteuid() == 0 ? "/run/vgpu" : "/tmp/vgpu-" + std::to_string(geteuid()));
  setenv("XDG_RUNTIME_DIR", "/run/user/77", 1);
  EXPECT_EQ(RunDir(), "/run/user/77/vgpu");
  setenv("VGPU_RUN_DIR", "/somewhere", 1);
  EXPECT_EQ(RunDir(), "/somewhere");
  setenv("VGPU_RUN_DIR", "", 1);
  EXPECT_EQ(RunDir(), "/run/user/77/vgpu") << "empty means unset";
}

TEST_F(RunDirEnv, OtherMalformedOptionsDoNotHideTheAgents) {
  setenv("VGPU_RUN_DIR", "/somewhere", 1);
  setenv("VGPU_DEVICE_MEMORY_LIMIT", "plenty", 1);
  EXPECT_EQ(RunDir(), "/somewhere") << "VGPU_RUN_DIR is read alone, through the option table";
}

TEST(RunDir, CreatesPrivateDirectoryAndChecksExistingOnes) {
  testing::TempDir t;
  std::string dir = t.path() + "/run";
  ASSERT_TRUE(EnsureRunDir(dir).ok());
  struct stat st {};
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_TRUE(EnsureRunDir(dir).ok()) << "existing and safe";
  chmod(dir.c_str(), 0777);
  EXPECT_EQ(EnsureRunDir(dir).code, ErrorCode::kPerm) << "world-writable, not sticky";
  chmod(dir.c_str(), 01777);
  EXPECT_TRUE(EnsureRunDir(dir).ok()) << "sticky like /tmp";
  std::string link = t.path() + "/link";
  ASSERT_EQ(symlink(dir.c_str(), link.c_str()), 0);
  EXPECT_EQ(EnsureRunDir(link).code, ErrorCode::kPerm) << "symlinks are refused";
  EXPECT_FALSE(EnsureRunDir(t.path() + "/no/such/parent").ok());
}

TEST(RunDir, SocketPathMustFitSunPath) {
  std::string path;
  ASSERT_TRUE(SocketPath("/run/vgpu", 1234, &path).ok());
  EXPECT_EQ(path, "/run/vgpu/agent-1234.sock");
  Status s = SocketPath("/" + std::string(100, 'd'), 1234, &path);
  EXPECT_EQ(s.code, ErrorCode::kInval);
  EXPECT_NE(s.message.find("VGPU_RUN_DIR"), std::string::npos) << s.message;
}

TEST(RunDir, SocketNames) {
  EXPECT_EQ(PidFromSocketName("agent-1234.sock"), 1234);
  for (const char* bad : {"agent-.sock", "agent-12a.sock", "agent-0.sock", "agent-1234.sock.tmp",
                          "x-1.sock", "agent-99999999999.sock"}) {
    EXPECT_FALSE(PidFromSocketName(bad)) << bad;
  }
}

}  // namespace
}  // namespace vgpu::ctl
