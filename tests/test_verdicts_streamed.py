"""Comparisons fed block by block (posexport.verdicts.streamed) give what the whole arrays give: the error
formula of posexport.comparison, the position of the largest difference, the 99th percentile to its 5%,
and next-token agreement with the reference's margins, all written out here with numpy on random arrays.
The isolated runtime hands an output over in blocks that add up to it, byte for byte."""

from __future__ import annotations

import multiprocessing
import threading

import numpy as np
import pytest

from posexport.comparison import compare
from posexport.runtimes.isolated import receive_arrays, receive_message, send_arrays
from posexport.verdicts.streamed import Running, TokenTally, compared


def blocks_of(out, ref, rows_per_block):
    for start in range(0, out.shape[0], rows_per_block):
        yield start, out[start:start + rows_per_block], ref[start:start + rows_per_block]


@pytest.mark.parametrize("rows_per_block", [1, 7, 64, 1000])
def test_running_error_position_and_p99_match_the_whole_arrays(rows_per_block):
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((3, 50, 96)) * 4  # [batch, seq, vocab]
    out = (ref + rng.standard_normal(ref.shape) * 1e-3).astype(np.float32)
    out[1, 37, 5] += 0.5  # the largest difference: batch 1, position 37
    running = Running(period=50, first_position=100)  # positions 100 … 149
    flat_out, flat_ref = out.reshape(-1, 96), ref.reshape(-1, 96)
    for start, o, r in blocks_of(flat_out, flat_ref, rows_per_block):
        running.add(o, r, start)
    whole = compare(out, ref, 1.0)
    got = running.comparison(1.0)
    assert got.max_abs == whole.max_abs and got.normalised == whole.normalised
    assert running.position == 137
    diff = np.abs(out.astype(np.float64) - ref)
    p99 = np.percentile(diff, 99) / max(1.0, np.abs(ref).max())
    assert p99 <= got.p99 <= p99 * 2 ** (1 / 16) * 1.001 and got.p99 <= got.normalised


def test_running_keeps_the_conventions_of_the_error_formula():
    ref = np.array([[1.0, -np.inf, 3.0], [0.5, 0.5, 0.5]])
    same = ref.astype(np.float32)
    running = Running(period=2)
    running.add(same, ref, 0)
    assert running.normalised == 0.0  # -inf where the reference is -inf: equal
    wrong = same.copy()
    wrong[0, 1] = 0.0
    assert compared(wrong, ref).normalised == np.inf == compare(wrong, ref, 1.0).normalised
    nan = same.copy()
    nan[1, 2] = np.nan
    assert compared(nan, ref).normalised == np.inf
    assert compared(same[:, :2], ref).comparison(1.0).normalised == np.inf  # another shape: a mismatch, never a pass
    assert not compared(same[:, :2], ref).comparison(1.0).passed


def test_token_tally_counts_agreement_and_the_references_margins():
    rng = np.random.default_rng(1)
    ref = rng.standard_normal((40, 30))
    out = ref + rng.standard_normal(ref.shape) * 0.3  # noisy enough to disagree at some positions
    tally = TokenTally(period=40, first_position=10)
    for start, o, r in blocks_of(out, ref, 6):
        tally.add(o, r, start)
    t = tally.result()
    picked, best = out.argmax(-1), ref.argmax(-1)
    missed = np.flatnonzero(picked != best)
    top = np.sort(ref, axis=-1)
    margins = (top[:, -1] - top[:, -2])[missed]
    assert 0 < len(missed) < 40 and (t.positions, t.agreed) == (40, 40 - len(missed))
    assert t.smallest_margin == margins.min() and t.largest_margin == margins.max()
    assert t.first_disagreement == 10 + missed[0]


def test_compared_whole_arrays_in_blocks_give_the_position_on_the_sequence_axis():
    rng = np.random.default_rng(2)
    ref = rng.standard_normal((1, 2, 300, 16))  # a cache [batch, heads, seq, head_dim]
    out = ref.astype(np.float32)
    out[0, 1, 211, 3] += 0.01
    running = compared(out, ref, first_position=0)
    assert running.position == 211 and running.normalised == compare(out, ref, 1.0).normalised


def test_an_output_handed_over_in_blocks_is_every_byte_of_it():
    """runtimes.isolated's sinks: the pipe's bytes, in blocks of whole rows, are the array sent."""
    rng = np.random.default_rng(3)
    arrays = {"logits": rng.standard_normal((2, 700, 3000)).astype(np.float32), "present.0.key": rng.standard_normal((1, 2, 5, 4))}
    a, b = multiprocessing.Pipe()
    got = np.zeros_like(arrays["logits"]).reshape(-1, 3000)
    starts = []

    def sink(shape, dtype):
        assert shape == (2, 700, 3000) and dtype == np.float32

        def take(start, block):
            starts.append(start)
            got[start:start + len(block)] = block
        return take

    sender = threading.Thread(target=send_arrays, args=(a.fileno(), arrays))
    sender.start()
    described = receive_message(b.fileno())["arrays"]
    rest = receive_arrays(b.fileno(), described, {"logits": sink})
    sender.join()
    assert list(rest) == ["present.0.key"] and np.array_equal(rest["present.0.key"], arrays["present.0.key"])
    assert len(starts) > 1 and np.array_equal(got.reshape(arrays["logits"].shape), arrays["logits"])
