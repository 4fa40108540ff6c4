"""posexport on a transformers release other than the one its catalogue was checked against (the lock's): a model
type it does not know and transformers code that moved are each one line naming both versions, never a
traceback; and the checked version is the lock's."""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("transformers")

from posexport.errors import PosexportError  # noqa: E402
from posexport.upstream import CHECKED_TRANSFORMERS, installed_transformers, transformers_attr  # noqa: E402

import zoo  # noqa: E402
from .conftest import ROOT, posexport_cli  # noqa: E402

PROBE = "posexport_probe"


def locked_version(package: str, lock: str = "project") -> str:
    found = re.search(rf"^{package}==(\S+) ", (ROOT / "locks" / f"{lock}.txt").read_text(), re.MULTILINE)
    assert found, f"{package} is not in locks/{lock}.txt"
    return found.group(1)


def test_the_catalogue_was_checked_against_the_locked_transformers():
    assert CHECKED_TRANSFORMERS == locked_version("transformers")


@pytest.fixture
def new_type_folder(tmp_path):
    """A model folder whose model_type the installed transformers registers (as a release newer than the lock
    would) and posexport's catalogue does not know."""
    from transformers import CONFIG_MAPPING, AutoConfig, PreTrainedConfig

    class ProbeConfig(PreTrainedConfig):
        model_type = PROBE

    AutoConfig.register(PROBE, ProbeConfig)
    folder = tmp_path / "probe"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": PROBE, "rope_theta": 10000.0, "hidden_size": 64,
                                                    "num_attention_heads": 4}))
    yield folder
    CONFIG_MAPPING._extra_content.pop(PROBE, None)


def one_error_line(result, *fragments: str) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def test_a_model_type_new_to_posexport_is_one_line_naming_both_versions(new_type_folder, tmp_path):
    both = (f"'{PROBE}' is new to posexport", f"transformers {installed_transformers()} registers it",
            f"checked against transformers {CHECKED_TRANSFORMERS}")
    one_error_line(posexport_cli("build", "--from-model", new_type_folder, "--out", tmp_path / "out"), *both)
    posexport_cli("build", "--encoding", "rope", "--head-dim", "16", "--heads", "4", "--out", tmp_path / "g", check=True)
    one_error_line(posexport_cli("parity", "--from-model", new_type_folder, tmp_path / "g" / "rope.onnx"), *both)


def test_transformers_code_that_moved_is_one_line_naming_the_piece():
    """transformers 5.25 replaced HY-V4's apply_rotary_pos_emb (5.24's half-split rotation) by
    apply_rotary_pos_emb_interleave: the 5.24 name is what a moved function looks like."""
    with pytest.raises(PosexportError, match="has no apply_rotary_pos_emb: transformers moved") as moved:
        transformers_attr("transformers.models.hy_v4.modeling_hy_v4", "apply_rotary_pos_emb")
    with pytest.raises(PosexportError, match="cannot be imported") as gone:
        transformers_attr("transformers.models.not_a_model.modeling_not_a_model", "NotARotaryEmbedding")
    for caught in (moved, gone):
        assert "\n" not in str(caught.value) and f"transformers=={CHECKED_TRANSFORMERS}" in str(caught.value)
    assert transformers_attr("transformers.models.hy_v4.modeling_hy_v4", "apply_rotary_pos_emb_interleave")


def test_parity_on_a_recipe_whose_transformers_code_moved_is_one_line(tmp_path):
    """A graph built --from-model under a release whose HY-V4 rotated half-split (its manifest names 5.24's
    apply_rotary_pos_emb), judged by the hf runtime on 5.25: the runtime's row is one line naming the missing
    function, and with nothing compared the run fails (exit 1)."""
    folder = zoo.tiny("hy_v4", tmp_path / "hy_v4")
    posexport_cli("build", "--from-model", folder, "--out", tmp_path / "g", "--backend", "portable", check=True)
    manifest_path = next((tmp_path / "g").glob("*.json"))
    manifest = json.loads(manifest_path.read_text())
    manifest["model"]["hf"]["apply"] = "apply_rotary_pos_emb"
    manifest_path.write_text(json.dumps(manifest))
    result = posexport_cli("parity", manifest_path.with_suffix(".onnx"), "--runtimes", "hf")
    assert result.returncode == 1 and "Traceback" not in result.stdout + result.stderr
    row = next(line for line in result.stdout.splitlines() if line.startswith("hf unavailable: "))
    assert "has no apply_rotary_pos_emb" in row and f"transformers=={CHECKED_TRANSFORMERS}" in row, row


def test_list_models_names_the_checked_version_and_the_unknown_types(new_type_folder):
    out = posexport_cli("list", "--models", check=True).stdout
    assert f"checked against the installed transformers {CHECKED_TRANSFORMERS}" in out
    assert re.search(rf"1 of its model types is unknown to posexport's catalogue: {PROBE}\b", out), out[-400:]


def test_recorded_benchmark_pages_were_made_with_the_lock():
    """benchmarks/*.md name their environment by the lock (benchmarks/README.md): each Versions line's packages at
    the lock's versions."""
    pages = sorted((ROOT / "benchmarks").glob("*.md"))
    lines = {page.name: line for page in pages for line in page.read_text().splitlines() if line.startswith("Versions: ")}
    assert lines, "no recorded page states its versions"
    for page, line in lines.items():
        for package, version in re.findall(r"([a-z0-9_.-]+) ([0-9][^,\s]*)", line.removeprefix("Versions: ")):
            if package != "posexport":
                assert version == locked_version(package), f"benchmarks/{page}: {package} {version} is not the lock's"


def test_the_drift_report_names_what_broke_and_what_moved(tmp_path):
    """scripts/upstream.py's report on a real pytest run with one failing test: the failure named with its first
    line, a moved package and a new model type listed (and a clean group says nothing broke)."""
    import importlib.util
    import subprocess
    import sys

    spec = importlib.util.spec_from_file_location("upstream_script", ROOT / "scripts" / "upstream.py")
    upstream = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(upstream)
    (tmp_path / "test_probe.py").write_text("def test_reads():\n    assert True\n\n"
                                           "def test_moved():\n    raise AttributeError('no apply_rotary_pos_emb')\n")
    junit = tmp_path / "junit.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
                    str(tmp_path / "test_probe.py")], cwd=tmp_path, capture_output=True, check=False)
    broken = upstream.failures(junit)
    assert [b["test"].rsplit("::", 1)[1] for b in broken] == ["test_moved"]
    assert "no apply_rotary_pos_emb" in broken[0]["error"]
    moved = upstream.version_drift({"transformers": "5.25.0", "onnx": "1.23.2"}, {"transformers": "5.26.0", "onnx": "1.23.2"})
    assert moved == [{"package": "transformers", "locked": "5.25.0", "newest": "5.26.0"}]
    page = upstream.render({"versions": {"project": moved},
                            "catalogue": {"checked": "5.25.0", "transformers": "5.26.0", "new": ["newtype"], "gone": []},
                            "broken": {"catalogue": broken, "exporters": [], "docs": []}})
    assert "| project | transformers | 5.25.0 | 5.26.0 |" in page and "New in transformers 5.26.0 (read or pend each): newtype." in page
    assert "## catalogue: 1 broken" in page and "no apply_rotary_pos_emb" in page and "## docs: 0 broken" in page
