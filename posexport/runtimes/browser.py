"""A headless Chromium driven through the DevTools protocol (CDP), for the runtimes that run in a browser.

- The browser is the system's (Debian's ``chromium``, or ``--browser PATH``); nothing downloads one.
- It starts headless in a fresh profile with its background networking off (a closed network refuses
  those connections), in a process group of its own, with PR_SET_PDEATHSIG: it dies with the process that
  started it, even when that one is killed. A normal exit, or Ctrl-C, closes it and kills its group.
- CDP is spoken over the browser's websocket on 127.0.0.1 (a port the OS picks) by the small client
  below (RFC 6455 text frames; the standard library only). Whole models run in child processes
  (runtimes/isolated.py): a child is given the websocket's address and opens its tabs in the same
  browser, in a browser context that Chromium disposes of when the child's connection closes.
- Pages come from a server on 127.0.0.1 (a port the OS picks, every path under a random token) that
  serves static folders and one-shot blobs: tensors cross as raw bytes, never as JSON numbers.

One browser serves every case of a process (per browser binary) and is closed at exit (``close_all``).
A tab that crashes (renderer killed, out of memory) raises ``TabCrashed``; the next use opens a new one.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import ctypes
import functools
import json
import os
import queue
import re
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless=new", "--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--no-first-run", "--no-default-browser-check", "--disable-default-apps", "--mute-audio", "--disable-breakpad",
    # WebGPU off Chrome's allow-list (Linux): a GPU's adapter where there is one, else SwiftShader's.
    "--enable-unsafe-webgpu",
)
START_SECONDS = 60  # from launch to the DevTools endpoint's line
CALL_SECONDS = 60  # a CDP call that is not a page's long evaluation
FIX = "install it (apt-get install -y chromium) or name a Chromium or Chrome binary with --browser PATH"
PR_SET_PDEATHSIG = 1


class BrowserError(RuntimeError):
    """The browser could not start, or its DevTools connection broke."""


class TabCrashed(RuntimeError):
    """The page's renderer died (killed, crashed, out of memory) while posexport waited on it."""


class PageError(RuntimeError):
    """The page threw: the message is the JavaScript error's (a runtime's own error, say)."""


def find_browser(path: str | os.PathLike[str] | None = None) -> tuple[Path | None, str]:
    """(the binary, '') or (None, why not): ``path`` as given, else the first of NAMES on PATH."""
    if path is not None:
        found = shutil.which(str(path))
        if found is None:
            state = "is not executable" if Path(path).exists() else "does not exist"
            return None, f"browser {path} {state}; {FIX}"
        return Path(found), ""
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return Path(found), ""
    return None, f"no Chromium found ({', '.join(NAMES)} are not on PATH); {FIX}"


# --- the websocket: RFC 6455, client side, text frames ----------------------------------------------


