#!/usr/bin/env bash
# Builds and runs tests under the sanitizers, as CI does after the default suite.
#
#   scripts/sanitize.sh asan    ASan+UBSan (preset asan): the unit, conformance and ctl tests
#   scripts/sanitize.sh tsan    TSan (preset tsan): the concurrent parts (quota ledger,
#                               quiesce gate, scheduler region, socket server and agent,
#                               migration watchdog; TSAN_TESTS below)
#   scripts/sanitize.sh all     both
#
# Any sanitizer report fails the run: ASan aborts, UBSan is built without
# recovery (cmake/sanitizers.cmake), TSan exits non-zero after a report.
# Extra arguments go to ctest (e.g. -R Ledger).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The lock-free and threaded components and the executables holding their
# tests: TSan builds only these.
TSAN_TARGETS=(quota_ledger_test quiesce_gate_test sched_region_test ctl_agent_test ctl_socket_server_test
              migration_test)
TSAN_TESTS='^(QuotaLedger|QuiesceGate|SchedRegion|SchedGroupSlot|AgentTest|SocketServerTest|MigrationTest)'

asan() {
  echo "== sanitize: asan (ctest -L 'unit|conformance|ctl')"
  cmake --preset asan >/dev/null
  cmake --build --preset asan
  ctest --preset asan -L 'unit|conformance|ctl' "$@"
}

tsan() {
  echo "== sanitize: tsan (ctest -R '${TSAN_TESTS}')"
  cmake --preset tsan >/dev/null
  cmake --build --preset tsan --target "${TSAN_TARGETS[@]}"
  ctest --preset tsan -R "${TSAN_TESTS}" "$@"
}

mode=${1:-all}
shift || true
case "${mode}" in
  asan) asan "$@" ;;
  tsan) tsan "$@" ;;
  all)
    asan "$@"
    tsan "$@"
    ;;
  *)
    echo "usage: scripts/sanitize.sh asan|tsan|all [ctest arguments]" >&2
    exit 2
    ;;
esac
