#!/bin/sh
# Runs the 1:3:6 leave-and-return scenario on the simulated node and plots it
# (gnuplot, Debian package gnuplot-nox) into docs/images/share_136.png.
# Usage: bench/run_share_plot.sh [BUILD_DIR] [SECONDS]   (defaults: build, 12)
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
seconds=${2:-12}
warmup=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$build/bin/vgpu_bench_share" --scenario conserve-1-3-6 --seconds "$seconds" --warmup "$warmup" \
  --out "$out" | tee "$out/log.txt"
# The weight-6 tenant's stop and return, as the harness printed them.
stop=$(sed -n 's/.*w6 stopped launching at \([0-9.]*\) s.*/\1/p' "$out/log.txt")
back=$(sed -n 's/.*returned at \([0-9.]*\) s.*/\1/p' "$out/log.txt")
mkdir -p "$here/docs/images"
gnuplot -e "csv='$out/share_conserve-1-3-6_series.csv'; out='$here/docs/images/share_136.png'; stop=$stop; back=$back" \
  "$here/bench/plot_share.gp"
echo "wrote $here/docs/images/share_136.png"
