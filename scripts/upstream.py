"""`make upstream`: what the next lock would change, as a report. Never part of CI's gate.

    python3 scripts/upstream.py --work build/upstream

In scratch venvs under --work it installs the newest releases that each environment's inputs allow (the inputs of
scripts/lock.py, without the lock), then runs, with POSEXPORT_TEST_ALL=1:
- the catalogue walk (every model type of the newest transformers sorted, read and judged against its code);
- the exporter fixtures (optimum and mobius from their scratch venvs, transformers' exporters, genai, dynamo);
- the README's and docs' commands;
and writes --work/drift.md and drift.json: the packages whose newest release differs from the lock, the model types
that are new or gone, the readings, exporters and docs commands that broke, each with its first error line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lock import ENVIRONMENTS, LOCKS, ROOT, canonical  # noqa: E402

# Test groups run in the project's scratch venv: (name, what a failure there means, test file patterns).
GROUPS = (
    ("catalogue", "a model type whose reading broke",
     ("tests/test_models_*.py", "tests/models/test_*.py", "tests/test_upstream.py")),
    ("exporters", "an exporter whose output posexport no longer finds or fixes",
     ("tests/test_surgery_*.py", "tests/test_doctor_*.py")),
    ("docs", "a README or docs command that no longer runs as written",
     ("tests/test_readme.py", "tests/test_docs_commands.py")),
)
SURVEY = """
import json
from transformers import CONFIG_MAPPING
from posexport.models import READERS, pending
from posexport.models.catalogue import unknown_types
from posexport.upstream import CHECKED_TRANSFORMERS, installed_transformers
known = set(READERS) | set(pending.NOT_YET) | set(pending.NO_POSITIONS)
print(json.dumps({"transformers": installed_transformers(), "checked": CHECKED_TRANSFORMERS,
                  "new": unknown_types(), "gone": sorted(known - set(CONFIG_MAPPING.keys()))}))
"""


def venv(path: Path, requirements: tuple[str, ...]) -> Path:
    """A fresh venv with the newest releases these requirements allow; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(path)], check=True)
    python = path / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *requirements], cwd=ROOT, check=True)
    return python


def versions(python: Path) -> dict[str, str]:
    frozen = subprocess.run([str(python), "-m", "pip", "list", "--format", "json"], capture_output=True, text=True, check=True)
    return {canonical(p["name"]): p["version"] for p in json.loads(frozen.stdout) if canonical(p["name"]) != "posexport"}


def locked(name: str) -> dict[str, str]:
    return {canonical(m.group(1)): m.group(2)
            for m in re.finditer(r"^([A-Za-z0-9._-]+)==(\S+) ", (LOCKS / f"{name}.txt").read_text(), re.MULTILINE)}


def version_drift(lock: dict[str, str], newest: dict[str, str]) -> list[dict[str, str | None]]:
    """Packages whose newest release differs from the lock (None: absent on that side)."""
    return [{"package": p, "locked": lock.get(p), "newest": newest.get(p)}
            for p in sorted(set(lock) | set(newest)) if lock.get(p) != newest.get(p)]


def failures(junit: Path) -> list[dict[str, str]]:
    """Each failed or erroring test case of a JUnit XML file: its id and the first line of its message."""
    broken = []
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        for outcome in ("failure", "error"):
            found = case.find(outcome)
            if found is not None:
                message = (found.get("message") or found.text or "").strip().splitlines()
                broken.append({"test": f"{case.get('classname')}::{case.get('name')}",
                               "error": message[0][:300] if message else outcome})
    return broken


def run_group(python: Path, patterns: tuple[str, ...], junit: Path, env: dict[str, str]) -> list[dict[str, str]]:
    files = sorted(str(f.relative_to(ROOT)) for pattern in patterns for f in ROOT.glob(pattern))
    subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", *files],
                   cwd=ROOT, env=env, check=False)
    return failures(junit) if junit.exists() else [{"test": " ".join(files), "error": "pytest wrote no report"}]


def render(drift: dict) -> str:
    """drift.md: versions, model types, then each group's broken tests."""
    survey = drift["catalogue"]
    lines = ["# Upstream drift", "",
             f"Newest releases against the locks, made by `make upstream`. transformers: locked {survey['checked']}, "
             f"newest {survey['transformers']}. Next lock: `make lock`, then the suite (`make test-all`).", "",
             "## Packages", "", "| environment | package | locked | newest |", "|---|---|---|---|"]
    lines += [f"| {env} | {d['package']} | {d['locked'] or '—'} | {d['newest'] or '—'} |"
              for env, rows in drift["versions"].items() for d in rows] or ["| — | no package moved | | |"]
    lines += ["", "## Model types", "", f"New in transformers {survey['transformers']} (read or pend each): "
              f"{', '.join(survey['new']) or 'none'}.", "",
              f"Gone from it (drop from the catalogue): {', '.join(survey['gone']) or 'none'}."]
    for name, meaning, _ in GROUPS:
        broken = drift["broken"][name]
        lines += ["", f"## {name}: {len(broken)} broken ({meaning})", ""]
        lines += [f"- `{b['test']}`: {b['error']}" for b in broken] or ["Nothing broke."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "upstream")
    work = parser.parse_args().work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    pythons = {name: venv(work / name, env.requirements) for name, env in ENVIRONMENTS.items()}
    drift = {"versions": {name: version_drift(locked(name), versions(python)) for name, python in pythons.items()}}
    survey = subprocess.run([str(pythons["project"]), "-c", SURVEY], cwd=ROOT, capture_output=True, text=True, check=True)
    drift["catalogue"] = json.loads(survey.stdout.strip().splitlines()[-1])
    env = {**os.environ, "POSEXPORT_TEST_ALL": "1", "POSEXPORT_OPTIMUM_PYTHON": str(pythons["optimum"]),
           "POSEXPORT_MOBIUS": str(work / "mobius" / "bin" / "mobius")}
    drift["broken"] = {name: run_group(pythons["project"], files, work / f"junit-{name}.xml", env)
                       for name, _, files in GROUPS}
    (work / "drift.json").write_text(json.dumps(drift, indent=1) + "\n")
    (work / "drift.md").write_text(render(drift))
    print(f"wrote {work / 'drift.md'} and drift.json")


if __name__ == "__main__":
    main()
