#!/bin/bash
# The vgpu.io DRA plugin's costs on the simulated node (docs/performance.md,
# "Kubernetes DRA plugin"), with tests/k8s/fake_apiserver.py as the API server
# and vgpu_test_kubelet as the kubelet, over the real unix sockets:
# - NodePrepareResources latency per claim, one call per claim, for N new
#   claims (each: two GETs to the API server, two files and the checkpoint
#   written) and then the same N again (answered from the checkpoint): p50 and
#   p99 of each and their ratio;
# - `vgpuctl drain 0` to the write of the slice carrying the taint, ROUNDS
#   times (drain, then undrain), at the plugin's default --poll of 1 s and at
#   0.1 s: median;
# - the plugin's resident memory after N prepared claims.
# Usage (from the build tree's parent):
#   bench/dra_prepare_bench.sh [--build DIR] [--claims N] [--rounds N]
set -eu
build=build
claims=100
rounds=5
while [ $# -gt 0 ]; do
  case $1 in
  --build) build=$2; shift ;;
  --claims) claims=$2; shift ;;
  --rounds) rounds=$2; shift ;;
  *) echo "usage: $0 [--build DIR] [--claims N] [--rounds N]" >&2; exit 2 ;;
  esac
  shift
done
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$build" && pwd)
PLUGIN=$build/bin/vgpu-kubelet-plugin
KUBELET=$build/bin/vgpu_test_kubelet
VGPUD=$build/bin/vgpud
VGPUCTL=$build/bin/vgpuctl
SIM_DIR=$build/lib/vgpu/sim
PROBE=$build/tests/containers/vgpu_container_probe
for f in "$PLUGIN" "$KUBELET" "$VGPUD" "$VGPUCTL" "$PROBE"; do
  [ -e "$f" ] || { echo "missing $f: build the default preset first" >&2; exit 2; }
done
work=$(mktemp -d /tmp/vgpu-dra-bench.XXXXXX)
export VGPU_SIM_NODE=dra-bench-$$ VGPU_SIM_DEVICES=1x16GiB VGPU_RUN_DIR=$work/run
pids=()
cleanup() {
  { for p in "${pids[@]}"; do kill -9 "$p" && wait "$p"; done; } 2>/dev/null
  rm -rf "$work" "/dev/shm/vgpu-sim-$VGPU_SIM_NODE"
}
trap cleanup EXIT
mkdir -p "$VGPU_RUN_DIR" "$work/objects" "$work/cdi"
chmod 700 "$VGPU_RUN_DIR"
LD_LIBRARY_PATH=$SIM_DIR "$PROBE" quota 1 1 >/dev/null 2>&1 || true

uid_prefix=0b0b0b0b-0000-4000-8000-
python3 - "$work/objects" "$claims" "$uid_prefix" <<'PY'
import json, sys
d, n, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
for i in range(n):
    uid = f"{prefix}{i:012x}"
    pod = f"1c1c1c1c-0000-4000-8000-{i:012x}"
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": f"bench-{i}", "namespace": "bench", "uid": uid},
             "status": {"allocation": {"devices": {"results": [
                 {"request": "gpu", "driver": "vgpu.io", "pool": "node-a", "device": "gpu-0",
                  "consumedCapacity": {"memory": "256Mi", "compute": "1"}}]}},
                        "reservedFor": [{"resource": "pods", "name": f"pod-{i}", "uid": pod}]}}
    json.dump(claim, open(f"{d}/claim-{i}.json", "w"))
    json.dump({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"pod-{i}", "namespace": "bench", "uid": pod},
               "spec": {"priority": 0}}, open(f"{d}/pod-{i}.json", "w"))
PY
python3 "$here/tests/k8s/fake_apiserver.py" --objects "$work/objects" \
  --schema "$here/tests/k8s/schema/resource_slice_v1.schema.json" --log "$work/slices.log" \
  --port-file "$work/port" >"$work/api.log" 2>&1 &
pids+=($!)
LD_LIBRARY_PATH=$SIM_DIR "$VGPUD" --run-dir "$VGPU_RUN_DIR" --tick 100ms --metrics-listen off \
  >"$work/vgpud.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 200); do [ -s "$work/port" ] && [ -S "$VGPU_RUN_DIR/vgpud.sock" ] && break; sleep 0.05; done
reg=$work/kubelet/plugins_registry/vgpu.io-reg.sock
dra=$work/kubelet/plugins/vgpu.io/dra.sock
plugin() { # POLL
  LD_LIBRARY_PATH=$SIM_DIR "$PLUGIN" --node-name node-a --kubelet-dir "$work/kubelet" \
    --cdi-dir "$work/cdi" --claims-dir "$work/claims" --run-dir "$VGPU_RUN_DIR" \
    --driver-dir "$SIM_DIR" --kube-api "http://127.0.0.1:$(cat "$work/port")" \
    --poll "$1" --log-level warn >>"$work/plugin.log" 2>&1 &
  plugin_pid=$!
  pids+=($plugin_pid)
  for _ in $(seq 1 200); do "$KUBELET" register "$reg" >/dev/null 2>&1 && return; sleep 0.05; done
  echo "the plugin did not register: $(tail -5 "$work/plugin.log")" >&2
  exit 1
}
plugin 1
new=$("$KUBELET" bench "$dra" bench bench "$uid_prefix" "$claims")
again=$("$KUBELET" bench "$dra" bench bench "$uid_prefix" "$claims")
rss=$(awk '/VmRSS/ {print $2}' "/proc/$plugin_pid/status")
p() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" <<<"$2"; }
echo "prepare, new claim:      p50 $(p p50 "$new") ms  p99 $(p p99 "$new") ms  (n=$claims)"
echo "prepare, repeated claim: p50 $(p p50 "$again") ms  p99 $(p p99 "$again") ms"
echo "new/repeated p50 ratio: $(python3 -c "print(round($(p p50 "$new") / $(p p50 "$again"), 1))")"
echo "plugin resident memory with $claims prepared claims: $((rss / 1024)) MiB"

# Drain to the tainted slice's write, at --poll 1 and 0.1.
drain_ms() {
  local t0 ms out=()
  for _ in $(seq 1 "$rounds"); do
    t0=$(date +%s.%N)
    "$VGPUCTL" drain 0 >/dev/null 2>&1
    for _ in $(seq 1 500); do
      ms=$(python3 - "$work/slices.log" "$t0" <<'PY'
import json, sys
t0 = float(sys.argv[2])
for line in open(sys.argv[1]):
    e = json.loads(line)
    d = e["slice"]["spec"]["devices"][0]
    if e["time"] >= t0 and any(t["key"] == "vgpu.io/drained" for t in d.get("taints", [])):
        print(int((e["time"] - t0) * 1000)); break
PY
)
      [ -n "$ms" ] && break
      sleep 0.02
    done
    out+=("$ms")
    "$VGPUCTL" undrain 0 >/dev/null 2>&1
    sleep 1.5
  done
  printf '%s\n' "${out[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
echo "drain to tainted slice, --poll 1: median $(drain_ms) ms over $rounds"
{ kill -9 "$plugin_pid" && wait "$plugin_pid"; } 2>/dev/null || true
plugin 0.1
echo "drain to tainted slice, --poll 0.1: median $(drain_ms) ms over $rounds"
