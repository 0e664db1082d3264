#include "sim/modules/ptx_reader.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

namespace vgpu::sim {
namespace {

enum class Tok : uint8_t { kWord, kNumber, kString, kPunct };

struct Token {
  Tok kind;
  std::string_view text;
};

bool IsWordStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '%' ||
         c == '.';
}
bool IsWordChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.';
}

// Splits PTX into words (".entry", "ld.global.u32", "grad_param_0"), numbers,
// strings and single punctuation characters, dropping comments.
std::vector<Token> Tokenize(std::string_view s) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (s.substr(i, 2) == "//") {
      i = std::min(s.size(), s.find('\n', i));
    } else if (s.substr(i, 2) == "/*") {
      const size_t end = s.find("*/", i + 2);
      i = end == std::string_view::npos ? s.size() : end + 2;
    } else if (c == '"') {
      const size_t end = s.find('"', i + 1);
      const size_t stop = end == std::string_view::npos ? s.size() : end + 1;
      out.push_back({Tok::kString, s.substr(i, stop - i)});
      i = stop;
    } else if (IsWordStart(c) || std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i + 1;
      while (j < s.size() && IsWordChar(s[j])) ++j;
      out.push_back({IsWordStart(c) ? Tok::kWord : Tok::kNumber, s.substr(i, j - i)});
      i = j;
    } else {
      out.push_back({Tok::kPunct, s.substr(i, 1)});
      ++i;
    }
  }
  return out;
}

// Size in bytes of a PTX fundamental type, 0 if `t` is not one.
uint32_t TypeSize(std::string_view t) {
  static constexpr struct {
    std::string_view name;
    uint32_t size;
  } kTypes[] = {{".b8", 1},  {".u8", 1},  {".s8", 1},    {".b16", 2},    {".u16", 2},
                {".s16", 2}, {".f16", 2}, {".bf16", 2},  {".b32", 4},    {".u32", 4},
                {".s32", 4}, {".f32", 4}, {".f16x2", 4}, {".bf16x2", 4}, {".b64", 8},
                {".u64", 8}, {".s64", 8}, {".f64", 8},   {".b128", 16},  {".pred", 1}};
  for (const auto& e : kTypes) {
    if (e.name == t) return e.size;
  }
  return 0;
}

bool ParseUint(std::string_view text, uint64_t* out) {
  std::string s(text);
  char* end = nullptr;
  errno = 0;
  *out = std::strtoull(s.c_str(), &end, 0);
  return !s.empty() && errno == 0 && *end == '\0';
}

uint64_t AlignUp(uint64_t v, uint64_t a) { return a <= 1 ? v : (v + a - 1) / a * a; }

// CUDA's limit on a kernel's parameter bytes (12.1 and later, sm_70 and up);
// ptxas refuses more. Enforced here because the launch path copies arguments
// at the parameter offsets into a buffer of param_bytes: a larger layout could
// wrap LayOutParams' 32-bit offsets and put an argument outside that buffer.
constexpr uint64_t kMaxParamBytes = 32764;

// A declaration such as ".global .align 4 .b8 name[16] = {...}" or
// ".param .align 8 .b8 p[16]": element type, alignment, name, element count.
struct Decl {
  uint32_t elem_size = 0;  // including a .v2/.v4 vector factor
  uint32_t align = 0;      // explicit .align, 0 if none
  std::string_view type;
  std::string_view name;
  uint64_t count = 1;
  bool unsized = false;  // "name[]": count comes from the initializer
  uint64_t bytes() const { return elem_size * count; }
  uint32_t alignment() const { return align ? align : elem_size; }
};

class PtxParser {
 public:
  PtxParser(std::vector<Token> toks, std::string* error) : t_(std::move(toks)), error_(error) {}

