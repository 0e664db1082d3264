// A checkpoint image taken apart into header, frame bytes, tables and trailer,
// and put back together with the format's own encoders (image_format.h).
//
// vgpu_ckpt_tool make-seeds uses it to damage a writer-made image in exactly
// one way while every other checksum, offset and count stays right, so that
// a fuzz seed reaches one integrity check of the reader and no other. Going
// through the encoders (not byte offsets) keeps those seeds correct when the
// format changes.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "checkpoint/image_format.h"

namespace vgpu::checkpoint {

struct ImageParts {
  Header header;
  std::vector<std::vector<uint8_t>> frame_data;  // stored bytes, one per frame
  std::vector<RecordEntry> records;
  std::vector<FrameEntry> frames;
  Trailer trailer;
  // Bytes between the last frame and the record table, and between the frame
  // table and the trailer (a valid image has none).
  std::vector<uint8_t> after_frames;
  std::vector<uint8_t> after_tables;
  // Applied to the encoded header before the digest is computed.
  std::function<void(std::vector<uint8_t>*)> patch_header;
  // Applied to the whole image after the digest is computed.
  std::function<void(std::vector<uint8_t>*)> patch_image;
  bool keep_digest = false;  // write trailer.digest as is, not the computed one
};

// Splits an intact image; false if it does not decode.
bool SplitImage(std::span<const uint8_t> image, ImageParts* out);

// Recomputes what follows from the parts as a writer would: header_bytes from
// the strings (SetHeaderBytes), then (Relayout) frame offsets, stored sizes
// and checksums from frame_data, each record's first frame and data offset
// from the frame counts, and the trailer's offsets, counts and data_bytes.
void SetHeaderBytes(ImageParts* p);
void Relayout(ImageParts* p);
inline void Normalize(ImageParts* p) {
  SetHeaderBytes(p);
  Relayout(p);
}

// Encodes the parts as they are; the header is cut or zero-padded to
// header.header_bytes and the digest computed over what the reader hashes
// (unless keep_digest).
std::vector<uint8_t> JoinImage(const ImageParts& p);

}  // namespace vgpu::checkpoint
