// The option table (options.cc) as the loaders see it: each option's public
// OptionInfo plus how its value is written and parsed. Internal to
// vgpu_config; callers use config.h.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/config/value_parsers.h"
#include "common/status.h"

namespace vgpu::config_internal {

using ParseFn = Status (*)(const Input& in, Config* cfg);
// For an alias NAME_<i>: the value for visible device `index`.
using IndexedParseFn = Status (*)(int index, const Input& in, Config* cfg);

// How a value is written: a scalar is one string; a list is comma-separated in
// the environment and a string or an array of strings/integers in JSON.
enum class Kind { kScalar, kList };

struct OptionSpec {
  OptionInfo info;
  Kind kind;
  bool policy;  // setting it makes libvgpu more than a pass-through
  ParseFn parse;
  IndexedParseFn parse_indexed;  // for the alias ending in "_<i>", else null
};

// Every option, each declared once (options.cc).
std::span<const OptionSpec> OptionTable();

// The index of the option whose VGPU_* name is `env`; OptionTable().size() if none.
size_t OptionIndex(const char* env);

// The option's aliases, split; an alias ending in "_<i>" is per visible device.
std::vector<std::string> AliasList(const OptionSpec& spec);
bool IsIndexedAlias(const std::string& alias);

// What a load has set so far, per table entry.
struct LoadState {
  explicit LoadState(Config* c)
      : cfg(c), set(OptionTable().size(), false), origin(OptionTable().size()),
        text(OptionTable().size()) {}
  Config* cfg;
  std::vector<bool> set;
  std::vector<std::string> origin;  // the source of the value in force ("VGPU_GROUP", "file 'x': group")
  std::vector<std::string> text;    // that value as written
};

// Marks table entry `option` set by `in` (its source and text).
void MarkSet(size_t option, const Input& in, LoadState* st);

// Parses `in` as table entry `option` into st->cfg and marks it set.
Status Apply(size_t option, Input in, LoadState* st);

}  // namespace vgpu::config_internal