  CUresult Parse(ModuleImage* out) {
    out->format = ImageFormat::kPtx;
    int depth = 0;
    while (i_ < t_.size()) {
      const std::string_view w = t_[i_].text;
      if (w == "{") {
        ++depth, ++i_;
      } else if (w == "}") {
        --depth, ++i_;
      } else if (depth > 0) {
        ++i_;
      } else if (w == ".version") {
        if (!ParseVersion()) return CUDA_ERROR_INVALID_PTX;
      } else if (w == ".target") {
        ParseTarget(out);
      } else if (w == ".entry") {
        if (!ParseEntry(out)) return CUDA_ERROR_INVALID_PTX;
      } else if (w == ".func") {
        SkipFunction();
      } else if ((w == ".global" || w == ".const") && Prev() != ".extern") {
        if (!ParseVariable(out, w == ".const")) return CUDA_ERROR_INVALID_PTX;
      } else {
        ++i_;
      }
    }
    if (version_ < 0 || out->arch == 0) {
      *error_ = "invalid PTX: missing .version or .target directive";
      return CUDA_ERROR_INVALID_PTX;
    }
    if (version_ > kMaxPtxIsaVersion) {
      *error_ = "PTX ISA version " + std::to_string(version_ / 10) + "." +
                std::to_string(version_ % 10) + " is newer than this driver supports (9.0)";
      return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
    }
    return CUDA_SUCCESS;
  }

 private:
  bool Fail(const std::string& what) {
    *error_ = "invalid PTX: " + what;
    return false;
  }
  std::string_view Peek(size_t ahead = 0) const {
    return i_ + ahead < t_.size() ? t_[i_ + ahead].text : std::string_view();
  }
  std::string_view Prev() const { return i_ > 0 ? t_[i_ - 1].text : std::string_view(); }
  bool Accept(std::string_view w) {
    if (Peek() != w) return false;
    ++i_;
    return true;
  }
  bool ReadUint(uint64_t* v) {
    if (i_ >= t_.size() || t_[i_].kind != Tok::kNumber || !ParseUint(t_[i_].text, v)) return false;
    ++i_;
    return true;
  }

  bool ParseVersion() {
    ++i_;
    const std::string_view v = Peek();
    const size_t dot = v.find('.');
    uint64_t major = 0, minor = 0;
    if (dot == std::string_view::npos || !ParseUint(v.substr(0, dot), &major) ||
        !ParseUint(v.substr(dot + 1), &minor) || minor > 9) {
      return Fail("bad .version");
    }
    version_ = static_cast<int>(major * 10 + minor);
    ++i_;
    return true;
  }

  void ParseTarget(ModuleImage* out) {
    ++i_;
    const std::string_view v = Peek();
    if (v.substr(0, 3) == "sm_") out->arch = std::atoi(std::string(v.substr(3)).c_str());
  }

  // Attributes, type and name of a declaration starting at the current token
  // (after .param/.global/.const/.shared/.local), then its dimensions.
  bool ParseDecl(Decl* d) {
    bool pointer_attrs = false;  // after .ptr, .align describes the pointee
    uint32_t vector = 1;
    while (i_ < t_.size() && t_[i_].kind == Tok::kWord && t_[i_].text[0] == '.') {
      const std::string_view w = t_[i_++].text;
      uint64_t n = 0;
      if (w == ".align") {
        if (!ReadUint(&n) || n == 0 || (n & (n - 1))) return Fail("bad .align");
        if (!pointer_attrs && d->elem_size == 0) d->align = static_cast<uint32_t>(n);
      } else if (w == ".ptr") {
        pointer_attrs = true;
      } else if (w == ".v2" || w == ".v4" || w == ".v8") {
        vector = static_cast<uint32_t>(w[2] - '0');
      } else if (w == ".attribute" && Accept("(")) {
        while (i_ < t_.size() && !Accept(")")) ++i_;
      } else if (uint32_t size = TypeSize(w); size && d->elem_size == 0) {
        d->elem_size = size * vector;
        d->type = w;
      }
    }
    if (d->elem_size == 0 || i_ >= t_.size() || t_[i_].kind != Tok::kWord) {
      return Fail("declaration without a type or name");
    }
    d->name = t_[i_++].text;
    while (Accept("[")) {
      uint64_t n = 0;
      if (Accept("]")) {
        d->unsized = true;
        continue;
      }
      if (!ReadUint(&n) || !Accept("]")) return Fail("bad array size of " + std::string(d->name));
      d->count *= n;
    }
    return true;
  }

