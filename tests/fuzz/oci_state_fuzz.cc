// Fuzz target for vgpu-oci-hook's parsers (ctl/oci_hook/oci_state.h): the
// container state a runtime writes to the hook's stdin and the bundle's
// config.json, whose annotations and environment come from whoever starts the
// container. The first byte of the input picks the parser (even: state, odd:
// config.json); on a config.json that parses, the VGPU_CONFIG file is built
// too. Self-contradictions fail: an error without a message or with a
// newline, an accepted state without an id or an absolute bundle, an accepted
// config.json whose rootfs is not absolute, a built file that is not a JSON
// object of known keys.
//
// Built without libFuzzer it is a regression runner over oci_corpus/: a file
// named state-valid-* or config-valid-* must be accepted (and build its
// file), state-bad-* or config-bad-* refused.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ctl/oci_hook/oci_state.h"
#include "tests/fuzz/fuzz_regression.h"

namespace oci = vgpu::oci_hook;

namespace {

std::string CheckError(const vgpu::Status& s) {
  if (s.message.empty()) return "refused without a message";
  if (s.message.find('\n') != std::string::npos) return "message of several lines";
  return "";
}

std::string CheckBuiltFile(const std::string& text) {
  static const std::set<std::string> kKeys = {"device_memory_limit", "compute_share", "priority",
                                              "group"};
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return "built file is not a JSON object";
  for (const auto& [key, value] : j.items()) {
    if (kKeys.count(key) == 0 || !value.is_string()) return "built file has key " + key;
  }
  return j.contains("group") ? "" : "built file without a group";
}

// Checks one input; *accepted tells whether the parser took it.
std::string CheckInput(bool config, std::string_view text, bool* accepted) {
  if (!config) {
    oci::ContainerState st;
    vgpu::Status s = oci::ParseState(text, &st);
    *accepted = s.ok();
    if (!s.ok()) return CheckError(s);
    if (st.id.empty() || st.bundle.empty() || st.bundle[0] != '/') return "accepted a bad state";
    return "";
  }
  oci::BundleConfig c;
  vgpu::Status s = oci::ParseBundleConfig(text, "/bundle", &c);
  *accepted = s.ok();
  if (!s.ok()) return CheckError(s);
  if (c.rootfs.empty() || c.rootfs[0] != '/') return "rootfs not absolute";
  std::string file;
  s = oci::BuildContainerConfig("fuzz", c.annotations, c.env, &file);
  *accepted = s.ok();
  return s.ok() ? CheckBuiltFile(file) : CheckError(s);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  bool accepted = false;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (const std::string v = CheckInput((data[0] & 1) != 0, text, &accepted); !v.empty()) {
    std::fprintf(stderr, "%s\n", v.c_str());
    std::abort();
  }
  return 0;
}

#ifndef VGPU_LIBFUZZER

namespace {

using vgpu::fuzz::HasPrefix;

std::string CheckFile(const std::string& name, const std::vector<uint8_t>& bytes) {
  const bool config = HasPrefix(name, "config-");
  if (!config && !HasPrefix(name, "state-")) return "name must start with state- or config-";
  bool accepted = false;
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (std::string v = CheckInput(config, text, &accepted); !v.empty()) return v;
  const std::string kind = name.substr(0, name.find('-') + 1);
  if (HasPrefix(name, kind + "valid-") && !accepted) return "refused";
  if (HasPrefix(name, kind + "bad-") && accepted) return "accepted";
  return "";
}

}  // namespace

int main(int argc, char** argv) { return vgpu::fuzz::RunRegression(argc, argv, CheckFile); }

#endif  // VGPU_LIBFUZZER
