"""`make bench-t5-patch`: a T5 encoder exported by torch.onnx (TorchScript exporter, random weights, no
download), timed before and after `posexport patch` on onnxruntime CPU, subjects interleaved in one process
(posexport.bench.timing.time_interleaved), as ratios: the whole model, and its bias path alone (the same
graph with the bias [1, heads, q, k] as its only output; onnxruntime drops the nodes it does not need).

    python benchmarks/t5_patch.py --seq 2048 --out benchmarks/t5-patch-ort-cpu
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh
import onnxruntime as ort
import torch
import transformers

from posexport import surgery
from posexport.bench.timing import time_interleaved


def export_encoder(out: Path, layers: int, d_model: int, heads: int) -> None:
    """A T5 encoder (32 buckets, max_distance 128): input_ids, attention_mask -> hidden states."""
    torch.manual_seed(0)
    config = transformers.T5Config(vocab_size=128, d_model=d_model, d_kv=d_model // heads, d_ff=2 * d_model, num_layers=layers,
                                   num_heads=heads, relative_attention_num_buckets=32, relative_attention_max_distance=128)
    model = transformers.T5EncoderModel(config).eval()

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, input_ids, attention_mask):  # noqa: ANN001
            return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    axes = {0: "batch", 1: "seq"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Hidden(), (torch.randint(0, 128, (1, 8)), torch.ones(1, 8, dtype=torch.int64)), str(out), dynamo=False,
                          input_names=["input_ids", "attention_mask"], output_names=["hidden"],
                          dynamic_axes={"input_ids": axes, "attention_mask": axes}, opset_version=18)


def session(model: onnx.ModelProto, threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def bias_only(path: Path, bias: str) -> onnx.ModelProto:
    model = onnx.load(str(path))
    del model.graph.output[:]
    model.graph.output.append(oh.make_empty_tensor_value_info(bias))
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--out", type=Path, help="write OUT.json and OUT.md")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="t5-patch-bench-"))
    original, patched = folder / "t5.onnx", folder / "t5-patched.onnx"
    export_encoder(original, args.layers, args.d_model, args.heads)
    (bias,) = [s.tensors["tail"][1].output[0] for s in surgery.find(original) if s.kind == "t5-bias"]
    surgery.patch_file(original, patched)
    rng = np.random.default_rng(0)
    feeds = {"input_ids": rng.integers(0, 128, (1, args.seq)), "attention_mask": np.ones((1, args.seq), dtype=np.int64)}
    subjects = {"whole model": [onnx.load(str(original)), onnx.load(str(patched))],
                "bias path": [bias_only(original, bias), bias_only(patched, bias)]}
    rows = []
    for what, (before, after) in subjects.items():
        sessions = [session(before, args.threads), session(after, args.threads)]
        outs = [s.run(None, feeds)[0] for s in sessions]
        assert np.array_equal(outs[0], outs[1]), "the patched model's output differs"
        (b_ms, b_iqr, _), (a_ms, a_iqr, _) = time_interleaved([lambda s=s: s.run(None, feeds) for s in sessions], args.warmup, args.repeats)
        rows.append({"subject": what, "original_ms": b_ms, "original_iqr_ms": b_iqr, "patched_ms": a_ms, "patched_iqr_ms": a_iqr,
                     "speedup": b_ms / a_ms})
    meta = {"command": "python " + " ".join(sys.argv), "time_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "seq": args.seq, "layers": args.layers, "d_model": args.d_model, "heads": args.heads, "threads": args.threads,
            "repeats": args.repeats, "onnxruntime": ort.__version__, "torch": torch.__version__, "transformers": transformers.__version__,
            "machine": platform.machine(), "load_average": [round(x, 2) for x in os.getloadavg()]}
    lines = [f"# T5 encoder before / after `posexport patch` (onnxruntime CPU, {args.seq} tokens)", "",
             f"`{meta['command']}` at {meta['time_utc']}; {args.layers} layers, d_model {args.d_model}, {args.heads} heads, "
             f"{args.threads} threads, {args.repeats} interleaved rounds; onnxruntime {ort.__version__}; load average "
             f"{meta['load_average']}. Outputs bit-identical (checked before timing).", "",
             "| subject | original ms (IQR) | patched ms (IQR) | original / patched |", "| --- | --- | --- | --- |"]
    lines += [f"| {r['subject']} | {r['original_ms']:.1f} ({r['original_iqr_ms']:.1f}) | {r['patched_ms']:.1f} ({r['patched_iqr_ms']:.1f}) "
              f"| {r['speedup']:.2f}× |" for r in rows]
    print("\n".join(lines))
    if args.out:
        args.out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
        args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
