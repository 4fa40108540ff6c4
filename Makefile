# Two entry points, each doing its own set-up on a fresh machine:
#   make run   - install, build the default RoPE graph, check its parity on onnxruntime CPU
#   make test  - install (and the exporters' venvs, .venvs/optimum and .venvs/mobius), run the test suite
# Every environment installs from its lock (locks/NAME.txt: exact versions and sha256, docs/environments.md);
# `make lock` rewrites the locks from the newest releases pyproject.toml's ranges allow, `make upstream` reports
# what the next lock would change without touching them.
VENV ?= .venv
PY := $(VENV)/bin/python
LOCK := locks/project.txt
# The torch `make lock` pins first: this machine kind keeps the CPU build of torch 2.13.0 on disk, and without the
# pin pip resolves a multi-GB CUDA build.
TORCH ?= torch==2.13.0

.PHONY: install lock upstream exporter-venvs web-runtime run test test-all bench bench-gpu bench-t5-patch matrix bench-size web-conformance bench-parity-memory trained extend-context

install: $(VENV)/.installed

# A fresh venv whenever the lock or the project's metadata changes: exactly the lock, hash-checked, then the
# project itself (editable, built with the lock's setuptools), then pip's own consistency check. setuptools' one
# remaining line for an editable install ("Editable installation.": folders named like the packages may shadow them,
# which here they are by design) is information, not a warning, and is left out.
$(VENV)/.installed: pyproject.toml $(LOCK)
	python3 -m venv --clear $(VENV)
	$(PY) -m pip install -q --require-hashes --no-deps -r $(LOCK)
	PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip install -q --no-deps --no-build-isolation -e .
	$(PY) -m pip check
	touch $@

lock:
	TORCH="$(TORCH)" python3 scripts/lock.py

# Not part of CI: a scratch venv (build/upstream) with the newest releases, the catalogue walk, the exporter
# fixtures and the docs commands run in it, and build/upstream/drift.{md,json}: what the next lock would change.
upstream:
	python3 scripts/upstream.py --work build/upstream

# The default graph is named apart from the README tour's graphs/build/rope.onnx, which the tour then checks.
run: install
	$(VENV)/bin/posexport build --encoding rope --out graphs/build --name rope-default
	$(VENV)/bin/posexport parity graphs/build/rope-default.onnx --runtimes ort-cpu

# The exporters whose pins clash with the project's run from their own venvs (scripts/exporter-venv.sh): the suite
# exports its optimum and mobius fixtures with them, and skips those tests, saying why, where a venv is missing.
exporter-venvs: .venvs/optimum/.installed .venvs/mobius/.installed

.venvs/%/.installed: locks/%.txt
	sh scripts/exporter-venv.sh $*

# The suite: a stratified sample of the registry-wide catalogue walk (every reader and form at least once);
# `make test-all` walks every type. PYTEST_ARGS adds pytest options (.ci/run: the 25 slowest tests). One worker per
# core (pytest-xdist), each taking whole files: a file's tests share its fixtures, and the docs' commands run in order.
XDIST := -n auto --dist loadfile
test: install exporter-venvs web-runtime
	$(PY) -m pytest -q $(XDIST) $(PYTEST_ARGS)

test-all: install exporter-venvs web-runtime
	POSEXPORT_TEST_ALL=1 $(PY) -m pytest -q $(XDIST) $(PYTEST_ARGS)

# onnxruntime-web for the ort-web-wasm and ort-webgpu runtimes, from npm as the shipped lockfile pins it, into the
# package's own folder (ignored by git; an installed posexport installs it into the user's cache on first use).
# Without npm the browser runtimes' tests are skipped, saying why. Chromium comes from the system (.ci/run).
WEB := posexport/runtimes/web
web-runtime: $(WEB)/node_modules/.installed

$(WEB)/node_modules/.installed: $(WEB)/package-lock.json
	@if command -v npm >/dev/null; then \
		cd $(WEB) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error && touch node_modules/.installed; \
	else echo "npm not found: ort-web-wasm and ort-webgpu stay unavailable (apt-get install -y npm)"; fi

# The commands that make benchmarks/{rope,bias}-ort-cpu.{md,json,png} (see benchmarks/README.md): every
# subject of a group timed round-robin; repeats kept modest so that it finishes in minutes on 2 cores.
bench: install
	OMP_WAIT_POLICY=PASSIVE $(VENV)/bin/posexport bench --seqs 256,2048,8192 --layouts bsh,bshd,bhsd --decode-positions 1000,100000 \
		--threads 2 --warmup 3 --repeats 20 --profile --indexshare-layers 4 --indexshare-seqs 256,1024 \
		--json benchmarks/rope-ort-cpu.json --markdown benchmarks/rope-ort-cpu.md --plot benchmarks/rope-ort-cpu.png
	OMP_WAIT_POLICY=PASSIVE $(VENV)/bin/posexport bench --encodings alibi,t5 --seqs 512,2048 --decode-positions 4096 --threads 2 --warmup 3 --repeats 20 --profile \
		--json benchmarks/bias-ort-cpu.json --markdown benchmarks/bias-ort-cpu.md --plot benchmarks/bias-ort-cpu.png

