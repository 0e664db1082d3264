#!/bin/bash
# End to end: the vgpu.io DRA driver's kubelet plugin, driven as the kubelet
# drives it (vgpu_test_kubelet: registration, NodePrepare/UnprepareResources
# over the unix sockets), against a stand-in API server (fake_apiserver.py:
# ResourceClaims and Pods from files, ResourceSlice writes validated against
# the resource.k8s.io/v1 schema), with real podman running the containers
# of two claims on one simulated GPU of 1 GiB beside vgpud.
#   claim A: 512 MiB and 50% of gpu-0, pod priority 0
#   claim B: 768 MiB of gpu-0, pod priority 1000000 (vgpu priority high)
# Checks: registration; the first slice (memory advertised x2: vgpud
# time-slices); prepare twice, plugin killed and restarted, prepare again:
# the same answer; a bad claim writes nothing; each claim's container sees its
# limit and an allocation past it fails; a container asking for 4 GiB is held
# at the ceiling; A's and B's jobs together do not fit: B preempts A through
# vgpud and both finish with the reference checksums; vgpuctl ps shows the
# claim and pod; `vgpuctl drain 0` is a taint in the next slice (and the time
# it took), undrain removes it; unprepare twice leaves nothing.
# Environment (from CMake): PLUGIN TEST_KUBELET APISERVER SCHEMA VGPUD VGPUCTL PROBE JOB SIM_DIR
# Exit 77 (skipped) where the runtime cannot run, naming what is missing.
set -u
skip() { echo "SKIP: $*"; exit 77; }
fail() {
  echo "FAIL: $*"
  for f in plugin.log vgpud.log; do
    [ -f "$work/$f" ] && { echo "--- $f"; tail -30 "$work/$f"; }
  done
  exit 1
}
[ "$(id -u)" = 0 ] || skip "not root: the test runs rootful podman"
command -v podman >/dev/null || skip "podman is not installed (scripts/install_deps.sh --ci)"
command -v runc >/dev/null || skip "runc is not installed (scripts/install_deps.sh --ci)"
python3 -c 'import jsonschema' 2>/dev/null || skip "python3-jsonschema is not installed"

work=$(mktemp -d /tmp/vgpu-dra.XXXXXX)
tag=vgpu-dra-$$
image=localhost/$tag
export VGPU_SIM_NODE=$tag VGPU_SIM_DEVICES=1x1GiB VGPU_RUN_DIR=$work/run
UA=0a1b2c3d-0000-4000-8000-00000000000a
UB=0a1b2c3d-0000-4000-8000-00000000000b
pids=()
cleanup() {
  { for p in "${pids[@]}"; do kill -9 "$p" && wait "$p"; done; } 2>/dev/null
  podman rm -f -t 0 "$tag-a" "$tag-b" >/dev/null 2>&1
  podman rmi -f "$image" >/dev/null 2>&1
  rm -f /var/run/cdi/vgpu.io-claim_"$UA".json /var/run/cdi/vgpu.io-claim_"$UB".json
  rm -rf "$work" "/dev/shm/vgpu-sim-$VGPU_SIM_NODE"
}
trap cleanup EXIT
export CONTAINERS_CONF=$work/containers.conf
printf '[containers]\ndefault_ulimits = []\n' >"$CONTAINERS_CONF"
run_opts=(--runtime runc --ulimit host --pids-limit 0 --network none
  -e VGPU_SIM_NODE -e VGPU_SIM_DEVICES -e VGPU_VMM=on)

# An image of glibc, libstdc++ and the programs.
root=$work/rootfs
mkdir -p "$root"/{lib64,lib/x86_64-linux-gnu,app,etc,tmp}
cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
cp -L /lib/x86_64-linux-gnu/{libc.so.6,libm.so.6,libstdc++.so.6,libgcc_s.so.1} \
  "$root/lib/x86_64-linux-gnu/"
cp "$PROBE" "$root/app/container_probe"
cp "$JOB" "$root/app/job"
tar -C "$root" -cf "$work/image.tar" . || fail "tar"
podman import -q "$work/image.tar" "$image" >/dev/null 2>"$work/err" ||
  skip "podman import failed: $(cat "$work/err")"
