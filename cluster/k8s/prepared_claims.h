// The plugin's checkpoint: the claims it has prepared on this node and what
// it answered for each, so that a prepare repeated after a plugin restart
// gives the same answer without asking the API server again, and an
// unprepare knows what to remove. One JSON file, replaced atomically on every
// change. docs/kubernetes.md, "Checkpoint".
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"

namespace vgpu::k8s {

// One entry of a NodePrepareResources answer.
struct PreparedDevice {
  std::vector<std::string> requests;
  std::string pool, device;
  std::vector<std::string> cdi_ids;
  bool operator==(const PreparedDevice&) const = default;
};

struct PreparedClaim {
  std::string uid, ns, name;
  std::vector<PreparedDevice> devices;
  bool operator==(const PreparedClaim&) const = default;
};

class PreparedClaims {
 public:
  explicit PreparedClaims(std::string path) : path_(std::move(path)) {}

  // Reads the file; a missing one is an empty checkpoint. A corrupt one is
  // renamed aside (<path>.corrupt) and the checkpoint starts empty: the files
  // a claim has are named by its UID, so a repeated prepare rewrites them and
  // an unprepare still finds them. *warning says so.
  Status Load(std::string* warning);

  const PreparedClaim* Find(const std::string& uid) const;
  // Each writes the file before returning; on an error nothing changed.
  Status Put(const PreparedClaim& claim);
  Status Remove(const std::string& uid);
  size_t size() const { return claims_.size(); }

  // The file's text for `claims` and back (tests, fuzzing).
  static std::string Serialize(const std::map<std::string, PreparedClaim>& claims);
  static Status Parse(const std::string& text, std::map<std::string, PreparedClaim>* out);

 private:
  Status Save(const std::map<std::string, PreparedClaim>& claims) const;

  std::string path_;
  std::map<std::string, PreparedClaim> claims_;  // by UID
};

}  // namespace vgpu::k8s
