#include "tests/fuzz/fuzz_regression.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>

namespace vgpu::fuzz {
namespace {

// A path, or the files of a directory (sorted: stable output).
std::vector<std::string> Expand(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return {path};
  std::vector<std::string> out;
  if (DIR* d = opendir(path.c_str())) {
    while (const dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.push_back(path + "/" + e->d_name);
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

bool HasPrefix(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

bool MatchesPattern(const std::string& text, const std::string& pattern) {
  size_t at = 0, from = 0;
  while (true) {
    const size_t star = pattern.find('*', from);
    const std::string piece = pattern.substr(from, star - from);
    at = text.find(piece, at);
    if (at == std::string::npos) return false;
    at += piece.size();
    if (star == std::string::npos) return true;
    from = star + 1;
  }
}

int RunRegression(int argc, char** argv, const CheckFn& check, const FinishFn& finish) {
  int files = 0, failures = 0;
  for (int i = 1; i < argc; ++i) {
    for (const std::string& path : Expand(argv[i])) {
      std::ifstream in(path, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "FAIL %s: cannot read\n", path.c_str());
        ++failures;
        continue;
      }
      const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
      const std::string name = path.substr(path.find_last_of('/') + 1);
      if (const std::string why = check(name, bytes); !why.empty()) {
        std::fprintf(stderr, "FAIL %s: %s\n", path.c_str(), why.c_str());
        ++failures;
      }
      ++files;
    }
  }
  if (const std::string why = finish ? finish() : ""; !why.empty()) {
    std::fprintf(stderr, "FAIL: %s\n", why.c_str());
    ++failures;
  }
  std::printf("%d inputs, %d failed expectations\n", files, failures);
  return failures == 0 && files > 0 ? 0 : 1;
}

std::string CheckLineCounts(const std::string& name, int accepted, int refused) {
  if (HasPrefix(name, "valid-") && (refused > 0 || accepted == 0))
    return std::to_string(refused) + " lines refused";
  if (HasPrefix(name, "bad-") && (accepted > 0 || refused == 0))
    return std::to_string(accepted) + " lines accepted";
  return "";
}

}  // namespace vgpu::fuzz
