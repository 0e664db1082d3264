#!/usr/bin/env bash
# Fuzzes the checkpoint image reader with libFuzzer for a while.
#
#   scripts/fuzz.sh [SECONDS] [extra libFuzzer flags...]     (default 60 s)
#
# Configures a separate clang build (build-fuzz/, -DVGPU_FUZZ=ON), builds only
# the fuzz target and the seed generator, writes seed images, and runs
# image_reader_fuzz on them plus the hand-made damaged images of
# tests/fuzz/corpus. New inputs go to build-fuzz/fuzz-corpus (kept between
# runs); a crash leaves crash-* files in build-fuzz/ and exits non-zero.
# Needs clang and libclang-rt-dev (Debian: clang-14, libclang-rt-14-dev).
# Environment: VGPU_FUZZ_BUILD_DIR (build-fuzz), VGPU_FUZZ_JOBS (2),
# VGPU_FUZZ_CMAKE_ARGS (extra configure arguments).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds=${1:-60}
shift || true
build=${VGPU_FUZZ_BUILD_DIR:-build-fuzz}
jobs=${VGPU_FUZZ_JOBS:-2}

CC=${CC:-clang} CXX=${CXX:-clang++} cmake -S . -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVGPU_FUZZ=ON ${VGPU_FUZZ_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j "$jobs" --target image_reader_fuzz vgpu_ckpt_tool

seeds="$build/fuzz-seeds"
corpus="$build/fuzz-corpus"
mkdir -p "$seeds" "$corpus"
"$build/bin/vgpu_ckpt_tool" make-seeds "$seeds"

cd "$build"
# ASan's allocator limit keeps a pathological input from swapping the machine.
ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1:detect_leaks=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1} \
  ./bin/image_reader_fuzz -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=25 \
  -print_final_stats=1 "$@" fuzz-corpus fuzz-seeds ../tests/fuzz/corpus
