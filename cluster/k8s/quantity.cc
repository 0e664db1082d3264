#include "cluster/k8s/quantity.h"

#include <algorithm>
#include <array>
#include <limits>
#include <vector>

namespace vgpu::k8s {
namespace {

// Longer texts are not quantities anyone writes; the bound keeps the digit
// arithmetic below trivially cheap on hostile input.
constexpr size_t kMaxText = 100;
constexpr int kMaxExponentDigits = 4;

// A quantity as digits × 10^pow10 × 2^pow2.
struct Decimal {
  std::vector<uint8_t> digits;  // least significant first
  int pow10 = 0;
  int pow2 = 0;
};

Status Bad(std::string_view text, std::string_view why) {
  return Status::Error(ErrorCode::kInval,
                       "invalid quantity \"" + std::string(text) + "\": " + std::string(why));
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// The suffix after the number: a binary or decimal multiplier, or an exponent.
bool ParseSuffix(std::string_view s, Decimal* d) {
  static constexpr std::array<std::pair<std::string_view, int>, 6> kBinary = {
      {{"Ki", 10}, {"Mi", 20}, {"Gi", 30}, {"Ti", 40}, {"Pi", 50}, {"Ei", 60}}};
  static constexpr std::array<std::pair<std::string_view, int>, 9> kDecimal = {{{"n", -9},
                                                                                {"u", -6},
                                                                                {"m", -3},
                                                                                {"k", 3},
                                                                                {"M", 6},
                                                                                {"G", 9},
                                                                                {"T", 12},
                                                                                {"P", 15},
                                                                                {"E", 18}}};
  if (s.empty()) return true;
  for (const auto& [name, pow] : kBinary) {
    if (s == name) return d->pow2 = pow, true;
  }
  for (const auto& [name, pow] : kDecimal) {
    if (s == name) return d->pow10 += pow, true;
  }
  // "E" alone is exa (above); e/E followed by an integer is an exponent.
  if (s[0] != 'e' && s[0] != 'E') return false;
  s.remove_prefix(1);
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.empty() || s.size() > kMaxExponentDigits) return false;
  int exp = 0;
  for (char c : s) {
    if (!IsDigit(c)) return false;
    exp = exp * 10 + (c - '0');
  }
  d->pow10 += negative ? -exp : exp;
  return true;
}

void Double(std::vector<uint8_t>* digits) {
  int carry = 0;
  for (uint8_t& digit : *digits) {
    int v = digit * 2 + carry;
    digit = static_cast<uint8_t>(v % 10);
    carry = v / 10;
  }
  if (carry) digits->push_back(static_cast<uint8_t>(carry));
}

// ceil(d) as an int64, or false when it does not fit.
bool RoundUp(Decimal d, int64_t* value) {
  while (!d.digits.empty() && d.digits.back() == 0) d.digits.pop_back();
  if (d.digits.empty()) return *value = 0, true;
  for (int i = 0; i < d.pow2; ++i) Double(&d.digits);
  bool fraction = false;
  if (d.pow10 < 0) {
    size_t drop = std::min(d.digits.size(), static_cast<size_t>(-d.pow10));
    fraction = std::any_of(d.digits.begin(), d.digits.begin() + drop, [](uint8_t x) { return x; });
    d.digits.erase(d.digits.begin(), d.digits.begin() + drop);
    d.pow10 = 0;
  }
  // No leading zeros: n digits and p zeros make at least 10^(n+p-1) >= 10^19.
  if (d.digits.size() + d.pow10 > 19) return false;
  unsigned __int128 v = 0;
  for (auto it = d.digits.rbegin(); it != d.digits.rend(); ++it) v = v * 10 + *it;
  for (int i = 0; i < d.pow10; ++i) v *= 10;
  if (fraction) ++v;
  if (v > static_cast<unsigned __int128>(std::numeric_limits<int64_t>::max())) return false;
  *value = static_cast<int64_t>(v);
  return true;
}

}  // namespace

Status ParseQuantity(std::string_view text, int64_t* value) {
  if (text.empty()) return Bad(text, "empty");
  if (text.size() > kMaxText) return Bad(text.substr(0, 32), "too long");
  std::string_view s = text;
  if (s[0] == '-') return Bad(text, "negative");
  if (s[0] == '+') s.remove_prefix(1);
  Decimal d;
  std::string mantissa;
  size_t i = 0;
  for (; i < s.size() && IsDigit(s[i]); ++i) mantissa += s[i];
  if (i < s.size() && s[i] == '.') {
    for (++i; i < s.size() && IsDigit(s[i]); ++i, --d.pow10) mantissa += s[i];
  }
  if (mantissa.empty()) return Bad(text, "no digits");
  for (auto it = mantissa.rbegin(); it != mantissa.rend(); ++it) {
    d.digits.push_back(static_cast<uint8_t>(*it - '0'));
  }
  if (!ParseSuffix(s.substr(i), &d)) return Bad(text, "unknown suffix");
  if (!RoundUp(std::move(d), value)) return Bad(text, "too large");
  return Status::Ok();
}

std::string FormatBytes(int64_t bytes) {
  static constexpr std::array<std::string_view, 6> kSuffix = {"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  if (bytes == 0 || bytes % 1024 != 0) return std::to_string(bytes);
  int64_t v = bytes;
  size_t k = 0;
  while (k < kSuffix.size() && v % 1024 == 0) {
    v /= 1024;
    ++k;
  }
  return std::to_string(v) + std::string(kSuffix[k - 1]);
}

}  // namespace vgpu::k8s
