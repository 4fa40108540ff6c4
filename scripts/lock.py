"""Write the locks: locks/NAME.txt, every package of one environment at an exact version with the sha256 of the file
pip chose, for the CPython and platform this runs on (CI's: CPython 3.11 on linux x86_64).

    python3 scripts/lock.py            # every environment (make lock)
    python3 scripts/lock.py optimum    # one

Each environment's inputs are here and nowhere else: the project with its test extras (its own ranges stay ranges
in pyproject.toml), and the exporters whose pins clash with the project's (.venvs/NAME, scripts/exporter-venv.sh).
pip resolves the newest releases those inputs allow, as a fresh install would today, in a dry run
(`pip install --dry-run --report`), and this script writes what it chose. `make install`, `make exporter-venvs` and
the wheel smoke then install exactly that, hash-checked (`pip install --require-hashes --no-deps`).
scripts/upstream.py resolves the same inputs without the lock, to report what the next lock would change.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCKS = ROOT / "locks"
# The CPU build of torch that this machine kind keeps on disk; without the pin pip resolves a multi-GB CUDA build.
TORCH = os.environ.get("TORCH", "torch==2.13.0")


@dataclass(frozen=True)
class Environment:
    purpose: str
    requirements: tuple[str, ...]  # pip requirement strings; "." is this project (installed apart, never locked)


ENVIRONMENTS = {
    # pip and setuptools are locked too: the project installs editable without build isolation from the lock.
    "project": Environment("the project's .venv: posexport's dependencies with its test extras",
                           (TORCH, ".[test]", "pip", "setuptools")),
    # optimum-onnx 0.1 pins transformers < 4.58; the models it exports are configured in the 4.x spelling.
    "optimum": Environment("the optimum-onnx exporter's .venvs/optimum",
                           (TORCH, "optimum-onnx==0.1.0", "transformers==4.57.*", "onnx", "onnxruntime", "pip")),
    "mobius": Environment("the mobius-onnx exporter's .venvs/mobius", (TORCH, "mobius-onnx==0.1.0", "transformers", "pip")),
}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def resolve(python: str, requirements: tuple[str, ...]) -> list[dict]:
    """pip's report of what a fresh install of these requirements takes today (nothing is installed)."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        subprocess.run([python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report",
                        str(report), *requirements], cwd=ROOT, check=True)
        return json.loads(report.read_text())["install"]


def lock_lines(installed: list[dict]) -> list[str]:
    """`name==version --hash=sha256:…` per package, sorted by name; the project itself is left out."""
    lines = []
    for item in sorted(installed, key=lambda i: canonical(i["metadata"]["name"])):
        info = item["download_info"]
        if "dir_info" in info:  # this project, installed from its folder
            continue
        digest = info.get("archive_info", {}).get("hashes", {}).get("sha256")
        if not digest:
            raise SystemExit(f"error: pip gave no sha256 for {item['metadata']['name']} ({info.get('url')}); "
                             "a lock needs one for every file")
        lines.append(f"{canonical(item['metadata']['name'])}=={item['metadata']['version']} \\\n"
                     f"    --hash=sha256:{digest}")
    return lines


def write_lock(name: str, python: str) -> Path:
    environment = ENVIRONMENTS[name]
    lines = lock_lines(resolve(python, environment.requirements))
    header = [f"# locks/{name}.txt: {environment.purpose}.",
              f"# Inputs: {' '.join(environment.requirements)}",
              f"# Resolved for CPython {sys.version_info.major}.{sys.version_info.minor} on {sys.platform} "
              f"{os.uname().machine}. Written by `make lock` (scripts/lock.py); do not edit by hand.",
              f"# Install: pip install --require-hashes --no-deps -r locks/{name}.txt"]
    path = LOCKS / f"{name}.txt"
    path.parent.mkdir(exist_ok=True)
    path.write_text("\n".join([*header, *lines]) + "\n")
    return path


def main(names: list[str]) -> None:
    unknown = [n for n in names if n not in ENVIRONMENTS]
    if unknown:
        raise SystemExit(f"error: no environment {unknown[0]!r}; choose from {', '.join(ENVIRONMENTS)}")
    with tempfile.TemporaryDirectory() as scratch:
        # A fresh venv with today's pip: the resolver a user's fresh install would run.
        subprocess.run([sys.executable, "-m", "venv", scratch], check=True)
        python = str(Path(scratch) / "bin" / "python")
        subprocess.run([python, "-m", "pip", "install", "--quiet", "--upgrade", "pip"], check=True)
        for name in names or list(ENVIRONMENTS):
            print(f"locked {write_lock(name, python).relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:])