def masked(data: bytes, mask: bytes) -> bytes:
    key = (mask * (len(data) // 4 + 1))[: len(data)]
    return (int.from_bytes(data, "little") ^ int.from_bytes(key, "little")).to_bytes(len(data), "little")


class WebSocket:
    def __init__(self, url: str):
        parts = urllib.parse.urlsplit(url)
        self.sock = socket.create_connection((parts.hostname, parts.port), timeout=CALL_SECONDS)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {parts.path} HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            self.fill(time.monotonic() + CALL_SECONDS)
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise BrowserError(f"the DevTools endpoint refused the websocket: {head.splitlines()[0].decode(errors='replace')}")

    def fill(self, deadline: float) -> None:
        self.sock.settimeout(max(deadline - time.monotonic(), 0.001))
        try:
            chunk = self.sock.recv(1 << 20)
        except socket.timeout:
            raise TimeoutError from None
        if not chunk:
            raise EOFError("the browser closed its DevTools connection")
        self.buffer += chunk

    def frame(self) -> tuple[int, int, bytes] | None:
        """(first byte, length, payload) of the whole frame at the buffer's start, or None while it is partial:
        a wait that times out leaves the stream where it was."""
        data = self.buffer
        if len(data) < 2:
            return None
        n, head = data[1] & 0x7F, 2
        if n >= 126:
            head = 4 if n == 126 else 10
            if len(data) < head:
                return None
            n = struct.unpack(">H" if n == 126 else ">Q", data[2:head])[0]
        return (data[0], head + n, data[head:head + n]) if len(data) >= head + n else None

    def send(self, text: str, opcode: int = 0x1) -> None:
        data, mask = text.encode(), os.urandom(4)
        n = len(data)
        length = bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack(">H", n) if n < 1 << 16 else \
            bytes([0x80 | 127]) + struct.pack(">Q", n)
        self.sock.sendall(bytes([0x80 | opcode]) + length + mask + masked(data, mask))

    def receive(self, deadline: float) -> str:
        """The next whole text message (pings answered, fragments joined); TimeoutError past ``deadline``."""
        parts = []
        while True:
            while (found := self.frame()) is None:
                self.fill(deadline)
            first, length, payload = found
            self.buffer = self.buffer[length:]
            opcode = first & 0x0F
            if opcode == 0x8:
                raise EOFError("the browser closed its DevTools connection")
            if opcode == 0x9:
                self.send(payload.decode(errors="replace"), 0xA)
            elif opcode in (0x0, 0x1, 0x2):
                parts.append(payload)
                if first & 0x80:
                    return b"".join(parts).decode()

    def close(self) -> None:
        self.sock.close()


# --- the DevTools protocol ---------------------------------------------------------------------------


class Cdp:
    """One DevTools connection: calls wait for their answer; events are kept for ``wait_event``, and a
    crash of a watched tab's renderer ends any wait on that tab with TabCrashed."""

    def __init__(self, endpoint: str):
        try:
            self.ws = WebSocket(endpoint)
        except (OSError, EOFError, TimeoutError) as e:
            raise BrowserError(f"cannot reach the browser's DevTools endpoint {endpoint}: {e}") from None
        self.next_id = 0
        self.events: deque[dict[str, Any]] = deque(maxlen=256)
        self.crashed: set[str] = set()
        self.broken = False

    def message(self, deadline: float, session: str | None) -> dict[str, Any]:
        if session in self.crashed:
            raise TabCrashed("its renderer process died")
        try:
            msg = json.loads(self.ws.receive(deadline))
        except (OSError, EOFError) as e:
            self.broken = True
            raise BrowserError(f"the browser's DevTools connection broke: {e}") from None
        method, where = msg.get("method"), msg.get("sessionId")
        if method == "Inspector.targetCrashed" or (method == "Target.detachedFromTarget" and msg["params"].get("sessionId")):
            self.crashed.add(where or msg["params"]["sessionId"])
        elif method:
            self.events.append(msg)
        return msg

    def call(self, method: str, params: Mapping[str, Any] | None = None, session: str | None = None,
             seconds: float = CALL_SECONDS) -> dict[str, Any]:
        self.next_id += 1
        request: dict[str, Any] = {"id": self.next_id, "method": method, "params": dict(params or {})}
        if session:
            request["sessionId"] = session
        try:
            self.ws.send(json.dumps(request))
        except OSError as e:
            self.broken = True
            raise BrowserError(f"the browser's DevTools connection broke: {e}") from None
        deadline = time.monotonic() + seconds
        while True:
            msg = self.message(deadline, session)
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise BrowserError(f"{method}: {msg['error'].get('message')} {msg['error'].get('data', '')}".strip())
                return msg["result"]

    def wait_event(self, method: str, session: str, seconds: float) -> dict[str, Any]:
        deadline = time.monotonic() + seconds
        while True:
            for msg in self.events:
                if msg["method"] == method and msg.get("sessionId") == session:
                    self.events.remove(msg)
                    return msg
            self.message(deadline, session)

    def close(self) -> None:
        self.ws.close()


class Tab:
    """A page in the browser: opened on ``url``, ready once its load event fired."""

    def __init__(self, cdp: Cdp, context: str, url: str):
        self.cdp = cdp
        self.target = cdp.call("Target.createTarget", {"url": "about:blank", "browserContextId": context})["targetId"]
        self.session = cdp.call("Target.attachToTarget", {"targetId": self.target, "flatten": True})["sessionId"]
        for domain in ("Inspector", "Page"):
            cdp.call(f"{domain}.enable", session=self.session)
        navigated = cdp.call("Page.navigate", {"url": url}, session=self.session)
        if navigated.get("errorText"):
            raise BrowserError(f"the page {url} did not load: {navigated['errorText']}")
        cdp.wait_event("Page.loadEventFired", self.session, START_SECONDS)

    @property
    def crashed(self) -> bool:
        return self.session in self.cdp.crashed

    def evaluate(self, expression: str, seconds: float) -> Any:
        """The value of ``expression`` (a promise is awaited), as JSON; a thrown error is a PageError."""
        try:
            reply = self.cdp.call("Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True},
                                  self.session, seconds)
        except TimeoutError:
            raise TimeoutError(f"the page did not answer within {seconds:g} s") from None
        if "exceptionDetails" in reply:
            details = reply["exceptionDetails"]
            thrown = details.get("exception", {}).get("description") or details.get("text", "the page threw")
            raise PageError(thrown.split("\n    at ")[0])  # the message, not the JavaScript stack
        return reply["result"].get("value")

    def close(self) -> None:
        """Close the page (a crashed one too); a browser that is gone has nothing left to close."""
        with contextlib.suppress(BrowserError, TimeoutError):
            self.cdp.call("Target.closeTarget", {"targetId": self.target})


# --- the page server ---------------------------------------------------------------------------------


class PageServer:
    """Static folders and one-shot blobs on 127.0.0.1, every path under a random token; cross-origin
    isolated (COOP/COEP), so that a page may use SharedArrayBuffer (WebAssembly threads)."""

    TYPES = {".html": "text/html", ".mjs": "text/javascript", ".js": "text/javascript", ".wasm": "application/wasm",
             ".json": "application/json"}

    def __init__(self, folders: Mapping[str, Path]):
        self.folders = dict(folders)
        self.token = secrets.token_urlsafe(16)
        self.blobs: dict[str, bytes | Path] = {}
        self.posted: dict[str, bytes] = {}
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, self))
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, name="posexport page server", daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}/{self.token}/{path}"

    def put(self, content: bytes | Path, keep: bool = False) -> str:
        """A blob's path (served once, or until ``drop`` when ``keep``): bytes, or a file streamed as it is."""
        key = ("keep-" if keep else "") + secrets.token_hex(8)
        with self.lock:
            self.blobs[key] = content
        return f"blob/{key}"

    def slot(self) -> str:
        """A fresh blob path for the page to POST to (read with ``take``)."""
        return f"blob/{secrets.token_hex(8)}"

    def drop(self, path: str) -> None:
        with self.lock:
            self.blobs.pop(path.removeprefix("blob/"), None)

    def take(self, path: str) -> bytes:
        """What the page POSTed to ``path`` (KeyError when it posted nothing)."""
        with self.lock:
            return self.posted.pop(path.removeprefix("blob/"))

    def resolve(self, rest: str) -> bytes | Path | None:
        folder, _, name = rest.partition("/")
        if folder == "blob":
            with self.lock:
                return self.blobs.get(name) if name.startswith("keep-") else self.blobs.pop(name, None)
        root = self.folders.get(folder)
        if root is None or not re.fullmatch(r"[\w.-]+", name) or name.startswith("."):
            return None  # one level of plain names: nothing outside the folders is ever reachable
        path = root / name
        return path if path.is_file() else None

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Handler(BaseHTTPRequestHandler):
    def __init__(self, server: PageServer, *args: Any):
        self.pages = server
        super().__init__(*args)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def route(self) -> str | None:
        token, _, rest = urllib.parse.urlsplit(self.path).path.lstrip("/").partition("/")
        return rest if secrets.compare_digest(token, self.pages.token) else None

    def do_GET(self) -> None:
        rest = self.route()
        found = self.pages.resolve(rest) if rest is not None else None
        if found is None:
            self.send_error(404)
            return
        size = found.stat().st_size if isinstance(found, Path) else len(found)
        self.send_response(200)
        self.send_header("Content-Type", PageServer.TYPES.get(Path(rest).suffix, "application/octet-stream"))
        self.send_header("Content-Length", str(size))
        self.end_headers()
        if isinstance(found, bytes):
            self.wfile.write(found)
            return
        with open(found, "rb") as f:
            shutil.copyfileobj(f, self.wfile, 1 << 20)

    def do_POST(self) -> None:
        rest = self.route()
        if rest is None or not rest.startswith("blob/"):
            self.send_error(404)
            return
        data = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with self.pages.lock:
            self.pages.posted[rest.removeprefix("blob/")] = data
        self.send_response(204)
        self.end_headers()

    def end_headers(self) -> None:
        for header, value in (("Cross-Origin-Opener-Policy", "same-origin"), ("Cross-Origin-Embedder-Policy", "require-corp"),
                              ("Cross-Origin-Resource-Policy", "same-origin"), ("Cache-Control", "no-store")):
            self.send_header(header, value)
        super().end_headers()


