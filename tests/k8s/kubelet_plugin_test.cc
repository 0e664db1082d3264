// The plugin driven as the kubelet drives it: a client built from the same
// protos dials the registration socket (GetInfo, NotifyRegistrationStatus),
// then the endpoint it announces, and prepares and unprepares claims with
// the kubelet's call deadline, retries and concurrent calls. The API server
// is a fake ClusterReader over ResourceClaim/Pod objects written as
// resource.k8s.io/v1 and core/v1 JSON; the GPUs are a fixed list.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "cluster/k8s/claim_preparer.h"
#include "cluster/k8s/dra_service.h"
#include "ctl/cdi/cdi_spec.h"

namespace vgpu::k8s {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// The kubelet's deadline for NodePrepare/UnprepareResources.
constexpr auto kKubeletDeadline = std::chrono::seconds(45);

const char* kUid1 = "0b6ea3e2-3c0e-4c55-9d1c-1a2b3c4d5e01";
const char* kUid2 = "0b6ea3e2-3c0e-4c55-9d1c-1a2b3c4d5e02";
const char* kPodUid = "7f000000-0000-4000-8000-000000000001";

json Claim(const std::string& uid, const std::string& name, const std::string& device,
           const std::string& memory, const std::string& compute,
           const std::string& driver = "vgpu.io") {
  json c = json::parse(R"({
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
    "metadata": {"namespace": "team-a"},
    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "vgpu.io"}}]}},
    "status": {
      "allocation": {"devices": {
        "results": [{"request": "gpu", "pool": "node-a",
                     "shareID": "5f3a1c2e-0000-4000-8000-00000000000a"}],
        "config": [{"source": "FromClass", "opaque": {"driver": "vgpu.io", "parameters": {
          "apiVersion": "vgpu.io/v1alpha1", "kind": "ClaimParameters", "weight": 2}}}]}},
      "reservedFor": [{"resource": "pods", "name": "train-0"}]}})");
  c["metadata"]["name"] = name;
  c["metadata"]["uid"] = uid;
  json& r = c["status"]["allocation"]["devices"]["results"][0];
  r["driver"] = driver;
  r["device"] = device;
  r["consumedCapacity"] = {{"memory", memory}, {"compute", compute}};
  c["spec"]["devices"]["requests"][0]["exactly"]["capacity"] = {
      {"requests", {{"memory", memory}, {"compute", compute}}}};
  c["status"]["reservedFor"][0]["uid"] = kPodUid;
  return c;
}

json Pod(int64_t priority) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", "train-0"}, {"namespace", "team-a"}, {"uid", kPodUid}}},
          {"spec", {{"priority", priority}}}};
}

// The API server's objects, by "namespace/name".
class FakeCluster : public ClusterReader {
 public:
  Status GetClaim(const std::string& ns, const std::string& name, json* out) override {
    ++claim_reads;
    if (block_first.exchange(false)) {
      std::unique_lock lock(mu_);
      release_.wait(lock, [&] { return released_; });
    }
    return Find(claims, ns + "/" + name, out);
  }
  Status GetPod(const std::string& ns, const std::string& name, json* out) override {
    return Find(pods, ns + "/" + name, out);
  }
  void Release() {
    std::lock_guard lock(mu_);
    released_ = true;
    release_.notify_all();
  }

  std::map<std::string, json> claims, pods;
  std::atomic<int> claim_reads{0};
  std::atomic<bool> block_first{false};

 private:
  Status Find(const std::map<std::string, json>& m, const std::string& key, json* out) {
    std::lock_guard lock(mu_);
    auto it = m.find(key);
    if (it == m.end()) return Status::Error(ErrorCode::kNoEnt, "not found");
    *out = it->second;
    return Status::Ok();
  }
  std::mutex mu_;
  std::condition_variable release_;
  bool released_ = false;
};

class KubeletPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Short: a unix socket's path must fit in 108 bytes.
    static int n = 0;
    root_ = fs::temp_directory_path() /
            ("vgpu-kp-" + std::to_string(getpid()) + "-" + std::to_string(++n));
    fs::remove_all(root_);
    for (const char* d : {"cdi", "claims", "plugins/vgpu.io", "plugins_registry", "lib"}) {
      fs::create_directories(root_ / d);
    }
    for (const char* f : {"lib/libvgpu.so", "lib/libcuda.so.1", "lib/vgpu-oci-hook"}) {
      std::ofstream(root_ / f) << "x";
    }
    cluster_.claims["team-a/train"] = Claim(kUid1, "train", "gpu-0", "512Mi", "50");
    cluster_.pods["team-a/train-0"] = Pod(2000);
    StartPlugin();
  }
  void TearDown() override {
    StopPlugin();
    fs::remove_all(root_);
  }

  PreparerOptions Options() const {
    PreparerOptions o;
    o.cdi_dir = (root_ / "cdi").string();
    o.claims_dir = (root_ / "claims").string();
    o.checkpoint_file = (root_ / "plugins/vgpu.io/checkpoint.json").string();
    o.inventory.libvgpu = (root_ / "lib/libvgpu.so").string();
    o.inventory.libcuda = (root_ / "lib/libcuda.so.1").string();
    o.inventory.hook = (root_ / "lib/vgpu-oci-hook").string();
    o.inventory.run_dir = "/run/vgpu";
    return o;
  }

  void StartPlugin() {
    auto gpus = [this](std::vector<NodeGpu>* out) {
      *out = gpus_;
      return Status::Ok();
    };
    preparer_ = std::make_unique<ClaimPreparer>(Options(), &cluster_, gpus);
    std::string warning;
    ASSERT_TRUE(preparer_->Init(&warning).ok());
    server_ = std::make_unique<PluginServer>(preparer_.get(), RegSocket(),
                                             (root_ / "plugins/vgpu.io/dra.sock").string());
    ASSERT_TRUE(server_->Start().ok());
  }
  void StopPlugin() {
    server_.reset();
    preparer_.reset();
  }
  std::string RegSocket() const { return (root_ / "plugins_registry/vgpu.io-reg.sock").string(); }

  // As the kubelet: the endpoint comes from GetInfo.
  std::unique_ptr<drapb::DRAPlugin::Stub> Dial() {
    auto reg = regpb::Registration::NewStub(
        grpc::CreateChannel("unix://" + RegSocket(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    regpb::PluginInfo info;
    EXPECT_TRUE(reg->GetInfo(&ctx, regpb::InfoRequest(), &info).ok());
    return drapb::DRAPlugin::NewStub(
        grpc::CreateChannel("unix://" + info.endpoint(), grpc::InsecureChannelCredentials()));
  }

  grpc::Status Prepare(drapb::DRAPlugin::Stub* stub, const std::vector<drapb::Claim>& claims,
                       drapb::NodePrepareResourcesResponse* resp,
                       std::chrono::milliseconds deadline = kKubeletDeadline) {
    drapb::NodePrepareResourcesRequest req;
    for (const auto& c : claims) *req.add_claims() = c;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + deadline);
    return stub->NodePrepareResources(&ctx, req, resp);
  }
  grpc::Status Unprepare(drapb::DRAPlugin::Stub* stub, const std::vector<drapb::Claim>& claims,
                         drapb::NodeUnprepareResourcesResponse* resp) {
    drapb::NodeUnprepareResourcesRequest req;
    for (const auto& c : claims) *req.add_claims() = c;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kKubeletDeadline);
    return stub->NodeUnprepareResources(&ctx, req, resp);
  }

  static drapb::Claim Ref(const std::string& uid, const std::string& name) {
    drapb::Claim c;
    c.set_namespace_("team-a");
    c.set_uid(uid);
    c.set_name(name);
    return c;
  }
  size_t Files(const char* dir) const {
    return std::distance(fs::recursive_directory_iterator(root_ / dir),
                         fs::recursive_directory_iterator{});
  }
  json ReadJson(const std::string& path) const {
    std::ifstream in(path);
    return json::parse(in, nullptr, false);
  }

  fs::path root_;
  FakeCluster cluster_;
  std::vector<NodeGpu> gpus_ = {{0, "GPU-00000000-0000-4000-8000-000000000000", 1ull << 30, ""},
                                {1, "GPU-00000000-0000-4000-8000-000000000001", 1ull << 30, ""}};
  std::unique_ptr<ClaimPreparer> preparer_;
  std::unique_ptr<PluginServer> server_;
};

