// A tiny program that links the agent (and, in one test, runs with libvgpu.so
// preloaded): the agent must not exist until Start() is called — no thread,
// no socket — and must be gone again after Stop(). Exit code 0 = all true;
// otherwise a message says what was wrong.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "ctl/control/agent_server.h"
#include "ctl/control/run_dir.h"

namespace {

int Threads() {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

bool AgentThreadExists() {
  DIR* d = opendir("/proc/self/task");
  bool found = false;
  while (dirent* e = readdir(d)) {
    std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string name;
    if (std::getline(comm, name) && name == "vgpu-agent") found = true;
  }
  closedir(d);
  return found;
}

bool SocketExists() {
  std::string path = vgpu::ctl::RunDir() + "/agent-" + std::to_string(getpid()) + ".sock";
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

class Nothing : public vgpu::ctl::Handler {
  vgpu::ctl::Response Handle(const vgpu::ctl::Request&, vgpu::ctl::ProgressSink*) override {
    return vgpu::ctl::Response::Ok();
  }
};

int Fail(const char* what) {
  std::fprintf(stderr, "agent_probe: %s\n", what);
  return 1;
}

}  // namespace

int main() {
  int base = Threads();
  if (AgentThreadExists() || SocketExists()) return Fail("an agent exists before Start()");
  if (base != 1) return Fail("the program has threads before main (something started one)");
  Nothing h;
  vgpu::ctl::Agent agent;
  vgpu::ctl::Status st = agent.Start(&h);
  if (!st.ok()) return Fail(st.message.c_str());
  if (Threads() != base + 1 || !AgentThreadExists()) return Fail("Start() made no agent thread");
  if (!SocketExists()) return Fail("Start() made no socket");
  agent.Stop();
  // A joined thread can linger in /proc/self/task for a moment.
  for (int i = 0; i < 100 && Threads() != base; ++i) usleep(10000);
  if (Threads() != base || SocketExists()) return Fail("Stop() left a thread or the socket");
  std::puts("agent_probe: ok");
  return 0;
}
