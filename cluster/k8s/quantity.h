// Kubernetes resource.Quantity ("8Gi", "1.5G", "250m", "1e3"), as far as the
// DRA driver needs it: byte sizes and percentages that arrive in
// ResourceClaims and leave in ResourceSlices. Values are integers here; a
// fractional quantity rounds up, as the scheduler's capacity arithmetic does
// (a claim for "0.5" of something consumes at least 1).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace vgpu::k8s {

// Parses `text` (<number><suffix>: binary Ki Mi Gi Ti Pi Ei, decimal n u m k M
// G T P E, or an exponent e<int>/E<int>) into `*value`, rounded up to an
// integer. Exact: no floating point on the way. Errors (kInval) on an empty or
// malformed text, a negative value, and a value above INT64_MAX; `*value` is
// left alone on error.
Status ParseQuantity(std::string_view text, int64_t* value);

// The canonical text of a byte count: the largest binary suffix that divides
// it ("8Gi", "512Mi", "1Ki"), else the plain integer ("1000", "0"). The API
// server re-canonicalises a plain integer that is a multiple of 1000 into a
// decimal suffix ("2000" comes back as "2k"); writers that compare echoes
// should publish multiples of 1Ki.
std::string FormatBytes(int64_t bytes);

}  // namespace vgpu::k8s
