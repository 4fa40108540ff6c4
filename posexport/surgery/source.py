"""Where the rope parameters of a patch come from: a model folder (--from-model, read by
posexport.models: every rope the model uses, e.g. Gemma-3's local and global ones), a config file
(--from-config), a bundled preset, explicit options, or, by default, what the site itself gives back.
Each site takes the first candidate rope its check accepts, so a model's two ropes find their sites."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import params as params_mod
from ..errors import PosexportError, UnknownOption
from ..limits import check_product
from ..models import read_model
from ..rope import config
from ..rope.encoding import RopeParams, inv_freq_and_factor
from .freqs import close, from_cache, snap_base
from .sites import REPLACE_FLAG, Mismatch, Site


Candidates = list[dict[str, Any]]


def model_values(directory: str | Path) -> Candidates:
    """Rope options of every rope a transformers model folder uses (config.json read by posexport.models)."""
    return [dict(role.values) for role in read_model(directory).roles if role.encoding == "rope"]


def default_source(model: Path) -> tuple[Candidates | None, list[str]]:
    """The ropes of the config.json beside ``model`` (optimum-onnx and transformers' exporters write the model's config
    there), as the source when none is given, and the line saying so, or why it was not used; (None, []) without one."""
    config_file = model.parent / "config.json"
    if not config_file.is_file():
        return None, []
    try:
        found = model_values(model.parent)
    except PosexportError as e:
        return None, [f"{config_file} beside the model not used ({e}); the rope recognised in the graph is used"]
    if not found:
        return None, []
    return found, [f"rope parameters from {config_file}, beside the model (give --from-model, --from-config or --preset "
                   "to choose others)"]


def requested_values(from_model: str | Path | None = None, from_config: str | Path | None = None,
                     preset: str | None = None, options: dict[str, Any] | None = None) -> Candidates | None:
    """Candidate rope options the user gave (at most one source, explicit options on top of each), or None."""
    chosen = [name for name, v in (("--from-model", from_model), ("--from-config", from_config), ("--preset", preset)) if v]
    known = {f.name for f in dataclasses.fields(RopeParams)}
    for name in options or {}:
        if name not in known:
            rope_options = ["--" + k.replace("_", "-") for k in sorted(known)]
            raise UnknownOption(name, rope_options, detail="the options here are rope's: `posexport build --encoding rope --help`")
    if len(chosen) > 1:
        raise PosexportError(f"{' and '.join(chosen)}: give one source of rope parameters")
    if from_model:
        found = model_values(from_model)
    elif from_config:
        found = [config.from_config_file(from_config)]
    elif preset:
        found = [config.from_preset(preset)]
    else:
        found = [{}] if options else []
        if not options:
            return None
    return [values | dict(options or {}) for values in found]


def candidates(values: dict[str, Any] | Candidates | None) -> Candidates | None:
    """One rope's options, several candidates, or None (each site's recognised rope)."""
    return [values] if isinstance(values, dict) else values


def choose(site: Site, values: dict[str, Any] | Candidates | None, position_limit: int | None,
           check: Callable[[RopeParams], None], replace: bool = False, rescale: bool = False) -> RopeParams:
    """The first candidate rope that the site's ``check`` accepts (or the site's recognised rope when none
    is given); when none fits, the error names the node and why each candidate does not. A candidate the check
    refuses only because the graph holds other parameters (a Mismatch) is taken when it adds a scaling to the rope
    the graph holds (``rescale``: a context extension), or, with ``replace``, when it is the only such candidate;
    either way the site keeps what it held, to be shown beside the new parameters."""
    options = candidates(values)
    if options is None:
        p = site_params(site, None, position_limit, site.recovered.get("rows"))
        check(p)
        return p
    if not options:
        raise PosexportError(f"{site.anchor}: the model folder describes no rope to compare it with or patch it with")
    errors, mismatched = [], []
    for values_ in options:
        try:
            p = site_params(site, values_, position_limit, site.recovered.get("rows"))
            check(p)
            return p
        except Mismatch as e:
            if rescale and holds_unscaled(p, check):
                return replaced(site, p, "rescaled")
            mismatched.append(p)
            errors.append(str(e))
        except PosexportError as e:
            errors.append(str(e))
    if replace and len(mismatched) == 1:
        return replaced(site, mismatched[0], "replaced")
    hint = mismatch_hint(site, mismatched, replace)
    if len(errors) == 1:
        raise PosexportError(errors[0] + hint)
    reasons = "; ".join(e.removeprefix(f"{site.anchor}: ") for e in errors)
    raise PosexportError(f"{site.anchor}: none of the model's {len(errors)} ropes fits it: {reasons}{hint}")


def mismatch_hint(site: Site, mismatched: list[RopeParams], replace: bool) -> str:
    """What the user can do about parameters that disagree with the graph (nothing when none do)."""
    if not mismatched:
        return ""
    if replace:
        return (f"; {REPLACE_FLAG}: {len(mismatched)} of them could replace it, which is a guess: give the one rope "
                "with --from-config FILE or options")
    return f"; refusing to guess (pass {REPLACE_FLAG} to rebuild it to the parameters asked for)"


def holds_unscaled(p: RopeParams, check: Callable[[RopeParams], None]) -> bool:
    """The parameters add a scaling to exactly the rope the graph holds (the same base, unscaled)."""
    if p.scaling == "default":
        return False
    unscaled = {k: v for k, v in params_mod.to_dict(p).items() if k in UNSCALED}
    try:
        check(params_mod.build(RopeParams, unscaled))
    except PosexportError:
        return False
    return True


# What a rope is without its scaling (the rope a rescale starts from).
UNSCALED = ("head_dim", "heads", "rotary_dim", "base", "pair_layout", "layout", "max_positions", "position_limit")


def replaced(site: Site, p: RopeParams, how: str) -> RopeParams:
    """``p``, with what the site held before kept on it (the old parameters a patch report shows)."""
    held = site.recovered.get("recognised") or {"inv_freq": site.recovered.get("inv_freq"),
                                                "attention_factor": site.recovered.get("attention_factor")}
    if "rows" in site.recovered:
        held = dict(held) | {"position_limit": site.recovered["rows"]}
    site.tensors["replaced"] = {"how": how, "old": held}
    return p


class Unrecognised(PosexportError):
    """A rope site whose frequencies no plain or linearly scaled rope gives, with no parameters given: patching it
    would be a guess. ``in_folder`` names what to add as exactly as the model's folder allows."""

    def __init__(self, site: Site, model: Path | None = None):
        self.site = site
        super().__init__(f"{site.anchor}: its frequencies are not a plain or linearly scaled rope ({site.recovered.get('inv_freq')}), "
                         f"so the patch would be a guess; {what_to_pass(site, model)}")

    def in_folder(self, model: Path) -> Unrecognised:
        return Unrecognised(self.site, model)


