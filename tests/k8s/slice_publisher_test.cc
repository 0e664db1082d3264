#include "cluster/k8s/slice_publisher.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cluster/k8s/kube_client.h"
#include "tests/k8s/fake_api_server.h"

namespace vgpu::k8s {
namespace {

using nlohmann::json;
using testing::FakeApiServer;

constexpr char kToken[] = "s3cret-token";
constexpr uint64_t kGi = uint64_t{1} << 30;

std::vector<SliceGpu> Gpus(bool drain_second = false) {
  return {
      {0, "GPU-00000000-0000-4000-8000-000000000000", "NVIDIA A100", 8, 0, 40 * kGi, false},
      {1, "GPU-11111111-1111-4111-8111-111111111111", "NVIDIA A100", 8, 0, 40 * kGi, drain_second}};
}

SliceOptions Options(const std::string& node = "node-a") {
  SliceOptions o;
  o.node_name = node;
  return o;
}

KubeConfig Config(const FakeApiServer& server, std::string token = kToken) {
  KubeConfig c;
  c.server = server.url();
  c.token = std::move(token);
  c.timeout = std::chrono::milliseconds(5000);
  return c;
}

int64_t GenerationOf(const json& slice) { return slice["spec"]["pool"]["generation"]; }

TEST(SlicePublisherTest, CreatesThenLeavesAnUnchangedSliceAlone) {
  FakeApiServer server(kToken);
  KubeClient client(Config(server));
  SlicePublisher publisher(&client, Options());
  PublishOutcome outcome{};
  ASSERT_TRUE(publisher.Publish(Gpus(), &outcome).ok());
  EXPECT_EQ(outcome, PublishOutcome::kCreated);
  auto slices = server.Slices();
  ASSERT_EQ(slices.size(), 1u);
  const json& slice = slices.at("node-a-vgpu.io");
  EXPECT_EQ(GenerationOf(slice), 1);
  EXPECT_EQ(slice["spec"]["devices"].size(), 2u);
  EXPECT_EQ(server.last_authorization(), std::string("Bearer ") + kToken);

  Status st = publisher.Publish(Gpus(), &outcome);
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_EQ(outcome, PublishOutcome::kUnchanged);
  EXPECT_EQ(server.puts(), 0);
  EXPECT_EQ(server.posts(), 1);
}

TEST(SlicePublisherTest, DrainingUpdatesWithTheNextGenerationAndKeepsTheTaintTime) {
  FakeApiServer server(kToken);
  KubeClient client(Config(server));
  SlicePublisher publisher(&client, Options());
  ASSERT_TRUE(publisher.Publish(Gpus()).ok());
  PublishOutcome outcome{};
  Status st = publisher.Publish(Gpus(/*drain_second=*/true), &outcome);
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_EQ(outcome, PublishOutcome::kUpdated);
  json slice = server.Slices().at("node-a-vgpu.io");
  EXPECT_EQ(GenerationOf(slice), 2);
  const json& taints = slice["spec"]["devices"][1]["taints"];
  ASSERT_EQ(taints.size(), 1u);
  EXPECT_EQ(taints[0]["key"], "vgpu.io/drained");
  EXPECT_EQ(taints[0]["effect"], "NoSchedule");
  std::string added = taints[0]["timeAdded"];

  // Still drained a while later: nothing to write, however late it is now.
  ASSERT_TRUE(publisher.Publish(Gpus(true), &outcome).ok());
  EXPECT_EQ(outcome, PublishOutcome::kUnchanged);
  // Another change keeps the drained GPU's taint time.
  std::vector<SliceGpu> gpus = Gpus(true);
  gpus[0].drained = true;
  ASSERT_TRUE(publisher.Publish(gpus, &outcome).ok());
  EXPECT_EQ(outcome, PublishOutcome::kUpdated);
  slice = server.Slices().at("node-a-vgpu.io");
  EXPECT_EQ(GenerationOf(slice), 3);
  EXPECT_EQ(slice["spec"]["devices"][1]["taints"][0]["timeAdded"], added);

  ASSERT_TRUE(publisher.Publish(Gpus(), &outcome).ok());  // undrained
  EXPECT_FALSE(server.Slices().at("node-a-vgpu.io")["spec"]["devices"][1].contains("taints"));
  EXPECT_EQ(GenerationOf(server.Slices().at("node-a-vgpu.io")), 4);
}

TEST(SlicePublisherTest, AConflictIsReadAgainAndRetriedOnce) {
  FakeApiServer server(kToken);
  KubeClient client(Config(server));
  SlicePublisher publisher(&client, Options());
  ASSERT_TRUE(publisher.Publish(Gpus()).ok());
  server.InjectConflicts(1);
  PublishOutcome outcome{};
  Status st = publisher.Publish(Gpus(true), &outcome);
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_EQ(outcome, PublishOutcome::kUpdated);
  EXPECT_EQ(server.puts(), 2);
  EXPECT_EQ(GenerationOf(server.Slices().at("node-a-vgpu.io")), 2);

  server.InjectConflicts(2);  // twice in a row: give up, say why
  st = publisher.Publish(Gpus(), &outcome);
  EXPECT_EQ(st.code, ErrorCode::kExist);
  EXPECT_NE(st.message.find("Conflict"), std::string::npos) << st.message;
  EXPECT_EQ(server.puts(), 4);
}

TEST(SlicePublisherTest, StraysOfThePoolGoAndTheGenerationPassesThem) {
  FakeApiServer server(kToken);
  json stray = BuildResourceSlice(Gpus(), Options(), 5);
  stray["metadata"] = {{"name", "node-a-old"}};
  server.Insert(stray);
  json other_node = BuildResourceSlice(Gpus(), Options("node-b"), 9);
  server.Insert(other_node);
  json other_driver = BuildResourceSlice(Gpus(), Options(), 9);
  other_driver["metadata"]["name"] = "node-a-gpu.example.com";
  other_driver["spec"]["driver"] = "gpu.example.com";
  server.Insert(other_driver);

  KubeClient client(Config(server));
  SlicePublisher publisher(&client, Options());
  PublishOutcome outcome{};
  // The stray is the only slice of our pool: it is kept, updated, renamed
  // nothing; its spec equals ours, so it stays as it is.
  ASSERT_TRUE(publisher.Publish(Gpus(), &outcome).ok());
  EXPECT_EQ(outcome, PublishOutcome::kUnchanged);
  // A second slice of the pool: ours (by name) is kept, the stray deleted.
  json ours = BuildResourceSlice(Gpus(true), Options(), 2);
  server.Insert(ours);
  ASSERT_TRUE(publisher.Publish(Gpus(true), &outcome).ok());
  EXPECT_EQ(outcome, PublishOutcome::kUpdated);
  auto slices = server.Slices();
  EXPECT_EQ(slices.count("node-a-old"), 0u);
  ASSERT_EQ(slices.count("node-a-vgpu.io"), 1u);
  EXPECT_EQ(GenerationOf(slices.at("node-a-vgpu.io")), 6);
  EXPECT_EQ(slices.count("node-b-vgpu.io"), 1u);
  EXPECT_EQ(slices.count("node-a-gpu.example.com"), 1u);
}

TEST(SlicePublisherTest, ASliceDeletedBehindItsBackComesBackAtAHigherGeneration) {
  FakeApiServer server(kToken);
  KubeClient client(Config(server));
  SlicePublisher publisher(&client, Options());
  ASSERT_TRUE(publisher.Publish(Gpus()).ok());
  ASSERT_TRUE(publisher.Publish(Gpus(true)).ok());
  ASSERT_TRUE(server.Remove("node-a-vgpu.io"));
  PublishOutcome outcome{};
  ASSERT_TRUE(publisher.Publish(Gpus(true), &outcome).ok());
  EXPECT_EQ(outcome, PublishOutcome::kCreated);
  EXPECT_EQ(GenerationOf(server.Slices().at("node-a-vgpu.io")), 3);
}

TEST(SlicePublisherTest, RefusesWhatOneSliceCannotHold) {
  FakeApiServer server(kToken);
  KubeClient client(Config(server));
  SlicePublisher nameless(&client, Options(""));
  EXPECT_EQ(nameless.Publish(Gpus()).code, ErrorCode::kInval);
  SlicePublisher publisher(&client, Options());
  std::vector<SliceGpu> many(kMaxDevicesWithTaints + 1);
  EXPECT_EQ(publisher.Publish(many).code, ErrorCode::kInval);
  EXPECT_EQ(server.posts(), 0);
}

TEST(KubeClientTest, AWrongTokenIsAPermissionError) {
  FakeApiServer server(kToken);
  KubeClient client(Config(server, "wrong"));
  int http = 0;
  json out;
  Status st = client.Get("/apis/resource.k8s.io/v1/resourceslices", &out, &http);
  EXPECT_EQ(st.code, ErrorCode::kPerm);
  EXPECT_EQ(http, 401);
  EXPECT_EQ(server.last_authorization(), "Bearer wrong");
  SlicePublisher publisher(&client, Options());
  EXPECT_EQ(publisher.Publish(Gpus()).code, ErrorCode::kPerm);
}

// A projected service account token is rotated: the file is read again
// before every request, and a file that went away is an error.
TEST(KubeClientTest, ATokenFileIsReadBeforeEveryRequest) {
  FakeApiServer server(kToken);
  const std::string file = ::testing::TempDir() + "vgpu-token-" + std::to_string(::getpid());
  std::ofstream(file) << "old-token\n";
  KubeConfig cfg = Config(server, "");
  cfg.token_file = file;
  KubeClient client(cfg);
  json out;
  EXPECT_EQ(client.Get("/apis/resource.k8s.io/v1/resourceslices", &out).code, ErrorCode::kPerm);
  EXPECT_EQ(server.last_authorization(), "Bearer old-token");
  std::ofstream(file, std::ios::trunc) << kToken << "\n";
  EXPECT_TRUE(client.Get("/apis/resource.k8s.io/v1/resourceslices", &out).ok());
  EXPECT_EQ(server.last_authorization(), std::string("Bearer ") + kToken);
  std::remove(file.c_str());
  EXPECT_EQ(client.Get("/apis/resource.k8s.io/v1/resourceslices", &out).code, ErrorCode::kNoEnt);
}

TEST(KubeClientTest, MapsStatusesAndCarriesTheApiMessage) {
  FakeApiServer server(kToken);
  KubeClient client(Config(server));
  int http = 0;
  Status st = client.Delete("/apis/resource.k8s.io/v1/resourceslices/none", nullptr, &http);
  EXPECT_EQ(st.code, ErrorCode::kNoEnt);
  EXPECT_EQ(http, 404);
  st = client.Get("/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.colour%3Dred",
                  nullptr, &http);
  EXPECT_EQ(st.code, ErrorCode::kInval);
  EXPECT_NE(st.message.find("unsupported field selector"), std::string::npos) << st.message;
  json slice = BuildResourceSlice(Gpus(), Options(), 1);
  ASSERT_TRUE(client.Post("/apis/resource.k8s.io/v1/resourceslices", slice, nullptr, &http).ok());
  EXPECT_EQ(http, 201);
  st = client.Post("/apis/resource.k8s.io/v1/resourceslices", slice, nullptr, &http);
  EXPECT_EQ(st.code, ErrorCode::kExist);
  EXPECT_NE(st.message.find("AlreadyExists"), std::string::npos) << st.message;
}

TEST(KubeClientTest, TransportAndBodyErrors) {
  int port = 0;
  {
    FakeApiServer gone(kToken);  // a port nobody listens on once it is gone
    port = std::stoi(gone.url().substr(gone.url().rfind(':') + 1));
  }
  KubeConfig config;
  config.server = "http://127.0.0.1:" + std::to_string(port);
  config.timeout = std::chrono::milliseconds(2000);
  KubeClient refused(config);
  int http = -1;
  Status st = refused.Get("/api", nullptr, &http);
  EXPECT_EQ(st.code, ErrorCode::kIo) << st.message;
  EXPECT_EQ(http, 0);

  config.server = "ftp://example.com";
  EXPECT_EQ(KubeClient(config).Get("/api", nullptr).code, ErrorCode::kInval);

  httplib::Server odd;
  odd.Get("/big", [](const auto&, auto& res) {
    res.set_content(std::string(kMaxResponseBytes + 1, ' '), "application/json");
  });
  odd.Get("/text", [](const auto&, auto& res) { res.set_content("hello", "text/plain"); });
  int odd_port = odd.bind_to_any_port("127.0.0.1");
  std::thread loop([&] { odd.listen_after_bind(); });
  testing::WaitUntilRunning(odd);
  config.server = "http://127.0.0.1:" + std::to_string(odd_port);
  KubeClient client(config);
  EXPECT_EQ(client.Get("/big", nullptr).code, ErrorCode::kTooBig);
  EXPECT_EQ(client.Get("/text", nullptr).code, ErrorCode::kProto);
  odd.stop();
  loop.join();
}

TEST(KubeClientTest, InClusterConfigNeedsThePodEnvironment) {
  unsetenv("KUBERNETES_SERVICE_HOST");
  KubeConfig config;
  EXPECT_EQ(InClusterConfig(&config).code, ErrorCode::kNoEnt);
}

TEST(KubeClientTest, QueryEscapeEncodesSelectorPunctuation) {
  EXPECT_EQ(QueryEscape("spec.nodeName=node-a,spec.driver=vgpu.io"),
            "spec.nodeName%3Dnode-a%2Cspec.driver%3Dvgpu.io");
  EXPECT_EQ(QueryEscape("a b/ü"), "a%20b%2F%C3%BC");
}

}  // namespace
}  // namespace vgpu::k8s