TEST_F(KubeletPluginTest, RegistersAsDraPluginV1AndTakesTheKubeletsVerdict) {
  auto reg = regpb::Registration::NewStub(
      grpc::CreateChannel("unix://" + RegSocket(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  regpb::PluginInfo info;
  ASSERT_TRUE(reg->GetInfo(&ctx, regpb::InfoRequest(), &info).ok());
  EXPECT_EQ(info.type(), "DRAPlugin");
  EXPECT_EQ(info.name(), "vgpu.io");
  EXPECT_EQ(info.endpoint(), (root_ / "plugins/vgpu.io/dra.sock").string());
  ASSERT_EQ(info.supported_versions_size(), 1);
  EXPECT_EQ(info.supported_versions(0), "v1.DRAPlugin");

  regpb::RegistrationStatus status;
  status.set_plugin_registered(false);
  status.set_error("unsupported version");
  regpb::RegistrationStatusResponse none;
  grpc::ClientContext c2;
  ASSERT_TRUE(reg->NotifyRegistrationStatus(&c2, status, &none).ok());
  EXPECT_FALSE(server_->registration().registered());
  status.set_plugin_registered(true);
  status.clear_error();
  grpc::ClientContext c3;
  ASSERT_TRUE(reg->NotifyRegistrationStatus(&c3, status, &none).ok());
  EXPECT_TRUE(server_->registration().registered());
  EXPECT_EQ(server_->registration().notifications(), 2);
}

TEST_F(KubeletPluginTest, PrepareWritesTheClaimsSpecAndCeilingsAndAnswersItsCdiId) {
  auto stub = Dial();
  drapb::NodePrepareResourcesResponse resp;
  ASSERT_TRUE(Prepare(stub.get(), {Ref(kUid1, "train")}, &resp).ok());
  ASSERT_EQ(resp.claims().count(kUid1), 1u);
  const auto& r = resp.claims().at(kUid1);
  ASSERT_EQ(r.error(), "");
  ASSERT_EQ(r.devices_size(), 1);
  EXPECT_EQ(r.devices(0).pool_name(), "node-a");
  EXPECT_EQ(r.devices(0).device_name(), "gpu-0");
  ASSERT_EQ(r.devices(0).request_names_size(), 1);
  EXPECT_EQ(r.devices(0).request_names(0), "gpu");
  ASSERT_EQ(r.devices(0).cdi_device_ids_size(), 1);
  EXPECT_EQ(r.devices(0).cdi_device_ids(0), std::string("vgpu.io/claim=") + kUid1);

  json ceilings = ReadJson(preparer_->CeilingsFile(kUid1));
  EXPECT_EQ(ceilings["group"], std::string("claim-") + kUid1);
  EXPECT_EQ(ceilings["visible_devices"], gpus_[0].uuid);
  EXPECT_EQ(ceilings["device_memory_limit"], std::to_string(512ull << 20));
  EXPECT_EQ(ceilings["compute_share"], "50");
  EXPECT_EQ(ceilings["compute_weight"], "2");
  EXPECT_EQ(ceilings["priority"], "high");  // the pod's priority 2000 >= 1000
  EXPECT_EQ(ceilings["claim"], "team-a/train");
  EXPECT_EQ(ceilings["pod"], "team-a/train-0");

  json spec = ReadJson(preparer_->SpecFile(kUid1));
  EXPECT_TRUE(cdi::ValidateSpec(spec).ok());
  EXPECT_EQ(spec["kind"], "vgpu.io/claim");
  EXPECT_EQ(spec["devices"][0]["name"], kUid1);
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["env"][0],
            "VGPU_VISIBLE_DEVICES=" + gpus_[0].uuid);
  json args = spec["containerEdits"]["hooks"][0]["args"];
  auto claim = std::find(args.begin(), args.end(), "--claim");
  ASSERT_NE(claim, args.end());
  EXPECT_EQ(*(claim + 1), preparer_->CeilingsFile(kUid1));
}

TEST_F(KubeletPluginTest, PrepareTwiceRestartAndUnprepareTwiceGiveTheSameResult) {
  auto stub = Dial();
  drapb::NodePrepareResourcesResponse first, second, third;
  ASSERT_TRUE(Prepare(stub.get(), {Ref(kUid1, "train")}, &first).ok());
  ASSERT_TRUE(Prepare(stub.get(), {Ref(kUid1, "train")}, &second).ok());
  EXPECT_EQ(first.SerializeAsString(), second.SerializeAsString());
  EXPECT_EQ(cluster_.claim_reads.load(), 1);  // the second came from the checkpoint
  std::string spec = preparer_->SpecFile(kUid1);

  // A restart: the checkpoint answers, the API server is not asked again.
  StopPlugin();
  cluster_.claims.clear();
  StartPlugin();
  stub = Dial();
  ASSERT_TRUE(Prepare(stub.get(), {Ref(kUid1, "train")}, &third).ok());
  EXPECT_EQ(first.SerializeAsString(), third.SerializeAsString());

  drapb::NodeUnprepareResourcesResponse u1, u2;
  ASSERT_TRUE(Unprepare(stub.get(), {Ref(kUid1, "train")}, &u1).ok());
  ASSERT_EQ(u1.claims().count(kUid1), 1u);
  EXPECT_EQ(u1.claims().at(kUid1).error(), "");
  EXPECT_FALSE(fs::exists(spec));
  EXPECT_EQ(Files("claims"), 0u);
  ASSERT_TRUE(Unprepare(stub.get(), {Ref(kUid1, "train")}, &u2).ok());
  ASSERT_EQ(u2.claims().count(kUid1), 1u);
  EXPECT_EQ(u2.claims().at(kUid1).error(), "");
  EXPECT_EQ(preparer_->prepared(), 0u);
}

TEST_F(KubeletPluginTest, ASpecLostWithRunsTmpfsIsWrittenAgain) {
  auto stub = Dial();
  drapb::NodePrepareResourcesResponse first, again;
  ASSERT_TRUE(Prepare(stub.get(), {Ref(kUid1, "train")}, &first).ok());
  fs::remove(preparer_->SpecFile(kUid1));  // a reboot empties /var/run/cdi
  ASSERT_TRUE(Prepare(stub.get(), {Ref(kUid1, "train")}, &again).ok());
  EXPECT_EQ(first.SerializeAsString(), again.SerializeAsString());
  EXPECT_TRUE(fs::exists(preparer_->SpecFile(kUid1)));
  EXPECT_EQ(cluster_.claim_reads.load(), 2);
}

TEST_F(KubeletPluginTest, BadClaimsFailOnePerClaimAndWriteNothing) {
  json mismatched = Claim(kUid2, "recreated", "gpu-0", "256Mi", "10");
  cluster_.claims["team-a/recreated"] = mismatched;
  cluster_.claims["team-a/other"] = Claim("0b6ea3e2-3c0e-4c55-9d1c-1a2b3c4d5e03", "other", "gpu-0",
                                          "1Gi", "100", "gpu.nvidia.com");
  cluster_.claims["team-a/gone"] =
      Claim("0b6ea3e2-3c0e-4c55-9d1c-1a2b3c4d5e04", "gone", "gpu-7", "1Gi", "100");
  auto stub = Dial();
  drapb::NodePrepareResourcesResponse resp;
  const std::string other = "0b6ea3e2-3c0e-4c55-9d1c-1a2b3c4d5e03";
  const std::string gone = "0b6ea3e2-3c0e-4c55-9d1c-1a2b3c4d5e04";
  const std::string missing = "0b6ea3e2-3c0e-4c55-9d1c-1a2b3c4d5e05";
  ASSERT_TRUE(Prepare(stub.get(),
                      {Ref("0b6ea3e2-3c0e-4c55-9d1c-1a2b3c4d5e99", "recreated"),
                       Ref(other, "other"), Ref(gone, "gone"), Ref(missing, "missing")},
                      &resp)
                  .ok());
  ASSERT_EQ(resp.claims_size(), 4);
  EXPECT_NE(resp.claims().at("0b6ea3e2-3c0e-4c55-9d1c-1a2b3c4d5e99").error().find("UID"),
            std::string::npos);
  EXPECT_NE(resp.claims().at(other).error().find("gpu.nvidia.com"), std::string::npos)
      << resp.claims().at(other).error();
  EXPECT_NE(resp.claims().at(gone).error().find("gpu-7"), std::string::npos);
  EXPECT_NE(resp.claims().at(missing).error().find("not found"), std::string::npos);
  for (const auto& [uid, r] : resp.claims()) EXPECT_EQ(r.devices_size(), 0) << uid;
  EXPECT_EQ(Files("cdi"), 0u);
  EXPECT_EQ(Files("claims"), 0u);
  EXPECT_EQ(preparer_->prepared(), 0u);
}

TEST_F(KubeletPluginTest, AGoodClaimBesideABadOneIsPrepared) {
  auto stub = Dial();
  drapb::NodePrepareResourcesResponse resp;
  ASSERT_TRUE(Prepare(stub.get(), {Ref(kUid1, "train"), Ref(kUid2, "missing")}, &resp).ok());
  EXPECT_EQ(resp.claims().at(kUid1).error(), "");
  EXPECT_NE(resp.claims().at(kUid2).error(), "");
  EXPECT_TRUE(fs::exists(preparer_->SpecFile(kUid1)));
  EXPECT_FALSE(fs::exists(preparer_->SpecFile(kUid2)));
}

// The kubelet gives up after its deadline and calls again; the first call
// finishing late must not leave a different answer or a second set of files.
TEST_F(KubeletPluginTest, ARetryAfterTheDeadlineGetsTheSameAnswer) {
  cluster_.block_first = true;
  auto stub = Dial();
  drapb::NodePrepareResourcesResponse late;
  grpc::Status s =
      Prepare(stub.get(), {Ref(kUid1, "train")}, &late, std::chrono::milliseconds(200));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  drapb::NodePrepareResourcesResponse retry;
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    cluster_.Release();
  });
  ASSERT_TRUE(Prepare(stub.get(), {Ref(kUid1, "train")}, &retry).ok());
  release.join();
  EXPECT_EQ(retry.claims().at(kUid1).error(), "");
  EXPECT_EQ(retry.claims().at(kUid1).devices(0).cdi_device_ids(0),
            std::string("vgpu.io/claim=") + kUid1);
  EXPECT_EQ(Files("cdi"), 1u);
}

