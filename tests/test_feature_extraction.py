"""extract_features against the float64 reference on ids taken from the tokenizer fixture, and
with --doc_stride against the reference on windows cut by hand, each token read from its
max-context window."""

import json
import os
import re
import sys

import numpy as np
import pytest

from bert_tf import BertConfig, BertModel, load_google_checkpoint
from bert_tf.checkpoints import reference
from bert_tf.tasks.features import data as features_data
from bert_tf.tasks.features import task as features_task
from bert_tf.tasks.features.run import FeaturesOptions, run_extract_features
from bert_tf.text import text_lines
from bert_tf.text.tokenization import FullTokenizer
from tests import finetuning_fixtures as ff
from tests import model_fixtures as mf
from tests import tool_runs
from tests.conftest import FIXTURES_DIR

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = os.path.join(mf.GOOGLE_TINY, "vocab.txt")
CLS, SEP = 101, 102  # ids of [CLS] and [SEP] in the bert-base-uncased vocab


@pytest.fixture(scope="module")
def model():
    model = BertModel(BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG))
    load_google_checkpoint(model, mf.GOOGLE_TINY_CKPT)
    return model


@pytest.fixture(scope="module")
def weights():
    return reference.load_checkpoint_weights(mf.GOOGLE_TINY_CKPT)