  bool ParseEntry(ModuleImage* out) {
    ++i_;
    if (i_ >= t_.size() || t_[i_].kind != Tok::kWord) return Fail(".entry without a name");
    KernelInfo k;
    k.name = std::string(t_[i_++].text);
    std::vector<uint32_t> aligns;
    uint64_t end = 0;
    if (Accept("(") && !Accept(")")) {
      do {
        Decl d;
        if (!Accept(".param") || !ParseDecl(&d)) return Fail("bad parameter of " + k.name);
        // Bounding the count first keeps the sum from overflowing.
        if (d.count > kMaxParamBytes ||
            (end = AlignUp(end, d.alignment()) + d.bytes()) > kMaxParamBytes) {
          return Fail("parameters of " + k.name + " exceed " + std::to_string(kMaxParamBytes) +
                      " bytes");
        }
        k.param_sizes.push_back(static_cast<uint32_t>(d.bytes()));
        aligns.push_back(d.alignment());
      } while (Accept(","));
      if (!Accept(")")) return Fail("unterminated parameter list of " + k.name);
    }
    LayOutParams(aligns, &k);
    ParsePerformanceDirectives(&k);
    if (Accept("{")) ParseBody(&k);
    out->kernels.push_back(std::move(k));
    return true;
  }

  // .maxntid / .reqntid / .reqnctapercluster between the parameters and body.
  void ParsePerformanceDirectives(KernelInfo* k) {
    while (i_ < t_.size() && Peek() != "{" && Peek() != ";") {
      const std::string_view w = t_[i_++].text;
      uint64_t dims[3] = {1, 1, 1};
      int n = 0;
      while (n < 3 && ReadUint(&dims[n])) {
        ++n;
        if (!Accept(",")) break;
      }
      if (w == ".maxntid" || w == ".reqntid") {
        k->launch_bound_threads = static_cast<uint32_t>(dims[0] * dims[1] * dims[2]);
      } else if (w == ".reqnctapercluster") {
        for (int d = 0; d < 3; ++d) k->required_cluster[d] = static_cast<uint32_t>(dims[d]);
      }
    }
  }

  // Sums the kernel's static .shared and .local declarations; consumes the
  // body through its closing brace.
  void ParseBody(KernelInfo* k) {
    uint64_t shared = 0, local = 0;
    for (int depth = 1; i_ < t_.size() && depth > 0;) {
      const std::string_view w = t_[i_].text;
      const bool is_extern = Prev() == ".extern";
      ++i_;
      if (w == "{") ++depth;
      if (w == "}") --depth;
      if ((w == ".shared" || w == ".local") && !is_extern) {
        Decl d;
        if (!ParseDecl(&d)) continue;  // not a declaration we understand
        uint64_t& total = w == ".shared" ? shared : local;
        total = AlignUp(total, d.alignment()) + d.bytes();
      }
    }
    error_->clear();
    k->static_shared_bytes = static_cast<uint32_t>(shared);
    k->local_bytes = static_cast<uint32_t>(local);
  }

  // Skips a .func declaration or definition (its parameter lists included).
  void SkipFunction() {
    int parens = 0;
    for (; i_ < t_.size(); ++i_) {
      const std::string_view w = t_[i_].text;
      if (w == "(") ++parens;
      if (w == ")") --parens;
      if (parens == 0 && (w == ";" || w == "{")) break;
    }
    if (i_ < t_.size() && t_[i_].text == ";") ++i_;
    // On "{", the main loop tracks the body's depth.
  }

