"""Small models trained here, in the suite, so that the verdicts meet what users meet: real text, a
byte-level BPE tokenizer, next-token distributions with a clear winner, tied embeddings, sliding layers.
A Llama-style model (tied embeddings, as SmolLM2's) and a Gemma-3-style one (a sliding layer of window 16
before a full one, tied) learn Python's standard-library docstrings for a few hundred steps; the text they
are judged on is another one, the Apache-2.0 LICENSE at the repository's root.

Everything is seeded and single-threaded, so the same weights come out on every run: a tokenizer of 512
ids (trained by ``tokenizers``), hidden size 64, 2 layers of 4 heads of 16. Trained once per test session
in a temp folder, in seconds; the exports are zoo/exporters.py's, cached beside them.
"""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from posexport.verdicts.tokens import python_text

from zoo import exporters as ef

ROOT = Path(tempfile.mkdtemp(prefix="posexport-trained-"))
atexit.register(shutil.rmtree, ROOT, ignore_errors=True)
TEXT = Path(__file__).resolve().parents[1] / "LICENSE"  # the text the models are judged on (not trained on)
VOCAB = 512
MAX_POSITIONS = 256
SHAPE = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             max_position_embeddings=MAX_POSITIONS, bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=True)
STEPS, BATCH, SEQ, LEARNING_RATE = 120, 24, 64, 6e-3


@functools.lru_cache(maxsize=1)
def tokenizer() -> Any:
    """A byte-level BPE of VOCAB ids learnt from the training text, adding <s> in front as Llama's does."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([python_text()], trainers.BpeTrainer(
        vocab_size=VOCAB, special_tokens=["<pad>", "<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return tok


def configs() -> dict[str, Any]:
    from transformers import Gemma3TextConfig, LlamaConfig

    return {
        "llama": LlamaConfig(num_key_value_heads=2, **SHAPE),
        "gemma3": Gemma3TextConfig(num_key_value_heads=1, head_dim=16, sliding_window=16,
                                   layer_types=["sliding_attention", "full_attention"], **SHAPE),
    }


def train(model: Any) -> None:
    """STEPS of AdamW on random windows of the training text, one thread, seeded."""
    import torch

    ids = torch.tensor(tokenizer().encode(python_text()).ids)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        generator = torch.Generator().manual_seed(0)
        optimiser = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
        model.train()
        for _ in range(STEPS):
            starts = torch.randint(0, len(ids) - SEQ, (BATCH,), generator=generator)
            batch = torch.stack([ids[s:s + SEQ] for s in starts.tolist()])
            model(input_ids=batch, labels=batch).loss.backward()
            optimiser.step()
            optimiser.zero_grad()
    finally:
        torch.set_num_threads(threads)
    model.eval()


@functools.lru_cache(maxsize=None)
def trained(arch: str) -> Path:
    """The trained model ``arch`` (llama or gemma3) with its tokenizer, in ROOT/arch (made once)."""
    import torch
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    folder = ROOT / arch
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(configs()[arch])
    train(model)
    model.save_pretrained(folder)
    PreTrainedTokenizerFast(tokenizer_object=tokenizer(), bos_token="<s>", eos_token="</s>", pad_token="<pad>").save_pretrained(folder)
    return folder


def variant(arch: str, name: str, max_positions: int | None = None, **rope: Any) -> Path:
    """The trained weights of ``arch`` under another rope (``rope_parameters`` updated with ``rope``: a base
    1% off, a YaRN scaling) and, when given, another max_position_embeddings: the model an exporter that misread the
    config would have exported, or the config a user edits to extend the context."""
    source, folder = trained(arch), ROOT / f"{arch}-{name}"
    if not folder.is_dir():
        shutil.copytree(source, folder)
        config = json.loads((folder / "config.json").read_text())
        config["rope_parameters"] = config["rope_parameters"] | rope
        config["max_position_embeddings"] = max_positions or config["max_position_embeddings"]
        (folder / "config.json").write_text(json.dumps(config, indent=2))
    return folder


@functools.lru_cache(maxsize=None)
def export(arch: str, exporter: str, folder: Path | None = None) -> Path:
    """The trained model (or a ``variant`` folder of it) exported by one of zoo.exporters.EXPORTERS."""
    source = folder or trained(arch)
    return ef.EXPORTERS[exporter](source, source.with_name(f"{source.name}--{exporter}"))


def greedy(folder: Path, prompt: list[int], steps: int) -> list[int]:
    """transformers' own greedy generate in float32, the tokens after the prompt."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(folder)).eval()
    ids = torch.tensor([prompt])
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=steps, do_sample=False)
    return out[0, len(prompt):].tolist()


def genai_greedy(folder: Path, prompt: list[int], steps: int) -> list[int]:
    """onnxruntime-genai's generator on an exported folder: its greedy tokens after the prompt."""
    import numpy as np
    import onnxruntime_genai as og

    model = og.Model(str(folder))
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt) + steps, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(np.asarray(prompt, dtype=np.int32))
    tokens = []
    while not generator.is_done():
        generator.generate_next_token()
        tokens.append(int(generator.get_next_tokens()[0]))
    return tokens
