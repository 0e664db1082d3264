#!/usr/bin/env bash
# Builds with the default preset and runs every test that needs no GPU.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cmake --preset default
cmake --build --preset default
ctest --preset default -LE "gpu|slow" "$@"
