# Two entry points, each doing its own set-up on a fresh machine:
#   make run   - install, build the default RoPE graph, check its parity on onnxruntime CPU
#   make test  - install, run the whole test suite
VENV ?= .venv
PY := $(VENV)/bin/python
# This machine kind keeps the CPU build of torch 2.13.0 on disk; pinning it first keeps pip from
# pulling a multi-GB CUDA build when the project's `torch>=2.6` is resolved.
TORCH ?= torch==2.13.0

.PHONY: install run test bench bench-gpu bench-size

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e ".[test]"
	touch $@

run: install
	$(VENV)/bin/posexport build --encoding rope --out graphs/build
	$(VENV)/bin/posexport parity graphs/build/rope.onnx --runtimes ort-cpu

test: install
	$(PY) -m pytest -q

# The commands that make benchmarks/{rope,bias}-ort-cpu.{md,json,png} (see benchmarks/README.md): every
# subject of a group timed round-robin; repeats kept modest so that it finishes in minutes on 2 cores.
bench: install
	OMP_WAIT_POLICY=PASSIVE $(VENV)/bin/posexport bench --seqs 256,2048,8192 --layouts bsh,bshd,bhsd --decode-positions 1000,100000 \
		--threads 2 --warmup 3 --repeats 20 --profile --indexshare-layers 4 --indexshare-seqs 256,1024 \
		--json benchmarks/rope-ort-cpu.json --markdown benchmarks/rope-ort-cpu.md --plot benchmarks/rope-ort-cpu.png
	OMP_WAIT_POLICY=PASSIVE $(VENV)/bin/posexport bench --encodings alibi,t5 --seqs 512,2048 --decode-positions 4096 --threads 2 --warmup 3 --repeats 20 --profile \
		--json benchmarks/bias-ort-cpu.json --markdown benchmarks/bias-ort-cpu.md --plot benchmarks/bias-ort-cpu.png

# CUDA rows and ort-cuda parity in one go, on a machine with an NVIDIA GPU and onnxruntime-gpu
# (docs/benchmarks.md); nothing in CI depends on it.
bench-gpu: install
	VENV=$(VENV) sh benchmarks/bench-gpu.sh

# doctor, patch and model-parity on synthetic models of 0.5-4 GiB of external data, sparse (no disk for the
# source) and dense (the bytes of real weights), against cp: benchmarks/size{,-dense}.{md,json} (about 10
# minutes and 12 GiB of free disk at the peak for the dense 4 GiB model, its patched copy and the plain copy).
bench-size: install
	$(PY) benchmarks/size.py --sizes 0.5,1,2,4 --json benchmarks/size.json --markdown benchmarks/size.md
	$(PY) benchmarks/size.py --dense --sizes 0.5,1,2,4 --json benchmarks/size-dense.json --markdown benchmarks/size-dense.md
