#!/usr/bin/env bash
# Breaks each of vgpud's decision rules (ctl/vgpud/policy.cc) on purpose, one
# at a time, and checks that tests/vgpud/policy_test.cc then fails: a rule
# whose test still passes when it is broken is not tested. By hand, not in
# CTest (it compiles the policy once per mutant, about a minute in all):
#   tests/vgpud/policy_mutants.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# name @ text of policy.cc @ what it becomes (\n: a newline)
mutants=$(cat <<'LIST'
a higher priority may be a victim@if (j.priority > priority || Pinned(j, now)) continue;@if (Pinned(j, now)) continue;
victims not ordered by priority@    if (a->priority != b->priority) return a->priority < b->priority;\n    return a->running_since@    return a->running_since
quantum without the weight@rules.quantum * j.weight@rules.quantum
equal priority without a quantum@if (j.priority == priority && now@if (false && now
no back-off after a refusal@return now < j.refused_until || @return 
a non-preemptible job may give way@ || !j.preemptible ||@ ||
a stopped job may give way@ || j.stopped;@;
a stopped waiting job is resumed@if (j.state == JobState::kWaiting && !j.stopped)@if (j.state == JobState::kWaiting)
resume order ignores priority@    if (a->priority != b->priority) return a->priority > b->priority;@
resume order newest first@return a->waiting_since < b->waiting_since;@return a->waiting_since > b->waiting_since;
resume parks every victim@      if (room_made >= d.footprint) break;@
resume parks before its turn@    if (can_free < d.footprint) return {};  // not its turn yet@
resume ignores oversubscribe=false@  if (!rules.oversubscribe) return plan;\n  std::set@  std::set
no migration instead of suspend@    if (!to.empty()) plan.moves.push_back@    if (false) plan.moves.push_back
dearest move first@return a->FootprintOn(uuid) < b->FootprintOn(uuid);@return a->FootprintOn(uuid) > b->FootprintOn(uuid);
a job on two GPUs is moved@Holding(j) != 1 ||@
a placed job is moved to make room@Pinned(j, now) || j.placed || d->available@Pinned(j, now) || d->available
a placed job is drained@Pinned(j, now) || j.placed) continue;@Pinned(j, now)) continue;
moves onto a drained GPU@g.uuid == except || Drained(drained, g.uuid) ||@g.uuid == except ||
target is not the roomiest@if (best == nullptr || g.available > best->available) best = &g;@if (best == nullptr) best = &g;
drain forgets earlier moves@        g.available -= d.footprint;@
make_room ignores oversubscribe=false@  if (!rules.oversubscribe) return plan.why = "oversubscription is off", plan;@
make_room for what never fits@if (requester.FootprintOn(uuid) + bytes > d->total)@if (false)
parked images count against RAM@if (j.state == JobState::kWaiting && !j.parked_on_disk)@if (j.state == JobState::kWaiting)
host budget is all of RAM@host_ram / 2@host_ram
LIST
)

caught=0 missed=0
while IFS='@' read -r name old new; do
  python3 - "$old" "$new" > "$work/policy.cc" <<'PY'
import sys
old, new = (a.replace('\\n', '\n') for a in sys.argv[1:3])
s = open('ctl/vgpud/policy.cc').read()
if old not in s:
    sys.exit('text not found: ' + old)
sys.stdout.write(s.replace(old, new, 1))
PY
  c++ -std=c++20 -O0 -I. "$work/policy.cc" ctl/vgpud/job.cc tests/vgpud/policy_test.cc \
    -lgtest -lgtest_main -pthread -o "$work/t"
  if "$work/t" >"$work/out" 2>&1; then
    echo "MISSED  $name"
    missed=$((missed + 1))
  else
    echo "caught  $name: $(grep -c '^\[  FAILED  \] [A-Za-z_./]*$' "$work/out" || true) failing test(s)"
    caught=$((caught + 1))
  fi
done <<<"$mutants"
echo "$caught caught, $missed missed"
[ "$missed" -eq 0 ]
