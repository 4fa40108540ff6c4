"""The token ids of model-parity (posexport.verdicts.tokens): prompts cut from a text by the model's own
tokenizer (--text), from ids (--tokens, .npy or JSON), a default text where a tokenizer is found, random
ids only where none is; every refusal one error line. The vocabulary is read from the logits' fixed last
dimension, or from the table input_ids gather from: stored, transposed (onnxruntime-genai's tied
embeddings gather from Transpose(lm_head)) or block-quantized."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import pytest

from posexport.errors import PosexportError
from posexport.verdicts.model_feeds import FeedCase, make_feeds, signature, vocabulary
from posexport.verdicts.tokens import TOKENIZER, python_text, token_source

from . import trained_fixtures as tf
from .test_hardening_input import one_error
from .test_parity_cli import cli

pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A folder holding the trained fixtures' byte-level BPE tokenizer.json, and nothing else."""
    path = tmp_path_factory.mktemp("tokenizer")
    tf.tokenizer().save(str(path / TOKENIZER))
    return path


def test_text_is_tokenized_by_the_folders_tokenizer_and_cut_from_its_start(folder):
    from tokenizers import Tokenizer

    source = token_source(text=tf.TEXT, folders=[folder])
    expected = Tokenizer.from_file(str(folder / TOKENIZER)).encode(tf.TEXT.read_text()).ids
    assert source.ids.tolist() == expected and expected[0] == 1  # <s> first, as the tokenizer's post-processor adds it
    assert source.description.startswith("text LICENSE (") and str(folder / TOKENIZER) in source.description
    prompt = source.prompt(2, 50, tf.VOCAB)
    assert prompt.tolist() == [expected[:50], expected[50:100]]


def test_a_case_is_fed_its_prompt_and_the_other_feeds_stay_as_with_random_ids(folder, tmp_path):
    model = tiny_graph(tmp_path / "m.onnx", vocab_dim=tf.VOCAB)
    sig = signature(model)
    source = token_source(text=tf.TEXT, folders=[folder])
    with_text, random = make_feeds(sig, FeedCase(20, past=3), 5, source), make_feeds(sig, FeedCase(20, past=3), 5)
    assert with_text["input_ids"].tolist() == [source.ids[:20].tolist()]
    assert random["input_ids"].max() < tf.VOCAB and not np.array_equal(random["input_ids"], with_text["input_ids"])
    for name in set(random) - {"input_ids"}:
        assert np.array_equal(random[name], with_text[name]), name


def test_token_files_npy_and_json(folder, tmp_path):
    ids = np.random.default_rng(0).integers(0, tf.VOCAB, 300)
    np.save(tmp_path / "ids.npy", ids[None])  # one row of ids, as [1, n]
    (tmp_path / "ids.json").write_text(json.dumps(ids.tolist()))
    for name in ("ids.npy", "ids.json"):
        source = token_source(tokens=tmp_path / name, folders=[folder])
        assert source.ids.tolist() == ids.tolist() and source.description == f"tokens {name} (300 ids)"
    with pytest.raises(PosexportError, match="gives 300 tokens; a case of batch 1 × 301 tokens needs 301"):
        source.prompt(1, 301, tf.VOCAB)
    with pytest.raises(PosexportError, match=f"past the model's vocabulary of 100: is the tokenizer the model's own"):
        source.prompt(1, 300, 100)


@pytest.mark.parametrize("content, needle", [
    ("[1, 2, -3]", "expected a non-empty list of non-negative integer ids"),
    ('{"ids": [1]}', "expected a non-empty list"),
    ("[1, 2.5]", "expected a non-empty list"),
    ("[]", "expected a non-empty list"),
    ("not json", "not a JSON list of token ids"),
])
def test_bad_token_files_are_one_error_line(tmp_path, content, needle):
    path = tmp_path / "ids.json"
    path.write_text(content)
    with pytest.raises(PosexportError, match=needle):
        token_source(tokens=path)


def test_random_ids_where_no_tokenizer_is_found_and_the_report_says_why(folder, tmp_path):
    assert token_source(folders=[tmp_path]).description == "random token ids (no tokenizer.json found; give --text FILE for real text)"
    assert token_source(folders=[folder], random_ids=True).ids is None
    default = token_source(folders=[tmp_path, folder])
    assert default.description.startswith("Python ") and "standard-library docstrings" in default.description
    assert len(default.ids) > 50_000 and len(python_text()) > 200_000


