#!/usr/bin/env bash
# The package as a user installs it: the wheel built from this tree, installed into a fresh venv with its
# dependencies at the versions of locks/project.txt (as constraints: pip picks what the wheel needs, nothing of the
# test extras), then `posexport --help`, a build and a parity run from that venv, outside the source tree. Needs
# the package index only. TORCH_INDEX=https://download.pytorch.org/whl/cpu fetches torch from PyTorch's CPU index.
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

python3 -m venv "$work/venv"
py="$work/venv/bin/python"
sed -n 's/^\([A-Za-z0-9._-]*==[^ ]*\) .*/\1/p' locks/project.txt > "$work/constraints.txt"
"$py" -m pip install -q -c "$work/constraints.txt" pip setuptools
"$py" -m pip wheel -q --no-deps --no-build-isolation --wheel-dir "$work/dist" .
"$py" -m pip install -q -c "$work/constraints.txt" torch ${TORCH_INDEX:+--extra-index-url "$TORCH_INDEX"}
"$py" -m pip install -q -c "$work/constraints.txt" "$work"/dist/posexport-*.whl
"$py" -m pip check

cd "$work"  # the installed package, not this checkout
"$work/venv/bin/posexport" --help >/dev/null
"$work/venv/bin/posexport" --version
"$py" -m posexport --version
"$py" - <<'PY'
import importlib.metadata, importlib.resources
assert importlib.metadata.metadata("posexport")["License-Expression"] == "Apache-2.0"
assert importlib.resources.files("posexport").joinpath("py.typed").is_file()
PY
"$work/venv/bin/posexport" build --encoding rope --head-dim 64 --heads 4 --out graphs
"$work/venv/bin/posexport" parity graphs/rope.onnx --runtimes ort-cpu
# The browser runtimes as an installed posexport runs them: onnxruntime-web installed from npm on first use into
# the (here empty) user cache, Chromium from the system (.ci/run installs both where missing).
XDG_CACHE_HOME="$work/cache" "$work/venv/bin/posexport" parity graphs/rope.onnx --runtimes ort-web-wasm,ort-webgpu 2>"$work/web.err"
grep -q "installing onnxruntime-web .* from npm into $work/cache/posexport/ort-web/" "$work/web.err"