# --- the browser process -----------------------------------------------------------------------------


def dies_with_parent() -> Callable[[], None] | None:
    """The child's set-up before exec: SIGKILL when its parent dies (Linux). PR_SET_PDEATHSIG survives the
    exec of Debian's launcher script into the browser; it fires when the thread that started the browser
    ends, so a browser is started from the thread that will use it (the main one, in posexport)."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)

    return arm


PROFILE = "posexport-chromium-"


def remove_stale_profiles() -> list[Path]:
    """Remove the profiles of browsers whose process is gone without closing them (killed: SIGKILL leaves no
    time to), known by the pid in their name; returns what was removed."""
    removed = []
    for folder in Path(tempfile.gettempdir()).glob(f"{PROFILE}*"):
        pid = folder.name.removeprefix(PROFILE).split("-")[0]
        if not pid.isdigit() or folder.stat().st_uid != os.getuid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
        except PermissionError:
            continue
    return removed


class Chromium:
    """The browser process: launched headless on a fresh profile, its DevTools endpoint read from stderr."""

    def __init__(self, binary: Path):
        remove_stale_profiles()
        self.profile = tempfile.mkdtemp(prefix=f"{PROFILE}{os.getpid()}-")
        command = [str(binary), *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-address=127.0.0.1",
                   "--remote-debugging-port=0", "about:blank"]
        # Its home is the profile too: what Chromium writes there (crash reports, dconf) goes when the profile goes.
        home = {"HOME": self.profile, "XDG_CONFIG_HOME": f"{self.profile}/.config", "XDG_CACHE_HOME": f"{self.profile}/.cache"}
        try:
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                            env={**os.environ, **home}, start_new_session=True, preexec_fn=dies_with_parent())
        except OSError as e:
            shutil.rmtree(self.profile, ignore_errors=True)
            raise BrowserError(f"cannot start {binary}: {e}") from None
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.tail: deque[str] = deque(maxlen=20)
        threading.Thread(target=self.drain, name="posexport browser stderr", daemon=True).start()
        self.endpoint = self.wait_for_endpoint(binary)

    def drain(self) -> None:
        """Read the browser's stderr to its end (a full pipe would stall it), the lines kept for errors."""
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            line = raw.decode(errors="replace").strip()
            self.tail.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def wait_for_endpoint(self, binary: Path) -> str:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                break
            if line is None:
                self.close()
                last = "; ".join(line for line in list(self.tail)[-3:] if line)
                raise BrowserError(f"{binary} exited at start ({self.process.returncode}): {last or 'no output'}")
            found = re.search(r"DevTools listening on (ws://\S+)", line)
            if found:
                return found.group(1)
        self.close()
        raise BrowserError(f"{binary} did not open its DevTools endpoint within {START_SECONDS} s")

    def close(self) -> None:
        """End the browser: SIGTERM to it (it ends its helpers), then SIGKILL to whatever of its process group
        is left; then remove its profile."""
        with contextlib.suppress(ProcessLookupError):
            self.process.terminate()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