podman run --rm "${run_opts[@]}" "$image" /lib64/ld-linux-x86-64.so.2 --version >/dev/null \
  2>"$work/err" || skip "podman cannot run a container here: $(tail -3 "$work/err")"

mkdir -p "$VGPU_RUN_DIR" "$work/objects" /var/run/cdi
chmod 700 "$VGPU_RUN_DIR"
LD_LIBRARY_PATH=$SIM_DIR "$PROBE" quota 1 1 >/dev/null 2>&1
[ -e "/dev/shm/vgpu-sim-$VGPU_SIM_NODE" ] || fail "the simulated node was not created"

# The cluster's objects, as the scheduler left them: allocated, reserved for a pod.
claim() { # NAME UID MEMORY COMPUTE POD POD_UID
  cat >"$work/objects/$1.json" <<JSON
{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
 "metadata": {"name": "$1", "namespace": "team-a", "uid": "$2"},
 "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "vgpu.io",
   "capacity": {"requests": {"memory": "$3", "compute": "$4"}}}}]}},
 "status": {"allocation": {"devices": {"results": [{"request": "gpu", "driver": "vgpu.io",
   "pool": "node-a", "device": "gpu-0", "shareID": "${2:0:24}00000000005e",
   "consumedCapacity": {"memory": "$3", "compute": "$4"}}]},
   "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name",
     "operator": "In", "values": ["node-a"]}]}]}},
  "reservedFor": [{"resource": "pods", "name": "$5", "uid": "$6"}]}}
JSON
}
pod() { # NAME UID PRIORITY
  cat >"$work/objects/pod-$1.json" <<JSON
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "$1", "namespace": "team-a", "uid": "$2"},
 "spec": {"priority": $3, "containers": [{"name": "main", "image": "x"}]}}
JSON
}
claim claim-a "$UA" 512Mi 50 train-a 1c000000-0000-4000-8000-00000000000a
pod train-a 1c000000-0000-4000-8000-00000000000a 0
claim claim-b "$UB" 768Mi 100 serve-b 1c000000-0000-4000-8000-00000000000b
pod serve-b 1c000000-0000-4000-8000-00000000000b 1000000

echo -n "s3cr3t-token" >"$work/token"
python3 "$APISERVER" --objects "$work/objects" --schema "$SCHEMA" --log "$work/slices.log" \
  --port-file "$work/port" --token s3cr3t-token >"$work/api.log" 2>&1 &
pids+=($!)
LD_LIBRARY_PATH=$SIM_DIR "$VGPUD" --run-dir "$VGPU_RUN_DIR" --tick 100ms --quantum 60s \
  --metrics-listen off >"$work/vgpud.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 200); do [ -s "$work/port" ] && [ -S "$VGPU_RUN_DIR/vgpud.sock" ] && break; sleep 0.05; done
[ -S "$VGPU_RUN_DIR/tenant/vgpud.sock" ] || fail "vgpud has no tenant socket"
kubelet=$work/kubelet
reg=$kubelet/plugins_registry/vgpu.io-reg.sock
dra=$kubelet/plugins/vgpu.io/dra.sock
start_plugin() {
  LD_LIBRARY_PATH=$SIM_DIR "$PLUGIN" --node-name node-a --kubelet-dir "$kubelet" \
    --claims-dir "$work/claims" --run-dir "$VGPU_RUN_DIR" --driver-dir "$SIM_DIR" \
    --kube-api "http://127.0.0.1:$(cat "$work/port")" --token-file "$work/token" \
    --node-file "/dev/shm/vgpu-sim-$VGPU_SIM_NODE" --memory-overcommit 2 --poll 0.1 \
    >>"$work/plugin.log" 2>&1 &
  plugin=$!
  pids+=($plugin)
  # As the kubelet: dial the registration socket until it answers (a killed
  # plugin's socket file stays until the next one replaces it).
  for _ in $(seq 1 200); do
    "$TEST_KUBELET" register "$reg" >"$work/reg.json" 2>/dev/null && return
    sleep 0.05
  done
  fail "the plugin does not answer on its registration socket: $(cat "$work/reg.json")"
}
start_plugin
cat "$work/reg.json"
grep -q '"registered":true' "$work/reg.json" || fail "not registered"