def site_frequencies(site: Site) -> np.ndarray | None:
    """The frequencies a rope site computes with: traced from its Cos/Sin, or read back from its cos/sin caches."""
    if isinstance(site.tensors.get("inv_freq"), np.ndarray):
        return site.tensors["inv_freq"]
    pairs = site.tensors.get("pairs")
    return from_cache(pairs[0].cos, pairs[0].sin)[0] if pairs else None


def gives(site: Site, inv_freq: np.ndarray, folder: Path) -> bool:
    """Whether a rope of the model in ``folder`` computes these frequencies (any error reading it: no)."""
    try:
        ropes = model_values(folder)
    except PosexportError:
        return False
    for values in ropes:
        try:
            theirs, _ = inv_freq_and_factor(site_params(site, values, None))
        except PosexportError:
            continue
        if len(theirs) == len(inv_freq) and close(inv_freq, theirs):
            return True
    return False


MAX_FOLDERS = 64  # model folders looked at beside an exported model for the one it came from


def what_to_pass(site: Site, model: Path | None = None) -> str:
    """What to add for an unrecognised rope: ``--from-model`` with the folder beside the model (its own, or one of
    its subfolders) whose config gives exactly these frequencies, else which options, with the base the highest
    frequencies show (a scaling leaves those as they are)."""
    inv_freq = site_frequencies(site)
    if inv_freq is not None and model is not None:
        here = model.parent
        folders = [here, *sorted(p for p in here.iterdir() if p.is_dir() and (p / "config.json").is_file())][:MAX_FOLDERS]
        found = next((f for f in folders if (f / "config.json").is_file() and gives(site, inv_freq, f)), None)
        if found is not None:
            return f"add --from-model {found} (its config.json gives exactly these frequencies)"
    base = f"; its highest frequencies are those of --base {snap_base(inv_freq):g}" if inv_freq is not None and len(inv_freq) > 1 else ""
    return (f"add --from-model DIR, the folder of the model it was exported from (or --from-config DIR/config.json, or --base "
            f"and the model's --scaling with that scaling's options){base}")


def site_params(site: Site, values: dict[str, Any] | None, position_limit: int | None,
                default_max: int | None = None) -> RopeParams:
    """RopeParams for one site: the user's values when given, else what the site was recognised as;
    the rotated width is the site's own, and an unrecognised site without values is an error."""
    if values is None:
        values = site.recovered.get("recognised")
        if values is None:
            raise Unrecognised(site)
    values = dict(values)
    width = site.recovered["rotary_dim"]
    rotary = values.get("rotary_dim") or values.get("head_dim")
    if rotary is not None and int(rotary) != width:
        raise PosexportError(f"{site.anchor}: rotates {width} channels but the parameters say rotary_dim {rotary}")
    values["head_dim"], values["rotary_dim"] = width, width
    values.setdefault("max_positions", default_max or 4096)
    if position_limit is None and "rows" in site.recovered:
        # A cache keeps its rows, or grows to the model's max positions: more only on request.
        position_limit = max(site.recovered["rows"], int(values["max_positions"]))
    if position_limit is not None:
        values["position_limit"] = position_limit
        # A rebuilt cache is [position_limit, width / 2] cos and sin, formed from float64 angles.
        check_product([("position_limit", position_limit), ("rotary_dim", 3 * max(width // 2, 1))], "the rebuilt cos/sin caches in float64")
    return params_mod.build(RopeParams, values)
