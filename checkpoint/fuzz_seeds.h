// The fuzz seed corpus of the checkpoint image reader, written by
// `vgpu_ckpt_tool make-seeds DIR`:
//
//   valid-*.img            images the writer made; each must open and verify.
//   bad-only-<check>*.img  one of them damaged so that exactly one integrity
//                          check of the reader refuses it: every other
//                          checksum, offset, count and the digest are
//                          recomputed. tests/fuzz/image_reader_fuzz.cc knows
//                          which message each <check> must produce, so that
//                          disabling that check fails the fuzz regression.
//
// docs/checkpoint-format.md ("Which input guards which check") lists them.
#pragma once

#include <string>

namespace vgpu::checkpoint {

// Creates `dir` if needed and writes the seeds into it; false (after a
// message on stderr) if anything fails, including a base image that no
// longer has the frames the damaged seeds rely on.
bool WriteFuzzSeeds(const std::string& dir);

}  // namespace vgpu::checkpoint