# benchmarks/t5-patch-ort-cpu.{md,json}: a T5 encoder before and after `posexport patch` (its bias by
# lookup instead of per-call buckets), at 2048 tokens, subjects interleaved, as ratios.
bench-t5-patch: install
	OMP_WAIT_POLICY=PASSIVE $(PY) benchmarks/t5_patch.py --seq 2048 --repeats 10 --out benchmarks/t5-patch-ort-cpu

# CUDA rows and ort-cuda parity in one go, on a machine with an NVIDIA GPU and onnxruntime-gpu
# (docs/benchmarks.md); nothing in CI depends on it.
bench-gpu: install
	VENV=$(VENV) sh benchmarks/bench-gpu.sh

# docs/compatibility.{md,json} (docs/matrix.md): every architecture row × every exporter, each exporter whose
# pins clash with the project's in its own venv (.venvs/NAME, made by scripts/exporter-venv.sh); then
# benchmarks/patch-cost.{md,json}: every FIXED cell's patched model timed against its original.
# The rows of the published page (matrix/models.py defines more: stablelm, glm4, falcon).
MATRIX_ARCHITECTURES ?= llama,phi3-longrope,qwen2-yarn,gpt-neox,gemma3,llama3,mistral,qwen3,qwen2,gemma2,gpt2,t5,whisper,bert
matrix: install exporter-venvs
	rm -rf build/matrix build/matrix-cost
	OMP_WAIT_POLICY=PASSIVE $(PY) -m matrix --jobs 2 --architectures $(MATRIX_ARCHITECTURES) --work build/matrix --json docs/compatibility.json --markdown docs/compatibility.md
	OMP_WAIT_POLICY=PASSIVE $(PY) -m matrix.cost --matrix docs/compatibility.json --work build/matrix-cost \
		--json benchmarks/patch-cost.json --markdown benchmarks/patch-cost.md

# docs/runtimes.md's onnxruntime-web conformance table and docs/web-repros/: every encoding and backend, and the
# contrib and standard ops posexport's graphs and patched models use, on ort-web-wasm and ort-webgpu beside ort-cpu
# (matrix/web.py; about 30 minutes on 2 cores).
web-conformance: install web-runtime
	$(PY) -m matrix.web

# doctor, patch and model-parity on synthetic models of 0.5-4 GiB of external data, sparse (no disk for the
# source) and dense (the bytes of real weights), against cp: benchmarks/size{,-dense}.{md,json} (about 10
# minutes and 12 GiB of free disk at the peak for the dense 4 GiB model, its patched copy and the plain copy).
bench-size: install
	$(PY) benchmarks/size.py --sizes 0.5,1,2,4 --json benchmarks/size.json --markdown benchmarks/size.md
	$(PY) benchmarks/size.py --dense --sizes 0.5,1,2,4 --json benchmarks/size-dense.json --markdown benchmarks/size-dense.md

# benchmarks/parity-memory.{md,json}: model-parity's peak memory (its own process plus its session's child) against the
# onnxruntime session's own, by vocabulary and prompt length (a Llama of hidden size 64 whose logits dominate).
bench-parity-memory: install
	$(PY) benchmarks/parity_memory.py --sizes 32768x1024,32768x4096,32768x8192,131072x2048,262144x1024,262144x2048 \
		--json benchmarks/parity-memory.json --markdown benchmarks/parity-memory.md

# benchmarks/trained.{md,json}: the suite's trained Llama and Gemma-3 exported by every exporter, patched, then doctor
# --fail-on and model-parity at 2000 tokens of real text (and random ids) with 64 greedy tokens, and a rope base 1% off
# judged both ways (minutes of exports; the suite runs one export per pattern, tests/test_verdicts_trained.py).
trained: install exporter-venvs
	OMP_WAIT_POLICY=PASSIVE $(PY) benchmarks/trained.py --prompt 2000 --generate 64 --json benchmarks/trained.json --markdown benchmarks/trained.md

# benchmarks/extend-context.{md,json}: the trained Llama's genai export of 4096 positions extended to 16384 with YaRN by
# one command (docs/recipes.md), onnxruntime-genai's generator past 4096 against transformers, and model-parity at
# 12000 tokens against float64 transformers with the same YaRN (minutes; the suite runs 256 -> 1024,
# tests/test_surgery_extend_context.py).
extend-context: install
	OMP_WAIT_POLICY=PASSIVE $(PY) benchmarks/extend_context.py --prompt 4200 --parity 12000 --json benchmarks/extend-context.json --markdown benchmarks/extend-context.md