TEST_F(KubeletPluginTest, ConcurrentCallsPrepareEveryClaimOnce) {
  constexpr int kClaims = 12;
  std::vector<std::string> uids;
  for (int i = 0; i < kClaims; ++i) {
    char uid[64];
    std::snprintf(uid, sizeof uid, "1b6ea3e2-3c0e-4c55-9d1c-1a2b3c4d5e%02d", i);
    uids.push_back(uid);
    cluster_.claims["team-a/c" + std::to_string(i)] =
        Claim(uid, "c" + std::to_string(i), i % 2 ? "gpu-1" : "gpu-0", "64Mi", "5");
  }
  auto stub = Dial();
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 2 * kClaims; ++t) {
    threads.emplace_back([&, t] {
      int i = t % kClaims;  // every claim twice, at once
      drapb::NodePrepareResourcesResponse resp;
      if (Prepare(stub.get(), {Ref(uids[i], "c" + std::to_string(i))}, &resp).ok() &&
          resp.claims().at(uids[i]).error().empty()) {
        ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 2 * kClaims);
  EXPECT_EQ(preparer_->prepared(), static_cast<size_t>(kClaims));
  EXPECT_EQ(Files("cdi"), static_cast<size_t>(kClaims));
  // The checkpoint on disk has them all (what a restart reads).
  std::map<std::string, PreparedClaim> saved;
  std::ifstream in(root_ / "plugins/vgpu.io/checkpoint.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(PreparedClaims::Parse(text, &saved).ok());
  EXPECT_EQ(saved.size(), static_cast<size_t>(kClaims));
}

}  // namespace
}  // namespace vgpu::k8s