def fixture_lines(count):
    with open(os.path.join(FIXTURES_DIR, "tokenization", "sample_text.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return [row for row in rows if row["ids"]][:count]


def reference_layers(weights, config, ids, segments, seq_length):
    """Every layer of the float64 reference for one packed, padded sequence."""
    input_ids = np.zeros((1, seq_length), np.int32)
    input_ids[0, : len(ids)] = ids
    mask = (input_ids != 0).astype(np.int32)
    mask[0, : len(ids)] = 1
    segment_ids = np.zeros((1, seq_length), np.int32)
    segment_ids[0, : len(segments)] = segments
    out = reference.reference_forward(weights, config, input_ids, mask, segment_ids)
    return [out[f"encoder_layer_{i}"][0] for i in range(config.num_hidden_layers)]


def test_single_sentences_match_the_reference(fixtures_dir, model, weights):
    rows = fixture_lines(3)
    seq_length = 48
    examples = [text_lines.InputExample(i, row["text"]) for i, row in enumerate(rows)]
    results = list(
        features_task.extract_features(
            model, FullTokenizer(VOCAB, True), examples, seq_length, [-1, -2], batch_size=2
        )
    )
    assert [r["linex_index"] for r in results] == [0, 1, 2]
    for row, result in zip(rows, results, strict=True):
        tokens = ["[CLS]"] + row["tokens"][: seq_length - 2] + ["[SEP]"]
        ids = [CLS] + row["ids"][: seq_length - 2] + [SEP]
        assert [f["token"] for f in result["features"]] == tokens
        layers = reference_layers(weights, model.config, ids, [0] * len(ids), seq_length)
        for position, feature in enumerate(result["features"]):
            assert [layer["index"] for layer in feature["layers"]] == [-1, -2]
            for layer, want in zip(feature["layers"], (layers[-1], layers[-2]), strict=True):
                np.testing.assert_allclose(layer["values"], want[position], atol=1e-5)


def test_the_forward_pass_is_compiled_once_for_a_partial_last_batch(fixtures_dir):
    """Three batches, the last one short: it is padded, so the compiled pass is not retraced."""
    model = BertModel(BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG))
    examples = [text_lines.InputExample(i, row["text"]) for i, row in enumerate(fixture_lines(5))]
    results = list(
        features_task.extract_features(model, FullTokenizer(VOCAB, True), examples, 32, [-1], batch_size=2)
    )
    assert [r["linex_index"] for r in results] == [0, 1, 2, 3, 4]
    assert model.predict_function.experimental_get_tracing_count() == 1


def test_pairs_use_segment_one_for_text_b(fixtures_dir, model, weights):
    a, b = fixture_lines(2)
    seq_length = 32  # the pair has 44 wordpieces: truncated longest-first to 29
    example = text_lines.InputExample(7, a["text"], b["text"])
    (result,) = features_task.extract_features(model, FullTokenizer(VOCAB, True), [example], seq_length, [-1])
    tokens_a, tokens_b = list(a["ids"]), list(b["ids"])
    assert len(tokens_a) + len(tokens_b) > seq_length - 3
    while len(tokens_a) + len(tokens_b) > seq_length - 3:
        (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()
    ids = [CLS] + tokens_a + [SEP] + tokens_b + [SEP]
    segments = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
    assert len(result["features"]) == len(ids) == seq_length
    want = reference_layers(weights, model.config, ids, segments, seq_length)[-1]
    got = np.array([f["layers"][0]["values"] for f in result["features"]])
    np.testing.assert_allclose(got, want[: len(ids)], atol=1e-5)


def _squad_windows(num_tokens, window, stride):
    """The original run_squad.py's loop over a document, written out: (start, length) pairs."""
    windows, start = [], 0
    while True:
        length = min(num_tokens - start, window)
        windows.append((start, length))
        if start + length == num_tokens:
            return windows
        start += min(length, stride)


def test_a_long_text_is_read_from_each_pieces_max_context_window(fixtures_dir, model, weights):
    """Three fixture lines as one text of 50+ WordPieces, windows of 16 - 2 starting at most 5
    apart, 3 windows a forward pass: every WordPiece's activations from its max-context window,
    [CLS] from the first window and [SEP] from the last."""
    rows = fixture_lines(4)
    long_text = " ".join(row["text"] for row in rows[:3])
    ids = [i for row in rows[:3] for i in row["ids"]]
    tokens = [t for row in rows[:3] for t in row["tokens"]]
    seq_length, stride = 16, 5
    windows = _squad_windows(len(ids), seq_length - 2, stride)
    assert len(ids) > 50 and len(windows) > 3
    reference = [
        reference_layers(weights, model.config, [CLS, *ids[s : s + n], SEP], [0] * (n + 2), seq_length)
        for s, n in windows
    ]
    want = {}
    for layer in (-1, 0):
        rows_want = [reference[0][layer][0]]
        for piece in range(len(ids)):
            window = ff.max_context_window(windows, piece)
            rows_want.append(reference[window][layer][1 + piece - windows[window][0]])
        n = windows[-1][1]
        rows_want.append(reference[-1][layer][n + 1])
        want[layer] = np.array(rows_want)

    examples = [text_lines.InputExample(0, long_text), text_lines.InputExample(1, rows[3]["text"])]
    tokenizer = FullTokenizer(VOCAB, True)
    encoded = list(
        features_task.encode_documents(model, tokenizer, examples, seq_length, [-1, 0], 3, doc_stride=stride)
    )
    assert [(example.unique_id, got_tokens) for example, got_tokens, _ in encoded] == [
        (0, ["[CLS]", *tokens, "[SEP]"]),
        (1, ["[CLS]", *rows[3]["tokens"], "[SEP]"]),
    ]
    _, _, layers = encoded[0]
    for got, layer in zip(layers, (-1, 0), strict=True):
        np.testing.assert_allclose(got, want[layer], atol=1e-5)
    # The tool's JSON: the same values, rounded.
    (result, _) = features_task.extract_features(model, tokenizer, examples, seq_length, [-1], 3, stride)
    assert [f["token"] for f in result["features"]] == ["[CLS]", *tokens, "[SEP]"]
    got = np.array([f["layers"][0]["values"] for f in result["features"]])
    np.testing.assert_allclose(got, want[-1], atol=1e-5)
    with pytest.raises(ValueError, match=r"^example 4: a pair; doc_stride reads single texts$"):
        list(
            features_task.encode_documents(
                model, tokenizer, [text_lines.InputExample(4, "a", "b")], 16, [-1], 3, 5
            )
        )


def test_texts_that_fit_in_one_window_give_todays_features(fixtures_dir, model):
    rows = [row for row in fixture_lines(20) if len(row["ids"]) <= 62][:4]
    examples = [text_lines.InputExample(i, row["text"]) for i, row in enumerate(rows)]
    examples.append(text_lines.InputExample(4, ""))
    tokenizer = FullTokenizer(VOCAB, True)
    today = list(features_task.extract_features(model, tokenizer, examples, 64, [-1, -2], 2))
    assert len(today) == 5 and max(len(r["features"]) for r in today) > 40
    assert (
        list(features_task.extract_features(model, tokenizer, examples, 64, [-1, -2], 2, doc_stride=7))
        == today
    )


def test_read_examples_splits_pairs(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"  one  \nleft ||| right\n\xff\xfebroken utf8\n")
    examples = list(text_lines.read_examples(str(path)))
    assert [(e.unique_id, e.text_a, e.text_b) for e in examples] == [
        (0, "one", None),
        (1, "left", "right"),
        (2, "broken utf8", None),
    ]
    with pytest.raises(ValueError, match=r"nothere\.txt: no such input file"):
        list(text_lines.read_examples(str(tmp_path / "nothere.txt")))


def test_lines_are_read_as_the_originals_gfile_reads_them(tmp_path):
    """TensorFlow's line reader (the original's `tf.gfile`) drops every "\\r" of a line: a
    carriage return inside a line joins its two sides."""
    import tensorflow as tf

    path = tmp_path / "in.txt"
    path.write_bytes(b"hello\rworld\r\nleft\r ||| right\n")
    with tf.io.gfile.GFile(str(path), "r") as reader:
        original = [line.strip() for line in reader]
    assert [
        e.text_a + (f" ||| {e.text_b}" if e.text_b else "") for e in text_lines.read_examples(str(path))
    ] == original


def test_an_empty_input_is_an_error_that_keeps_the_earlier_output(tmp_path):
    empty, output = tmp_path / "empty.txt", tmp_path / "features.jsonl"
    empty.write_bytes(b"")
    output.write_text('{"linex_index": 0}\n')
    records = ({"linex_index": e.unique_id} for e in text_lines.read_examples(str(empty)))
    with pytest.raises(ValueError, match=r"empty\.txt: the input file is empty"):
        features_data.write_jsonl(records, str(output))
    assert sorted(os.listdir(tmp_path)) == ["empty.txt", "features.jsonl"]
    assert output.read_text() == '{"linex_index": 0}\n'


def run_tool(*args):
    return tool_runs.run(
        [sys.executable, os.path.join(REPO, "tools", "extract_features.py"), *args], cwd=REPO, timeout=600
    )


def test_the_tool_writes_the_original_structure(fixtures_dir, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("Hello world.\nWho was Jim Henson ? ||| Jim Henson was a puppeteer .\n")
    output = tmp_path / "out.jsonl"
    common = [
        f"--input_file={source}",
        f"--vocab_file={VOCAB}",
        f"--bert_config_file={mf.GOOGLE_TINY_CONFIG}",
        f"--init_checkpoint={mf.GOOGLE_TINY_CKPT}",
        "--max_seq_length=16",
    ]
    # The original's TPU flags are accepted; its one-hot lookup gives the gather's values.
    result = run_tool(*common, f"--output_file={output}", "--layers=-1,0", "--use_one_hot_embeddings=True")
    assert result.returncode == 0, result.stderr[-2000:]
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert [list(r) for r in records] == [["linex_index", "features"]] * 2
    assert [f["token"] for f in records[0]["features"]] == ["[CLS]", "hello", "world", ".", "[SEP]"]
    layer = records[1]["features"][0]["layers"][1]
    assert list(layer) == ["index", "values"] and layer["index"] == 0 and len(layer["values"]) == 128

    # The flags' errors from the tool's call in this process (a ValueError, one line from the tool).
    flags = dict(arg[2:].split("=", 1) for arg in common)
    flags["max_seq_length"] = int(flags["max_seq_length"])
    for change, message in (
        (dict(layers="-3"), "--layers [-3] outside the model's 2 layers"),
        (dict(use_tpu=True), "needs --tpu_name or --master"),
        (dict(batch_size=0), "--batch_size must be at least 1, got 0"),
        (dict(doc_stride=0), "--doc_stride must be at least 1, got 0"),
        (
            dict(doc_stride=4, layers="-1"),
            f"{source}:2: a pair ('text_a ||| text_b'); --doc_stride reads single texts",
        ),
    ):
        options = FeaturesOptions(**flags, output_file=f"{tmp_path}/bad.jsonl", **change)
        with pytest.raises(ValueError, match=re.escape(message)):
            run_extract_features(options)
        assert not os.path.exists(tmp_path / "bad.jsonl")