# The first slice: gpu-0, memory advertised twice the physical (vgpud time-slices).
slice_has() { python3 - "$work/slices.log" "$@" <<'PY'
import json, sys
log, want = sys.argv[1], sys.argv[2]
lines = [json.loads(l) for l in open(log)] if open(log).read().strip() else []
if not lines:
    sys.exit(1)
s = lines[-1]["slice"]
dev = next(d for d in s["spec"]["devices"] if d["name"] == "gpu-0")
taint = any(t["key"] == "vgpu.io/drained" for t in dev.get("taints", []))
ok = {"memory2Gi": dev["capacity"]["memory"]["value"] == "2Gi" and s["spec"]["nodeName"] == "node-a",
      "tainted": taint, "untainted": not taint}[want]
if ok and len(sys.argv) > 3:  # the write's time, in ms after the epoch time given
    print(int((lines[-1]["time"] - float(sys.argv[3])) * 1000))
sys.exit(0 if ok else 1)
PY
}
for _ in $(seq 1 100); do slice_has memory2Gi >/dev/null && break; sleep 0.05; done
slice_has memory2Gi || fail "no slice with gpu-0 advertising 2Gi: $(tail -2 "$work/slices.log")"

ref_a=$(LD_LIBRARY_PATH=$SIM_DIR "$JOB" 448 12 150 | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p')
ref_b=$(LD_LIBRARY_PATH=$SIM_DIR "$JOB" 640 2 100 | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p')
[ -n "$ref_a" ] && [ -n "$ref_b" ] || fail "reference runs"

# Prepare: twice, then across a plugin killed and restarted: one answer.
both=(team-a/claim-a/$UA team-a/claim-b/$UB)
"$TEST_KUBELET" prepare "$dra" "${both[@]}" >"$work/p1.json" || fail "prepare: $(cat "$work/p1.json")"
"$TEST_KUBELET" prepare "$dra" "${both[@]}" >"$work/p2.json" || fail "prepare again"
{ kill -9 "$plugin" && wait "$plugin"; } 2>/dev/null
start_plugin
"$TEST_KUBELET" prepare "$dra" "${both[@]}" >"$work/p3.json" || fail "prepare after a restart"
cat "$work/p1.json"
cmp -s "$work/p1.json" "$work/p2.json" && cmp -s "$work/p1.json" "$work/p3.json" ||
  fail "the answers differ: $(cat "$work/p2.json" "$work/p3.json")"
grep -q "\"cdi_device_ids\":\[\"vgpu.io/claim=$UA\"\]" "$work/p1.json" || fail "no CDI id for A"
ls /var/run/cdi/vgpu.io-claim_* "$work/claims" >"$work/files.before"

# A claim whose UID is not the API server's writes nothing.
"$TEST_KUBELET" prepare "$dra" team-a/claim-a/0a1b2c3d-0000-4000-8000-0000000000ff \
  >"$work/bad.json" && fail "a claim with another UID was prepared"
grep -q '"error":"[^"]*UID' "$work/bad.json" || fail "no UID error: $(cat "$work/bad.json")"
ls /var/run/cdi/vgpu.io-claim_* "$work/claims" >"$work/files.after"
cmp -s "$work/files.before" "$work/files.after" || fail "a bad claim wrote files"

# Each claim's container sees its limit; asking for more is held at the ceiling.
podman run --rm "${run_opts[@]}" --device "vgpu.io/claim=$UA" "$image" \
  /app/container_probe quota 384 256 >"$work/qa.out" 2>&1 || { cat "$work/qa.out"; fail "claim A's quota"; }
grep -q "total=536870912 preload=env" "$work/qa.out" || fail "A does not see 512 MiB: $(cat "$work/qa.out")"
podman run --rm "${run_opts[@]}" --device "vgpu.io/claim=$UB" "$image" \
  /app/container_probe quota 640 256 >"$work/qb.out" 2>&1 || { cat "$work/qb.out"; fail "claim B's quota"; }
grep -q "total=805306368 preload=env" "$work/qb.out" || fail "B does not see 768 MiB: $(cat "$work/qb.out")"
podman run --rm "${run_opts[@]}" --device "vgpu.io/claim=$UA" -e VGPU_DEVICE_MEMORY_LIMIT=4GiB \
  -e VGPU_PRIORITY=high "$image" /app/container_probe quota 384 256 >"$work/qc.out" 2>&1 ||
  { cat "$work/qc.out"; fail "a container asking for 4 GiB escaped the ceiling"; }
grep -q "total=536870912" "$work/qc.out" || fail "asking for 4 GiB changed the limit"
grep -q "VGPU_DEVICE_MEMORY_LIMIT='4GiB' refused" "$work/qc.out" || fail "no refusal line: $(cat "$work/qc.out")"
grep -q "VGPU_PRIORITY='high' refused" "$work/qc.out" || fail "a normal-priority claim became high"
echo "claim A: 512 MiB, claim B: 768 MiB; 4 GiB and high priority refused in A"

# Together they do not fit in 1 GiB: B (high) preempts A through vgpud.
podman run -d --name "$tag-a" "${run_opts[@]}" --device "vgpu.io/claim=$UA" "$image" \
  /app/job 448 12 150 >/dev/null || fail "podman run A"
for _ in $(seq 1 400); do podman logs "$tag-a" 2>&1 | grep -q allocated && break; sleep 0.05; done
"$VGPUCTL" ps --json >"$work/ps.json" 2>&1
grep -q '"claim":"team-a/claim-a"' "$work/ps.json" && grep -q '"pod":"team-a/train-a"' "$work/ps.json" ||
  fail "vgpuctl ps does not show A's claim and pod: $(cat "$work/ps.json")"
start=$(date +%s%N)
podman run -d --name "$tag-b" "${run_opts[@]}" --device "vgpu.io/claim=$UB" "$image" \
  /app/job 640 2 100 >/dev/null || fail "podman run B"
[ "$(podman wait "$tag-b")" = 0 ] || { podman logs "$tag-b"; fail "B failed"; }
b_ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$(podman wait "$tag-a")" = 0 ] || { podman logs "$tag-a"; fail "A failed"; }
got_a=$(podman logs "$tag-a" 2>&1 | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p')
got_b=$(podman logs "$tag-b" 2>&1 | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p')
[ "$got_a" = "$ref_a" ] || fail "A's checksum $got_a, reference $ref_a"
[ "$got_b" = "$ref_b" ] || fail "B's checksum $got_b, reference $ref_b"
grep -q "preempted by" "$work/vgpud.log" || fail "vgpud did not preempt A for B"
echo "B (high) preempted A; B done in ${b_ms} ms; checksums equal the references"

# A drain is a taint in the next slice; undrain removes it.
start=$(date +%s.%N)
"$VGPUCTL" drain 0 >"$work/drain.out" 2>&1 || fail "drain: $(cat "$work/drain.out")"
for _ in $(seq 1 400); do slice_has tainted >/dev/null && break; sleep 0.01; done
drain_ms=$(slice_has tainted "$start") || fail "no taint after the drain"
"$VGPUCTL" undrain 0 >/dev/null 2>&1 || fail "undrain"
for _ in $(seq 1 400); do slice_has untainted >/dev/null && break; sleep 0.01; done
slice_has untainted || fail "the taint stayed after undrain"
echo "drain to the tainted slice's write: ${drain_ms} ms (plugin --poll 0.1)"

# Unprepare twice: nothing left.
"$TEST_KUBELET" unprepare "$dra" "${both[@]}" >"$work/u1.json" || fail "unprepare: $(cat "$work/u1.json")"
"$TEST_KUBELET" unprepare "$dra" "${both[@]}" >"$work/u2.json" || fail "unprepare again"
ls /var/run/cdi/vgpu.io-claim_* 2>/dev/null && fail "specs left after unprepare"
[ -z "$(ls -A "$work/claims")" ] || fail "ceilings files left: $(ls -R "$work/claims")"
echo "plugin: $(grep VmRSS /proc/$plugin/status)"
echo PASS
