"""Greedy decoding against transformers (``model-parity --generate N``): the model decodes N tokens after a
prompt through its own KV cache (each step's present key/values fed back as the next step's past; a model
that takes no past key/values is given the whole sequence each step), and transformers in float64 follows
the model's tokens with its own cache. At every step both give the next token's logits: the report counts
the steps where transformers picks the model's token, names the first where it would not (with its own
top-1 − top-2 margin there: a near tie, or not) and the largest logits gap along the way. Only the last
row of each step's logits is kept (runtimes.isolated streams the rest past)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
import numpy as np

from ..runtimes import ModelSession
from .graphs import describe
from .hf_oracle import HfOracle, cache_slot
from .model_feeds import FeedCase, Signature, make_feeds
from .report import Generation
from .streamed import differences, top_two
from .tokens import Tokens

OWN_CACHE = "its own KV cache (present fed back as past)"
NO_CACHE = "the whole sequence each step (the model takes no past key/values)"


class LastRow:
    """A Sink (runtimes.isolated) keeping only the last row of an output, in float64."""

    def __init__(self) -> None:
        self.row: np.ndarray | None = None
        self.rows = 0

    def __call__(self, shape: tuple[int, ...], dtype: np.dtype) -> Callable[[int, np.ndarray], None]:
        self.rows = int(np.prod(shape[:-1])) if shape else 1
        return self.take

    def take(self, start: int, block: np.ndarray) -> None:
        if start + len(block) == self.rows:
            self.row = block[-1].astype(np.float64)


def cache_pairs(sig: Signature) -> dict[str, str] | None:
    """Each past key/value input's present output (by layer and kind); {} when the model takes no past;
    None when some past has no present to feed it from."""
    pasts = {cache_slot(name): name for name, _, _ in sig.inputs if cache_slot(name)}
    presents = {cache_slot(name): name for name in sig.outputs if cache_slot(name)}
    if not pasts:
        return {}
    return {name: presents[slot] for slot, name in pasts.items()} if set(pasts) <= set(presents) else None


class Decoder:
    """The model's side: one step after another, its own cache carried over (or the whole sequence rerun)."""

    def __init__(self, session: ModelSession, sig: Signature, logits: str, first: Mapping[str, np.ndarray], seed: int):
        self.session, self.sig, self.logits, self.seed = session, sig, logits, seed
        self.pairs = cache_pairs(sig)
        self.feeds = dict(first)
        self.ids = [int(i) for i in first[self.ids_name()][0]]

    def ids_name(self) -> str:
        return next(name for name, _, _ in self.sig.inputs if "input_ids" in name)

    def step(self) -> np.ndarray:
        """Run the current feeds: the last position's logits; the presents become the next step's pasts."""
        sink = LastRow()
        out = self.session.run(self.feeds, {self.logits: sink})
        if sink.row is None:
            raise RuntimeError(f"the model returned no {self.logits!r}")
        self.presents = {past: out[present] for past, present in (self.pairs or {}).items()}
        return sink.row

    def advance(self, token: int) -> None:
        self.ids.append(token)
        if not self.pairs:  # no cache of its own: the whole sequence again
            self.feeds = make_feeds(self.sig, FeedCase(len(self.ids)), self.seed, Tokens(np.asarray(self.ids), "decoded tokens"))
            return
        total, feeds = len(self.ids), dict(self.feeds)
        for name, elem_dtype in ((n, self.feeds[n].dtype) for n in self.feeds):
            if "input_ids" in name:
                feeds[name] = np.array([[token]], dtype=elem_dtype)
            elif "attention_mask" in name:
                feeds[name] = np.ones((1, total), dtype=elem_dtype)
            elif "position_ids" in name:
                feeds[name] = np.array([[total - 1]], dtype=elem_dtype)
        feeds |= self.presents
        self.feeds = feeds


def generation(label: str, runtime: str, session: ModelSession, sig: Signature, case: FeedCase, hf: HfOracle,
               feeds: Mapping[str, np.ndarray], steps: int, tokens: Tokens, seed: int = 0) -> Generation:
    """``steps`` greedy tokens after the case's prompt (its feeds), the model against transformers."""
    logits = next((name for name in sig.outputs if name.endswith("logits")), None)
    pairs = cache_pairs(sig)
    if logits is None or pairs is None:
        why = "the model has no logits output" if logits is None else "its past key/values do not pair with its present ones"
        return Generation(label, case.label, runtime, 0, 0, message=f"cannot decode: {why}")
    decoder = Decoder(session, sig, logits, feeds, seed)
    cache_way = OWN_CACHE if pairs else NO_CACHE
    record = Tally()
    theirs, cache = hf.next_logits(np.asarray([decoder.ids]), None)
    for step in range(steps):
        try:
            ours = decoder.step()
        except Exception as e:  # the model's failure mid-way (a cache too short) is the result
            return record.result(label, case, runtime, cache_way, f"step {step}: the model fails: {describe(e)}")
        token = record.add(step, ours, theirs)
        if step + 1 < steps:
            decoder.advance(token)
            theirs, cache = hf.next_logits(np.asarray([[token]]), cache)
    return record.result(label, case, runtime, cache_way)


class Tally:
    """The running record of a decode: agreement, the first divergence, the largest gap."""

    def __init__(self) -> None:
        self.steps = self.agreed = self.gap_step = 0
        self.gap = 0.0
        self.first: tuple[int, tuple[int, int], float] | None = None

    def add(self, step: int, ours: np.ndarray, theirs: np.ndarray) -> int:
        """Record one step's logits; the model's token, which both sides follow."""
        gap = float(np.max(differences(ours, theirs))) / max(1.0, float(np.max(np.abs(theirs[np.isfinite(theirs)]), initial=0.0)))
        if gap > self.gap:
            self.gap, self.gap_step = gap, step
        token = int(np.argmax(ours))
        best, margin = top_two(theirs)
        self.steps += 1
        self.agreed += token == int(best)
        if token != int(best) and self.first is None:
            self.first = (step, (token, int(best)), float(margin))
        return token

    def result(self, label: str, case: FeedCase, runtime: str, cache: str, message: str = "") -> Generation:
        step, pair, margin = self.first if self.first is not None else (None, None, None)
        return Generation(label, case.label, runtime, self.steps, self.agreed, step, pair, margin, self.gap, self.gap_step, cache, message)
