"""onnxruntime-web in a headless Chromium (runtimes/browser.py): the base of ``ort-web-wasm`` and ``ort-webgpu``.

onnxruntime-web comes from npm, pinned by the package.json and package-lock.json shipped in
posexport/runtimes/web/ (beside the page that loads it). A clone installs it there (``make web-runtime``,
which ``make test`` runs; the folder is ignored by git); an installed posexport installs it on first use
into the user's cache (~/.cache/posexport/ort-web/VERSION, saying so on stderr), with ``npm ci``, which
checks every package against the lockfile's hashes and runs no install scripts.

One tab per (provider, threads) in this process's browser holds that provider's sessions. A graph or a
model is served to it once and loaded by onnxruntime-web itself (external data by its location); each run
sends the feeds as one binary blob and reads the outputs back as one. A crashed tab fails the run that
saw it (TabCrashed) and the next run opens a new tab and loads the session again. The report names the
onnxruntime-web version, the provider and, for WebGPU, the adapter, and where onnxruntime placed the
graph's nodes: a node the provider has no kernel for runs on onnxruntime-web's CPU provider instead.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import onnx

from .. import guarded
from ..contract import Artifact
from ..dtypes import numpy_dtype
from ..errors import one_line
from .browser import START_SECONDS, Browser, BrowserError, PageError, Tab, TabCrashed, find_browser, running, shared_browser
from .base import Bound, ModelSession, Runtime, Session, SessionOptions

PAGE = Path(__file__).with_name("web")  # package data: package.json, package-lock.json, page.html, page.mjs
LOAD_SECONDS = 900  # a session's creation: a large model's fetch, parse and shader compilation
RUN_SECONDS = 600
INSTALL_SECONDS = 900
# WebAssembly's 32-bit memory addresses 4 GiB, and onnxruntime-web holds a model's weights in it while it loads.
WASM_MEMORY = 4 << 30
ALIGN = 8


def pinned_version() -> str:
    return json.loads((PAGE / "package.json").read_text())["dependencies"]["onnxruntime-web"]


def cache_folder() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "posexport" / "ort-web" / pinned_version()


def dist_in(folder: Path) -> Path | None:
    """onnxruntime-web's dist/ under ``folder``, when the pinned version is installed there."""
    package = folder / "node_modules" / "onnxruntime-web"
    try:
        version = json.loads((package / "package.json").read_text()).get("version")
    except (OSError, ValueError):
        return None
    return package / "dist" if version == pinned_version() else None


def ort_web_dist() -> tuple[Path | None, str]:
    """(onnxruntime-web's dist/, '') from this package's folder (a clone's `make web-runtime`) or the user's
    cache, installed there now if need be; or (None, why not)."""
    for folder in (PAGE, cache_folder()):
        found = dist_in(folder)
        if found:
            return found, ""
    return install(cache_folder())


def install(target: Path) -> tuple[Path | None, str]:
    """``npm ci`` of the shipped lockfile into ``target`` (a temporary folder renamed into place, under a
    lock, so that two processes never install over each other)."""
    version = pinned_version()
    npm = shutil.which("npm")
    if npm is None:
        return None, (f"npm not found: onnxruntime-web {version} is installed from npm on first use; install Node.js "
                      "and npm (apt-get install -y npm), or run `make web-runtime` in a clone")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = dist_in(target)
        if found:
            return found, ""
        work = target.parent / f".{version}-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(PAGE / name, work / name)
        print(f"posexport: installing onnxruntime-web {version} from npm into {target} (once)", file=sys.stderr)
        try:
            done = subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"], cwd=work,
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=INSTALL_SECONDS)
        except (OSError, subprocess.TimeoutExpired) as e:
            shutil.rmtree(work, ignore_errors=True)
            return None, f"npm ci of onnxruntime-web {version} failed: {one_line(e, 300)}"
        if done.returncode != 0:
            shutil.rmtree(work, ignore_errors=True)
            return None, f"npm ci of onnxruntime-web {version} failed: {one_line(done.stderr.strip()[-600:], 300)}"
        shutil.rmtree(target, ignore_errors=True)
        os.rename(work, target)
    return dist_in(target), ""


# --- the wire: a uint32 header length, a JSON header, then each array's bytes at 8-byte offsets -------


