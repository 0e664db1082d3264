#!/bin/bash
# libvgpu needs nothing but glibc, since a container image may hold nothing
# else (docs/containers.md), and exports only the hooks and dlsym
# (intercept/libvgpu.map): its own copies of the C++ runtime and zstd never
# interpose on the application's. Usage: libvgpu_deps_test.sh LIBVGPU
set -eu
lib=$1
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
for n in $needed; do
  case $n in
  libc.so.6 | libm.so.6 | ld-linux-x86-64.so.2 | libdl.so.2 | libpthread.so.0 | librt.so.1) ;;
  *)
    echo "FAIL: libvgpu needs $n, which a glibc-only image lacks (needed: $needed)"
    exit 1
    ;;
  esac
done
extra=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v -e '^cu' -e '^nvml' -e '^dlsym$' -e '^$' || true)
if [ -n "$extra" ]; then
  echo "FAIL: libvgpu exports more than the hooks and dlsym: $(echo "$extra" | head -20 | tr '\n' ' ')"
  exit 1
fi
echo "PASS: libvgpu needs $needed and exports $(nm -D --defined-only "$lib" | wc -l) hook symbols"
