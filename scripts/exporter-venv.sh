#!/bin/sh
# Make .venvs/NAME: the virtual environment of an exporter whose pins clash with the project's own
# (make matrix runs each such exporter in a subprocess of its python). torch is pinned first, so that
# pip keeps the CPU build instead of resolving a multi-GB CUDA one.
#   sh scripts/exporter-venv.sh optimum|mobius
set -eu
NAME=${1:?usage: exporter-venv.sh optimum|mobius}
TORCH=${TORCH:-torch==2.13.0}
case "$NAME" in
  # optimum-onnx 0.1 pins transformers < 4.58; the models it exports are configured in 4.x spelling.
  optimum) PACKAGES="optimum-onnx==0.1.0 transformers==4.57.* onnx onnxruntime" ;;
  mobius) PACKAGES="mobius-onnx==0.1.0 transformers" ;;
  *) echo "error: exporter venv $NAME is not known; choose optimum or mobius" >&2; exit 2 ;;
esac
VENV=.venvs/$NAME
if [ -f "$VENV/.installed" ]; then exit 0; fi
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "$TORCH"
# shellcheck disable=SC2086
"$VENV/bin/python" -m pip install -q "$TORCH" $PACKAGES
touch "$VENV/.installed"
