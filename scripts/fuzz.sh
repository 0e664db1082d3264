#!/usr/bin/env bash
# Runs every libFuzzer target of tests/fuzz for a while, one after the other.
#
#   scripts/fuzz.sh [SECONDS] [extra libFuzzer flags...]   (default 60 s per target)
#
# Configures a separate clang build (build-fuzz/, -DVGPU_FUZZ=ON: everything
# compiled with libFuzzer coverage, ASan and UBSan), builds only the fuzz
# targets (and the seed makers if no default build has them), writes the
# seeds, and fuzzes each target from its seeds (docs/testing.md). New inputs go to
# build-fuzz/fuzz-corpus/<target> (kept between runs); a crash, a sanitizer
# report (UBSan halts on the first) or a timeout leaves
# build-fuzz/fuzz-artifacts/<target>-crash-* and the log in
# build-fuzz/fuzz-logs/<target>.log. Prints one summary line per target and
# exits non-zero if any target failed.
#
# Needs clang and libclang-rt-dev (Debian: clang-14, libclang-rt-14-dev), and
# nvcc for the module fixtures unless a default build made them
# (build/tests/unit/module_fixtures, or VGPU_FUZZ_MODULE_FIXTURES).
# Environment: VGPU_FUZZ_BUILD_DIR (build-fuzz), VGPU_FUZZ_JOBS (2),
# VGPU_FUZZ_CMAKE_ARGS (extra configure arguments), VGPU_FUZZ_TARGETS (all).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds=${1:-60}
shift || true
build=${VGPU_FUZZ_BUILD_DIR:-build-fuzz}
jobs=${VGPU_FUZZ_JOBS:-2}
read -r -a targets <<<"${VGPU_FUZZ_TARGETS:-image_reader_fuzz module_image_fuzz ctl_protocol_fuzz vgpud_request_fuzz oci_state_fuzz k8s_claim_fuzz slurm_job_fuzz}"

# Seed makers need no instrumentation: those of a default build (build/,
# which CI makes first) are used when present, saving a minute of compiling.
build_targets=("${targets[@]}")
tool=build/bin/vgpu_ckpt_tool
if [[ ! -x $tool ]]; then
  tool=$build/bin/vgpu_ckpt_tool
  build_targets+=(vgpu_ckpt_tool)
fi
fixtures=${VGPU_FUZZ_MODULE_FIXTURES:-build/tests/unit/module_fixtures}
if [[ ! -d $fixtures ]]; then
  fixtures=$build/tests/unit/module_fixtures
  build_targets+=(sim_module_fixtures)
fi

# -O1 and line tables only (as OSS-Fuzz builds): compiles in about half the
# time of -O2 -g, and assertions stay on.
CC=${CC:-clang} CXX=${CXX:-clang++} cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=None \
  -DCMAKE_C_FLAGS="-O1 -gline-tables-only" -DCMAKE_CXX_FLAGS="-O1 -gline-tables-only" \
  -DVGPU_FUZZ=ON ${VGPU_FUZZ_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j "$jobs" --target "${build_targets[@]}"

mkdir -p "$build/fuzz-seeds" "$build/fuzz-artifacts" "$build/fuzz-logs"
"$tool" make-seeds "$build/fuzz-seeds/image_reader_fuzz"

# The seed directories of a target (read only; new inputs go elsewhere).
seeds_of() {
  case $1 in
    image_reader_fuzz) echo "$build/fuzz-seeds/image_reader_fuzz tests/fuzz/corpus" ;;
    module_image_fuzz) echo "$fixtures tests/fuzz/module_corpus" ;;
    ctl_protocol_fuzz) echo "tests/fuzz/ctl_corpus" ;;
    vgpud_request_fuzz) echo "tests/fuzz/vgpud_corpus" ;;
    oci_state_fuzz) echo "tests/fuzz/oci_corpus" ;;
    k8s_claim_fuzz) echo "tests/fuzz/k8s_corpus" ;;
    slurm_job_fuzz) echo "tests/fuzz/slurm_corpus" ;;
    *) echo "fuzz.sh: no seeds for $1" >&2; return 1 ;;
  esac
}

# One line from libFuzzer's log: runs, coverage, features, corpus size.
summary() {
  local log=$1 runs cov
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -1 |
        sed -E 's/.*cov: ([0-9]+) ft: ([0-9]+) corp: ([0-9]+)\/([^ ]+).*/cov \1, ft \2, corpus \3 (\4)/')
  echo "${runs:-?} runs, $cov"
}

failed=0
for t in "${targets[@]}"; do
  corpus=$build/fuzz-corpus/$t
  log=$build/fuzz-logs/$t.log
  mkdir -p "$corpus"
  read -r -a seeds <<<"$(seeds_of "$t")"
  # ASan's allocator limit keeps a pathological input from swapping the machine.
  if ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1:detect_leaks=1} \
     UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1} \
     "$build/bin/$t" -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=25 \
       -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/$t-" "$@" \
       "$corpus" "${seeds[@]}" >"$log" 2>&1; then
    echo "fuzz $t: ok, $(summary "$log")"
  else
    failed=1
    echo "fuzz $t: FAILED, $(summary "$log"); log $log:"
    grep -E 'ERROR|SUMMARY|runtime error|HARNESS|Test unit written' "$log" | head -5 | sed 's/^/  /'
  fi
done
exit $failed