  bool ParseVariable(ModuleImage* out, bool is_const) {
    ++i_;
    Decl d;
    const size_t start = i_;
    if (!ParseDecl(&d)) {
      // Texture/surface/sampler references have no storage: skip them.
      i_ = start;
      while (i_ < t_.size() && !Accept(";")) ++i_;
      error_->clear();
      return true;
    }
    GlobalInfo g;
    g.name = std::string(d.name);
    g.is_constant = is_const;
    g.align = d.alignment();
    if (Accept("=") && !ParseInitializer(d, &g.init)) return false;
    if (d.unsized) d.count = g.init.size() / d.elem_size;
    g.size = d.bytes();
    if (!Accept(";")) return Fail("expected ';' after " + g.name);
    if (g.size == 0) return Fail("variable " + g.name + " has no size");
    out->globals.push_back(std::move(g));
    return true;
  }

  // Writes the initializer's elements little endian. Addresses of other
  // variables (generic(x), x) cannot be known here and read as 0.
  bool ParseInitializer(const Decl& d, std::vector<uint8_t>* init) {
    const bool is_float = d.type[1] == 'f';
    const uint32_t size = is_float ? d.elem_size : std::min<uint32_t>(d.elem_size, 8);
    bool negative = false;
    while (i_ < t_.size() && Peek() != ";") {
      const Token& tok = t_[i_++];
      if (tok.text == "-") {
        negative = true;
        continue;
      }
      if (tok.kind == Tok::kWord && Accept("(")) {
        while (i_ < t_.size() && !Accept(")")) ++i_;
      }
      if (tok.kind != Tok::kNumber && tok.kind != Tok::kWord) continue;
      uint64_t bits = 0;
      if (tok.kind == Tok::kNumber && !ElementBits(tok.text, is_float, size, negative, &bits)) {
        return Fail("bad initializer of " + std::string(d.name));
      }
      negative = false;
      const size_t at = init->size();
      init->resize(at + d.elem_size);
      memcpy(init->data() + at, &bits, std::min<uint32_t>(size, sizeof bits));
    }
    return true;
  }

  static bool ElementBits(std::string_view text, bool is_float, uint32_t size, bool negative,
                          uint64_t* bits) {
    const bool hex_float = text.size() > 2 && text[0] == '0' && (text[1] == 'f' || text[1] == 'd');
    if (hex_float) {
      *bits = std::strtoull(std::string(text.substr(2)).c_str(), nullptr, 16);
      if (negative) *bits |= text[1] == 'f' ? (1ull << 31) : (1ull << 63);
      return true;
    }
    if (is_float && text.find_first_of(".eE") != std::string_view::npos) {
      const double v = (negative ? -1 : 1) * std::strtod(std::string(text).c_str(), nullptr);
      if (size == 4) {
        const float f = static_cast<float>(v);
        uint32_t u;
        memcpy(&u, &f, 4);
        *bits = u;
      } else {
        memcpy(bits, &v, 8);
      }
      return true;
    }
    uint64_t v = 0;
    if (!ParseUint(text, &v)) return false;
    if (is_float) {  // an integer literal for a float element: its value
      return ElementBits(std::to_string(v) + ".0", true, size, negative, bits);
    }
    *bits = negative ? ~v + 1 : v;
    return true;
  }

  std::vector<Token> t_;
  std::string* error_;
  size_t i_ = 0;
  int version_ = -1;
};

}  // namespace

bool LooksLikePtx(const void* data, size_t size) {
  const auto* p = static_cast<const char*>(data);
  size_t i = 0;
  while (i < size && std::isspace(static_cast<unsigned char>(p[i]))) ++i;
  if (i >= size) return false;
  return p[i] == '.' || (i + 1 < size && p[i] == '/' && (p[i + 1] == '/' || p[i + 1] == '*'));
}

CUresult ReadPtx(const char* text, size_t size, ModuleImage* out, std::string* error) {
  const size_t len = text != nullptr ? strnlen(text, size) : 0;  // strnlen's argument is nonnull
  *out = ModuleImage{};
  error->clear();
  return PtxParser(Tokenize(std::string_view(text, len)), error).Parse(out);
}

}  // namespace vgpu::sim