def test_a_placeholder_tokenizer_that_knows_no_word_gives_random_ids_by_default_and_refuses_text(tmp_path):
    """The suite's random fixtures carry a word-level vocabulary t0…t99: any English text is its unknown token."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel(vocab={f"t{i}": i for i in range(100)}, unk_token="t3"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(tmp_path / TOKENIZER))
    default = token_source(folders=[tmp_path])
    assert default.ids is None and "knows too few words of the default text: 100% unknown" in default.description
    with pytest.raises(PosexportError, match="100% of its tokens are .* unknown token: is that the model's tokenizer"):
        token_source(text=tf.TEXT, folders=[tmp_path])


def test_choices_that_clash_or_lack_a_tokenizer_are_refused(folder, tmp_path):
    (tmp_path / "ids.json").write_text("[1, 2]")
    with pytest.raises(PosexportError, match="--text and --tokens: give one source of token ids"):
        token_source(text=tf.TEXT, tokens=tmp_path / "ids.json", folders=[folder])
    with pytest.raises(PosexportError, match="no tokenizer to read it with .*give --tokens FILE instead"):
        token_source(text=tf.TEXT, folders=[tmp_path])
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(PosexportError, match="not UTF-8 text"):
        token_source(text=tmp_path / "latin1.txt", folders=[folder])


def test_the_cli_refuses_in_one_line(folder, tmp_path):
    model = tiny_graph(tmp_path / "m.onnx", vocab_dim=tf.VOCAB)
    (tmp_path / "ids.json").write_text("[1, 2]")
    assert "--text nowhere.txt: no such file" in one_error(*cli("model-parity", "--model", str(model), "--against", str(model),
                                                                 "--text", "nowhere.txt"))
    assert "give one source of token ids" in one_error(*cli("model-parity", "--model", str(model), "--against", str(model),
                                                            "--random-ids", "--tokens", str(tmp_path / "ids.json")))
    assert "gives 2 tokens" in one_error(*cli("model-parity", "--model", str(model), "--against", str(model),
                                              "--tokens", str(tmp_path / "ids.json"), "--prompt", "8"))
    assert "--generate -1: expected a number of tokens" in one_error(*cli("model-parity", "--model", str(model), "--against",
                                                                         str(model), "--generate", "-1"))


# --- the vocabulary ---------------------------------------------------------------------------------


def tiny_graph(path, vocab_dim, table="stored", vocab=64):
    """input_ids -> logits [1, seq, vocab_dim] through an embedding of ``vocab`` rows: gathered from a stored
    table, from Transpose of a stored [hidden, vocab] one (genai's tied embeddings) or block-quantized."""
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((8, vocab)).astype(np.float32)  # [hidden, vocab], the lm_head
    nodes, inits = [], [onh.from_array(weight, "lm_head")]
    if table == "stored":
        inits.append(onh.from_array(weight.T.copy(), "embed"))
        nodes.append(oh.make_node("Gather", ["embed", "input_ids"], ["hidden"]))
    elif table == "transposed":
        nodes += [oh.make_node("Transpose", ["lm_head"], ["embed"], perm=[1, 0]), oh.make_node("Gather", ["embed", "input_ids"], ["hidden"])]
    nodes.append(oh.make_node("MatMul", ["hidden", "lm_head"], ["logits"]))
    graph = oh.make_graph(nodes, "g", [oh.make_tensor_value_info("input_ids", onnx.TensorProto.INT64, [1, "seq"])],
                          [oh.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, [1, "seq", vocab_dim])], inits)
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)]), str(path))
    return path


def test_the_vocabulary_of_tied_and_quantized_embeddings(tmp_path):
    assert vocabulary(onnx.load(tiny_graph(tmp_path / "a.onnx", 64)), "input_ids") == 64  # the logits' fixed dimension
    assert vocabulary(onnx.load(tiny_graph(tmp_path / "b.onnx", "vocab")), "input_ids") == 64  # the stored table
    assert vocabulary(onnx.load(tiny_graph(tmp_path / "c.onnx", "vocab", "transposed")), "input_ids") == 64  # Transpose(lm_head)
    quantized = onnx.load(tiny_graph(tmp_path / "d.onnx", "vocab", "transposed"))
    gather = next(n for n in quantized.graph.node if n.op_type == "Gather")
    gather.op_type, gather.domain, gather.input[0] = "GatherBlockQuantized", "com.microsoft", "packed"
    quantized.graph.initializer.append(onh.from_array(np.zeros((64, 4), np.uint8), "packed"))  # [vocab, hidden/2] of int4 pairs
    assert vocabulary(quantized, "input_ids") == 64
    unknown = onnx.load(tiny_graph(tmp_path / "e.onnx", "vocab", "none"))
    assert vocabulary(unknown, "input_ids") == 0
    onnx.save(unknown, str(tmp_path / "e.onnx"))
    assert "cannot tell the vocabulary size" in one_error(*cli("model-parity", "--model", str(tmp_path / "e.onnx"), "--against",
                                                                str(tmp_path / "e.onnx"), "--random-ids"))