class Browser:
    """What a process holds of one browser: the process (when this process started it), a DevTools
    connection, a browser context disposed of when that connection closes, and a page server."""

    def __init__(self, binary: Path, endpoint: str | None, folders: Mapping[str, Path]):
        self.binary = binary
        self.chromium = Chromium(binary) if endpoint is None else None
        self.endpoint = endpoint or self.chromium.endpoint  # type: ignore[union-attr]
        try:
            self.cdp = Cdp(self.endpoint)
            self.version = self.cdp.call("Browser.getVersion")["product"]
            self.context = self.cdp.call("Target.createBrowserContext", {"disposeOnDetach": True})["browserContextId"]
            self.server = PageServer(folders)
        except BaseException:
            self.close()
            raise

    @property
    def alive(self) -> bool:
        return not self.cdp.broken and (self.chromium is None or self.chromium.process.poll() is None)

    def open(self, page: str) -> Tab:
        return Tab(self.cdp, self.context, self.server.url(page))

    def close(self) -> None:
        for part in ("server", "cdp"):
            if hasattr(self, part):
                getattr(self, part).close()
        if self.chromium is not None:
            self.chromium.close()


BROWSERS: dict[tuple[str, int], Browser] = {}  # (binary, pid): a forked child never uses its parent's


def shared_browser(binary: Path, folders: Mapping[str, Path], endpoint: str | None = None) -> Browser:
    """This process's browser for ``binary``: started here, or, given ``endpoint`` (a parent's, say),
    connected to; the same one for every later call."""
    key = (str(binary), os.getpid())
    if key in BROWSERS and not BROWSERS[key].alive:
        close(binary)
    if key not in BROWSERS:
        BROWSERS[key] = Browser(binary, endpoint, folders)
    return BROWSERS[key]


def running(binary: Path) -> Browser | None:
    return BROWSERS.get((str(binary), os.getpid()))


def close(binary: Path) -> None:
    """Close this process's browser for ``binary`` (started here: the process group ends)."""
    found = BROWSERS.pop((str(binary), os.getpid()), None)
    if found is not None:
        found.close()


@atexit.register
def close_all() -> None:
    """Every browser this process started or connected to, closed (at exit, and on Ctrl-C's way out)."""
    for binary, pid in list(BROWSERS):
        if pid == os.getpid():
            close(Path(binary))
