#!/usr/bin/env sh
# `make bench-gpu`: the CUDA rows of the bench and ort-cuda parity, in one go, on a machine with an NVIDIA
# GPU and onnxruntime-gpu (docs/benchmarks.md, "On a GPU"). Nothing in CI runs it. Writes
# benchmarks/{rope,bias}-ort-cuda.{md,json,png} and benchmarks/parity-ort-cuda/*.{md,xml}; exits non-zero
# when a parity check fails (--strict: ort-cuda missing is a failure here, not a skip).
set -eu
BIN=${VENV:-.venv}/bin
OUT=benchmarks/parity-ort-cuda
"$BIN/python" -c "
import sys, onnxruntime as ort
if 'CUDAExecutionProvider' not in ort.get_available_providers():
    sys.exit('bench-gpu: this onnxruntime has no CUDAExecutionProvider; on a machine with an NVIDIA GPU: pip install onnxruntime-gpu')
"
"$BIN/posexport" bench --runtimes ort-cuda,ort-cpu --dtypes float32,float16 --seqs 2048,8192 --layouts bsh,bshd,bhsd \
    --decode-positions 1000,100000 --threads 2 --warmup 5 --repeats 30 --profile \
    --json benchmarks/rope-ort-cuda.json --markdown benchmarks/rope-ort-cuda.md --plot benchmarks/rope-ort-cuda.png
"$BIN/posexport" bench --runtimes ort-cuda --encodings alibi,t5 --dtypes float32,float16 --seqs 512,2048 --threads 2 --profile \
    --json benchmarks/bias-ort-cuda.json --markdown benchmarks/bias-ort-cuda.md --plot benchmarks/bias-ort-cuda.png
mkdir -p "$OUT"
status=0
for backend in portable onnx23 ort; do
    opset=18; [ "$backend" = onnx23 ] && opset=23
    for layout in bsh bshd bhsd; do
        "$BIN/posexport" parity --encoding rope --backend "$backend" --opset "$opset" --layout "$layout" \
            --dtype float32,float16,bfloat16 --runtimes ort-cuda,ort-cpu --strict \
            --markdown "$OUT/rope-$backend-$layout.md" --junit "$OUT/rope-$backend-$layout.xml" || status=1
    done
done
for encoding in sinusoidal learned alibi t5 swin vit-learned sincos-2d rope-2d; do
    "$BIN/posexport" parity --encoding "$encoding" --dtype float32,float16,bfloat16 --runtimes ort-cuda,ort-cpu --strict \
        --markdown "$OUT/$encoding.md" --junit "$OUT/$encoding.xml" || status=1
done
exit $status
