#include "common/config/config_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <nlohmann/json.hpp>
#include <set>

namespace vgpu::config_internal {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxConfigFileBytes = 1 << 20;

// A file as messages name it: "VGPU_CONFIG file '/x.json'", "admin file '...'".
struct FileName {
  const char* kind;
  std::string path;  // Printable
  std::string Source() const { return std::string(kind) + " '" + path + "'"; }
  // For failures to open or read: the user's file as the variable that named it.
  std::string Named() const {
    return std::strcmp(kind, kUserFileKind) == 0 ? "VGPU_CONFIG='" + path + "'" : Source();
  }
};

// Opens `path` only if it is a regular file. O_NONBLOCK keeps the open of a
// FIFO (which would wait for a writer for ever, inside cuInit) from blocking;
// the type is checked on the opened descriptor, so a swap after a stat cannot
// slip a FIFO or a device in.
Result<FILE*> OpenRegularFile(const std::string& path, const FileName& name) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    const ErrorCode code = errno == ENOENT ? ErrorCode::kNoEnt : ErrorCode::kIo;
    return Status::Error(code, name.Named() + " cannot be read: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::Error(ErrorCode::kInval, name.Named() + " is not a regular file");
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  FILE* f = ::fdopen(fd, "r");
  if (f == nullptr) {
    Status s =
        Status::Error(ErrorCode::kIo, name.Named() + " cannot be read: " + std::strerror(errno));
    ::close(fd);
    return s;
  }
  return f;
}

Status ReadFile(const std::string& path, const FileName& name, std::string* text) {
  Result<FILE*> opened = OpenRegularFile(path, name);
  if (!opened.ok()) return opened.status();
  FILE* f = opened.value();
  char buf[4096];
  size_t n = 0;
  errno = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 && text->size() <= kMaxConfigFileBytes) {
    text->append(buf, n);
  }
  int read_errno = std::ferror(f) != 0 ? (errno != 0 ? errno : EIO) : 0;
  std::fclose(f);
  if (read_errno != 0) {
    return Status::Error(ErrorCode::kIo,
                         name.Named() + " cannot be read: " + std::strerror(read_errno));
  }
  if (text->size() > kMaxConfigFileBytes) {
    return Status::Error(ErrorCode::kTooBig, name.Source() + " is larger than 1 MiB");
  }
  return Status::Ok();
}

// Parses `text` as one JSON object whose keys appear once each.
Status ParseJsonObject(const FileName& name, const std::string& text, Json* out) {
  std::string duplicate;
  auto callback = [&duplicate, seen = std::set<std::string>()](int depth, Json::parse_event_t event,
                                                               Json& parsed) mutable {
    if (event == Json::parse_event_t::key && depth == 1 && parsed.is_string() &&
        !seen.insert(parsed.get<std::string>()).second && duplicate.empty()) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  try {
    *out = Json::parse(text, callback);
  } catch (const std::exception& e) {
    return Status::Error(ErrorCode::kInval,
                         name.Source() + " is not valid JSON: " + Printable(e.what(), 400));
  }
  if (!out->is_object()) {
    return Status::Error(ErrorCode::kInval,
                         name.Source() + " must hold a JSON object, e.g. {\"group\": \"job42\"}");
  }
  if (!duplicate.empty()) {
    return Status::Error(ErrorCode::kInval,
                         name.Source() + " has key '" + Printable(duplicate) + "' twice");
  }
  return Status::Ok();
}

std::string JsonKeyList() {
  std::string out;
  for (const auto& spec : OptionTable()) {
    if (spec.info.json_key[0] == '\0') continue;
    out += (out.empty() ? "" : ", ") + std::string(spec.info.json_key);
  }
  return out;
}

int OptionForJsonKey(const std::string& key) {
  const auto table = OptionTable();
  for (size_t i = 0; i < table.size(); ++i) {
    if (table[i].info.json_key[0] != '\0' && key == table[i].info.json_key) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

// One element of a JSON list value: a string or a non-negative integer.
bool JsonItem(const Json& v, std::string* out) {
  if (v.is_string()) {
    *out = v.get<std::string>();
    return true;
  }
  if (v.is_number_unsigned()) {
    *out = std::to_string(v.get<uint64_t>());
    return true;
  }
  return false;
}

bool JsonListInput(const Json& v, Input* in) {
  std::string item;
  if (!v.is_array()) {
    if (!JsonItem(v, &in->text)) return false;
    in->items = SplitList(in->text);
    return true;
  }
  for (const auto& element : v) {
    if (!JsonItem(element, &item)) return false;
    in->text += (in->items.empty() ? "" : ",") + item;
    in->items.push_back(Trim(item));
  }
  return true;
}

// The JSON value of an option as parser input; false if its type is wrong.
bool JsonInput(const OptionSpec& spec, const Json& v, Input* in) {
  if (spec.kind == Kind::kList) return JsonListInput(v, in);
  if (!v.is_string()) return false;
  in->text = v.get<std::string>();
  return true;
}

std::string JsonTypeExpected(Kind kind) {
  return kind == Kind::kList ? "a string or an array of strings and non-negative integers"
                             : "a string";
}

Status ApplyJsonKey(const FileName& name, const std::string& key, const Json& value,
                    LoadState* st) {
  int option = OptionForJsonKey(key);
  std::string source = name.Source();
  if (option < 0) {
    return Status::Error(ErrorCode::kInval, source + " has unknown key '" + Printable(key) +
                                                "': expected " + JsonKeyList());
  }
  const OptionSpec& spec = OptionTable()[option];
  Input in{source + ": " + key, "", {}};
  if (!JsonInput(spec, value, &in)) {
    return Status::Error(ErrorCode::kInval, source + ": " + key + " is " + value.type_name() +
                                                ": expected " + JsonTypeExpected(spec.kind));
  }
  return Apply(static_cast<size_t>(option), std::move(in), st);
}

}  // namespace

Status ApplyJsonFile(const std::string& path, LoadState* st, const char* kind) {
  const FileName name{kind, Printable(path)};
  std::string text;
  Json root;
  if (Status s = ReadFile(path, name, &text); !s.ok()) return s;
  if (Status s = ParseJsonObject(name, text, &root); !s.ok()) return s;
  for (const auto& [key, value] : root.items()) {
    if (Status s = ApplyJsonKey(name, key, value, st); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace vgpu::config_internal