def padded(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def pack(arrays: Mapping[str, np.ndarray]) -> bytes:
    entries, offset, data = [], 0, []
    for name, array in arrays.items():
        array = np.ascontiguousarray(array)
        entries.append([name, array.dtype.name, list(array.shape), offset, array.nbytes])
        data.append((offset, array))
        offset += padded(array.nbytes)
    header = json.dumps({"arrays": entries}).encode()
    base = padded(4 + len(header))
    out = bytearray(base + offset)
    out[:4 + len(header)] = struct.pack("<I", len(header)) + header
    view = memoryview(out)
    for start, array in data:
        view[base + start:base + start + array.nbytes] = array.reshape(-1).view(np.uint8)
    return bytes(out)


def unpack(blob: bytes) -> dict[str, np.ndarray]:
    (length,) = struct.unpack_from("<I", blob)
    base = padded(4 + length)
    arrays = {}
    for name, kind, dims, offset, nbytes in json.loads(blob[4:4 + length])["arrays"]:
        dtype = numpy_dtype(kind)
        arrays[name] = np.frombuffer(blob, dtype, nbytes // dtype.itemsize, base + offset).reshape(dims).copy()
    return arrays


# --- a tab and its sessions --------------------------------------------------------------------------


@dataclass
class Spec:
    """A session as the page loads it: the model's blob, its external data's (location, blob) pairs."""

    key: str
    model: str
    external: list[tuple[str, str]] = field(default_factory=list)


class Page:
    """One tab of onnxruntime-web for one provider and thread count. Its sessions are loaded when first
    run, and again in a new tab after a crash."""

    def __init__(self, owner: Browser, query: str, runtime: str):
        self.browser, self.query, self.runtime = owner, query, runtime
        self.tab: Tab | None = None
        self.info: dict[str, Any] = {}
        self.loaded: dict[str, dict[str, Any]] = {}
        self.released: list[str] = []

    def live(self) -> Tab:
        """The tab, opened again (its sessions forgotten) when it crashed or stopped answering."""
        if self.tab is None or self.tab.crashed:
            if self.tab is not None:
                self.tab.close()
            self.tab, self.loaded, self.released = None, {}, []
            tab = self.browser.open(f"page/page.html?{self.query}")
            self.info = tab.evaluate("posexport.info()", START_SECONDS)
            self.info["browser"] = f"{self.browser.version.replace('/', ' ')} (headless, {self.browser.binary})"
            self.tab = tab
        return self.tab

    def call(self, function: str, *args: Any, seconds: float = RUN_SECONDS) -> Any:
        """``posexport.function(*args)`` in the tab (released sessions dropped first). A crash or a page
        that stops answering costs the tab: the next call opens a new one."""
        tab = self.live()
        try:
            if self.released:
                keys, self.released = self.released, []
                tab.evaluate(f"posexport.release({json.dumps(keys)})", RUN_SECONDS)
            return tab.evaluate(f"posexport.{function}({', '.join(json.dumps(a) for a in args)})", seconds)
        except PageError as e:  # onnxruntime-web's message, without its wrapping
            raise PageError(str(e).split("ERROR_MESSAGE: ")[-1]) from None
        except TabCrashed:
            raise TabCrashed(f"the {self.runtime} tab crashed while it ran posexport.{function} (its renderer "
                                 "process died: killed, crashed or out of memory)") from None
        except TimeoutError as e:
            tab.close()
            self.tab = None
            raise TimeoutError(f"the {self.runtime} tab did not finish posexport.{function}: {e}") from None

    def session(self, spec: Spec) -> dict[str, Any]:
        """The loaded session's names and node placements (loading it into this tab if need be)."""
        self.live()
        if spec.key not in self.loaded:
            self.loaded[spec.key] = self.call("load", spec.key, {"model": spec.model, "externalData": spec.external},
                                              seconds=LOAD_SECONDS)
        return self.loaded[spec.key]

    def run(self, spec: Spec, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.session(spec)
        server = self.browser.server
        feeds_path, out_path = server.put(pack(feeds)), server.slot()
        try:
            self.call("run", spec.key, feeds_path, out_path)
        finally:
            server.drop(feeds_path)
        return unpack(server.take(out_path))

    def bind(self, spec: Spec, feeds: Mapping[str, np.ndarray]) -> Bound:
        """The feeds held by the page; each call runs them (outputs kept there until ``outputs``)."""
        self.session(spec)
        server = self.browser.server
        bind_id = f"{spec.key}-bound-{os.urandom(4).hex()}"
        self.call("bind", spec.key, server.put(pack(feeds)), bind_id)

        def outputs() -> list[np.ndarray]:
            out_path = server.slot()
            self.call("boundOutputs", bind_id, out_path)
            return list(unpack(server.take(out_path)).values())

        bound = Bound(lambda: self.call("runBound", bind_id), outputs)
        weakref.finalize(bound, self.released.append, bind_id)
        return bound

    def release(self, spec: Spec) -> None:
        """Forget a session (done on the next call: never from inside another one)."""
        self.released.append(spec.key)
        for path in (spec.model, *(blob for _, blob in spec.external)):
            self.browser.server.drop(path)


PAGES: dict[tuple[str, str, int], Page] = {}  # (binary, query, pid)


class OrtWeb(Runtime):
    """onnxruntime-web with one provider in a headless Chromium. Named with --runtimes only (a browser starts
    in seconds, and onnxruntime-web may need installing): never in the default set."""

    provider: ClassVar[str]
    bundle: ClassVar[str]
    label: ClassVar[str]
    runs_by_default: ClassVar[bool] = False
    device: ClassVar[str] = "browser"  # its sessions compute in the page: host baselines are not timed beside them

    def __init__(self, browser: str | os.PathLike[str] | None = None):
        self.browser = str(browser) if browser is not None else None
        self.endpoint: str | None = None  # a parent process's browser (set when this runtime crosses to a child)

    def with_browser(self, path: str | os.PathLike[str]) -> OrtWeb:
        """The same runtime in the browser at ``path`` (--browser)."""
        return type(self)(path)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled for a child process (runtimes/isolated.py): it joins this process's browser if one runs."""
        state = dict(self.__dict__)
        binary, _ = find_browser(self.browser)
        mine = running(binary) if binary else None
        state["endpoint"] = mine.endpoint if mine else self.endpoint
        return state

    # --- the browser and the page ----------------------------------------------------------------------

    def page(self, threads: int = 0) -> Page:
        binary, why = find_browser(self.browser)
        if binary is None:
            raise BrowserError(why)
        dist, why = ort_web_dist()
        if dist is None:
            raise BrowserError(why)
        query = f"bundle={self.bundle}&provider={self.provider}&threads={threads}"
        key = (str(binary), query, os.getpid())
        owner = shared_browser(binary, {"ort": dist, "page": PAGE}, self.endpoint)
        if key not in PAGES or PAGES[key].browser is not owner:
            PAGES[key] = Page(owner, query, self.name)
        PAGES[key].live()
        return PAGES[key]

    def info(self) -> dict[str, Any]:
        """The page's info in this process ({} before the runtime was probed)."""
        binary, _ = find_browser(self.browser)
        prefix = f"bundle={self.bundle}&provider={self.provider}&"
        return next((p.info for (b, q, pid), p in PAGES.items() if (b, pid) == (str(binary), os.getpid()) and q.startswith(prefix)
                     and p.info), {})

    def probe(self) -> tuple[dict[str, Any] | None, str]:
        """The page's info (onnxruntime-web's version, threads, the adapter), or None and why not."""
        try:
            return self.page().info, ""
        except (BrowserError, PageError, TabCrashed, TimeoutError, OSError) as e:
            return None, one_line(e, 400)

    def available(self) -> tuple[bool, str]:
        info, why = self.probe()
        if info is None:
            return False, why
        return self.usable(info)

    def usable(self, info: Mapping[str, Any]) -> tuple[bool, str]:
        """(True, '') when the page can run this provider (WebGPU needs an adapter)."""
        return True, ""

    def backend(self, info: Mapping[str, Any]) -> str:
        """Where the provider computes, as the report names it (WebAssembly's threads, WebGPU's adapter)."""
        return self.label

    @property
    def description(self) -> str:  # type: ignore[override]
        info = self.info()
        if not info:
            return f"onnxruntime-web {pinned_version()}, {self.label}, in headless Chromium"
        return f"onnxruntime-web {info['web']}, {self.backend(info)}, in {info['browser']}"

    # --- graphs ----------------------------------------------------------------------------------------

    def supports(self, artifact: Artifact) -> tuple[bool, str]:
        return self.supports_types(artifact.model)

    def supports_types(self, model: onnx.ModelProto) -> tuple[bool, str]:
        """onnxruntime-web takes no bfloat16 tensors; float16 ones only where the provider can (float16_ok)."""
        def typed(elem: int) -> str:
            return ", ".join(v.name for v in [*model.graph.input, *model.graph.output][:4] if v.type.tensor_type.elem_type == elem)

        if typed(onnx.TensorProto.BFLOAT16):
            return False, f"onnxruntime-web has no bfloat16 tensors ({typed(onnx.TensorProto.BFLOAT16)} are bfloat16)"
        if typed(onnx.TensorProto.FLOAT16):
            return self.float16_ok()
        return True, ""

    def float16_ok(self) -> tuple[bool, str]:
        """(True, '') when the provider computes float16 tensors here (WebGPU: only on an adapter with shader-f16)."""
        return True, ""

    def caveats(self, artifact: Artifact) -> str:
        found = PLACEMENTS.get((self.name, hashlib.sha256(artifact.model_bytes).hexdigest()))
        return self.description + (f"; {found}" if found else "")

    def load(self, artifact: Artifact, options: SessionOptions = SessionOptions()) -> WebSession:
        return WebSession(self, artifact, options)

    # --- whole models ----------------------------------------------------------------------------------

    def supports_model(self, path: Path) -> tuple[bool, str]:
        model = guarded.load_model(path)
        total = guarded.file_size(path) + sum(t.length for t in guarded.external_data(model, path))
        if total > WASM_MEMORY:
            return False, (f"{path.name} and its external data are {total / (1 << 30):.1f} GiB: over the 4 GiB that "
                           "onnxruntime-web's WebAssembly memory can hold")
        return self.supports_types(model)

    def caveats_model(self, path: Path) -> str:
        return self.description

    def load_model(self, path: Path, options: SessionOptions = SessionOptions()) -> WebModelSession:
        return WebModelSession(self, path, options)


PLACEMENTS: dict[tuple[str, str], str] = {}  # (runtime, sha256 of the graph) -> where its nodes ran


def placements_line(placed: Mapping[str, Any]) -> str:
    """'nodes: 15 on WebGpuExecutionProvider (RotaryEmbedding, Reshape×4, …), 14 on CPUExecutionProvider (…)'."""
    parts = []
    for provider, found in sorted(placed.items(), key=lambda kv: kv[0].startswith("CPU")):
        ops = sorted(found["ops"].items(), key=lambda kv: (-kv[1], kv[0]))
        shown = ", ".join(f"{op}×{n}" if n > 1 else op for op, n in ops[:8]) + (", …" if len(ops) > 8 else "")
        parts.append(f"{found['nodes']} on {provider}" + (f" ({shown})" if shown else ""))
    return f"nodes: {'; '.join(parts)}" if parts else ""


class WebSession(Session):
    """A built graph in the runtime's tab; ``run`` returns its one output in the graph's dtype."""

    def __init__(self, runtime: OrtWeb, artifact: Artifact, options: SessionOptions):
        self.page = runtime.page(options.threads)
        self.artifact = artifact
        model = artifact.model_bytes
        self.spec = Spec(os.urandom(8).hex(), self.page.browser.server.put(model, keep=True))
        self.output = artifact.model.graph.output[0].name
        self.placements = placements_line(self.page.session(self.spec)["placements"])
        PLACEMENTS[(runtime.name, hashlib.sha256(model).hexdigest())] = self.placements
        weakref.finalize(self, self.page.release, self.spec)

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        return self.page.run(self.spec, feeds)[self.output]

    def bind(self, feeds: Mapping[str, np.ndarray]) -> Bound:
        """The page's bound run; it holds this session, which is released once neither is used."""
        bound = self.page.bind(self.spec, feeds)
        return Bound(lambda: bound() if self else None, bound.outputs)


class WebModelSession(ModelSession):
    """A whole model from its path: the model file and the external data it names, served as they are."""

    def __init__(self, runtime: OrtWeb, path: Path, options: SessionOptions):
        self.page = runtime.page(options.threads)
        server = self.page.browser.server
        external = guarded.external_data(guarded.load_model(path), path)
        locations = {t.location: t.path for t in external}
        self.spec = Spec(os.urandom(8).hex(), server.put(Path(path), keep=True),
                         [(location, server.put(found, keep=True)) for location, found in locations.items()])
        self.placements = placements_line(self.page.session(self.spec)["placements"])
        weakref.finalize(self, self.page.release, self.spec)

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.page.run(self.spec, feeds)
