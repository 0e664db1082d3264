// The regression runner shared by the fuzz targets of tests/fuzz. Built
// without libFuzzer, each target's main() hands its inputs (files, or every
// file of a directory) to RunRegression, which prints one line per failed
// expectation and a summary, and returns the exit status.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace vgpu::fuzz {

// Checks one input; returns "" if it met the expectation its file name
// carries, else why not (e.g. "accepted", or the unexpected error).
using CheckFn = std::function<std::string(const std::string& name, const std::vector<uint8_t>&)>;

// After all inputs: "" or what is missing (e.g. a seed that was expected).
using FinishFn = std::function<std::string()>;

int RunRegression(int argc, char** argv, const CheckFn& check, const FinishFn& finish = nullptr);

bool HasPrefix(const std::string& s, const std::string& prefix);

// The corpus naming rule of the line-based targets: in a file named valid-*
// every line must be accepted, in bad-* every line refused; "" if it holds.
std::string CheckLineCounts(const std::string& name, int accepted, int refused);

// Whether `text` contains the pieces of `pattern` separated by '*', in order
// ("frame * holds" matches "frame 1 of record 3 holds").
bool MatchesPattern(const std::string& text, const std::string& pattern);

}  // namespace vgpu::fuzz
