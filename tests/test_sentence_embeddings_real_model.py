"""Sentence embeddings of a real published sentence encoder, all-MiniLM-L6-v2 (`tests/real_model.py`),
held against what sentence-transformers' `encode()` itself gave (`tests/data/minilm_sentence_embeddings.npz`,
made by `tests/data/make_sentence_embeddings.py`): the Keras model, `extract_features.py
--pooling` and the exported signatures, within a cosine of 1 - 1e-6 and 1e-5 per component.

The model's HF directory is converted here with `--hf_model`, into a fresh directory, so the
pooling and normalisation the export applies by default are the ones this converter records.
Everything is `slow` (`make test-all`): fetching, converting and exporting MiniLM takes about a
minute on 2 cores.
"""

import json
import os

import numpy as np
import pytest

from bert_tf import BertConfig, BertSentenceEncoder, load_google_checkpoint
from bert_tf.checkpoints import converter, hf
from bert_tf.export.bert import export_bert
from bert_tf.model_settings import POOLINGS, ModelSettings, read_settings
from bert_tf.tasks.features import task as features_task
from bert_tf.tasks.features.run import FeaturesOptions, run_extract_features
from bert_tf.text import text_lines
from bert_tf.text.packing import pack_inputs
from bert_tf.text.tokenization import FullTokenizer
from tests import real_model

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
MAX_SEQ_LENGTH = 32
MAX_ABS = 1e-5
MAX_COSINE_GAP = 1e-6

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def recorded():
    with np.load(os.path.join(DATA, "minilm_sentence_embeddings.npz")) as data:
        return {key: data[key] for key in data.files}


@pytest.fixture(scope="module")
def google(tmp_path_factory):
    """MiniLM converted by `hf_to_google` into a fresh directory."""
    output = str(tmp_path_factory.mktemp("minilm") / "google")
    assert converter.hf_to_google(real_model.fetch_hf_model(), output).written
    return output


def assert_same_embeddings(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape
    assert np.max(np.abs(got - want)) <= MAX_ABS
    cosine = np.sum(got * want, axis=1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    assert np.min(cosine) >= 1 - MAX_COSINE_GAP


def variants():
    return [(mode, normalize) for mode in POOLINGS for normalize in (False, True)]


def recorded_key(mode, normalize):
    return f"{mode}_normalized" if normalize else mode


def test_the_converter_records_the_published_modules(google, recorded):
    """Mean pooling and Normalize, the length sentence-transformers cuts texts at, and the
    tokenizer's casing (uncased, whatever its sentence_bert_config.json says)."""
    assert read_settings(google) == ModelSettings(
        do_lower_case=True, pooling="mean", normalize=True, max_seq_length=int(recorded["max_seq_length"])
    )


def test_the_keras_model_gives_encode_for_every_pooling(google, recorded):
    config = BertConfig.from_json_file(os.path.join(google, "bert_config.json"))
    tokenizer = FullTokenizer(os.path.join(google, "vocab.txt"), do_lower_case=True)
    rows = [
        pack_inputs(tokenizer.tokenize(str(text)), None, MAX_SEQ_LENGTH, tokenizer)
        for text in recorded["text"]
    ]
    inputs = {
        key: np.array([row[key] for row in rows], np.int32)
        for key in ("input_ids", "input_mask", "segment_ids")
    }
    ids = recorded["input_ids"]
    np.testing.assert_array_equal(inputs["input_ids"][:, : ids.shape[1]], ids)
    model = BertSentenceEncoder(config)
    load_google_checkpoint(model, os.path.join(google, "bert_model.ckpt"))
    for mode, normalize in variants():
        encoder = BertSentenceEncoder(config, mode, normalize, bert=model.bert)
        assert_same_embeddings(encoder(inputs)["sentence_embedding"], recorded[recorded_key(mode, normalize)])


@pytest.mark.parametrize(("pooling", "normalize"), [("mean", True), ("cls", False)])
def test_extract_features_gives_encode(google, recorded, tmp_path, pooling, normalize):
    source = tmp_path / "in.txt"
    source.write_text("".join(f"{text}\n" for text in recorded["text"]), encoding="utf-8")
    options = FeaturesOptions(
        input_file=str(source),
        output_file=str(tmp_path / "out.jsonl"),
        vocab_file=os.path.join(google, "vocab.txt"),
        bert_config_file=os.path.join(google, "bert_config.json"),
        init_checkpoint=google,
        max_seq_length=MAX_SEQ_LENGTH,
        pooling=pooling,
        normalize=normalize,
    )
    run_extract_features(options)
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    got = [record["sentence_embedding"] for record in records]
    assert_same_embeddings(got, recorded[recorded_key(pooling, normalize)])


@pytest.mark.onednn_both
def test_the_export_applies_the_recorded_pooling_and_gives_encode(google, recorded, tmp_path):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the ops of the text signatures)

    path, _ = export_bert(
        google,
        os.path.join(google, "bert_config.json"),
        os.path.join(google, "vocab.txt"),
        True,
        MAX_SEQ_LENGTH,
        str(tmp_path / "export"),
        doc_stride=8,
    )
    loaded = tf.saved_model.load(path)
    texts = tf.constant([str(text) for text in recorded["text"]])
    want = recorded["published"]
    assert_same_embeddings(loaded.signatures["text"](text=texts)["sentence_embedding"], want)
    pairs = loaded.signatures["text_pair"](text_a=texts, text_b=tf.fill(tf.shape(texts), ""))
    assert_same_embeddings(pairs["sentence_embedding"], want)
    ids = recorded["input_ids"]
    served = loaded.signatures["serving_default"](
        input_ids=tf.constant(ids),
        input_mask=tf.constant((ids != 0).astype(np.int32)),
        segment_ids=tf.zeros_like(ids),
    )
    assert_same_embeddings(served["sentence_embedding"], want)
    # Every text fits in one window of 30 pieces: the windowed vector is the same.
    assert_same_embeddings(loaded.signatures["text_windowed"](text=texts)["sentence_embedding"], want)
    # All of them as one text of 70+ pieces: windows 8 apart, each piece from its max-context
    # window, as extract_features' windows (in Python, not the graph) pool it.
    long_text = " ".join(str(text) for text in recorded["text"])
    model = BertSentenceEncoder(BertConfig.from_json_file(os.path.join(google, "bert_config.json")))
    load_google_checkpoint(model, os.path.join(google, "bert_model.ckpt"))
    tokenizer = FullTokenizer(os.path.join(google, "vocab.txt"), do_lower_case=True)
    example = text_lines.InputExample(0, long_text)
    (python,) = features_task.sentence_embeddings(
        model, tokenizer, [example], MAX_SEQ_LENGTH, "mean", True, 8, 8
    )
    windowed = loaded.signatures["text_windowed"](text=tf.constant([long_text]))["sentence_embedding"]
    assert_same_embeddings(windowed, [python["sentence_embedding"]])


def test_the_modules_go_back_to_hf_as_sentence_transformers_wrote_them(google, recorded, tmp_path):
    back = str(tmp_path / "hf")
    converter.google_to_hf(
        os.path.join(google, "bert_config.json"), google, os.path.join(google, "vocab.txt"), True, back
    )
    for name in ("modules.json", "1_Pooling/config.json", "2_Normalize/config.json"):
        with (
            open(os.path.join(back, name), encoding="utf-8") as f,
            open(os.path.join(DATA, "st_modules", name)) as g,
        ):
            assert json.load(f) == json.load(g), name
    assert hf.read_sentence_modules(back) == ("mean", True)
    # The length as the published model gives it (sentence-transformers reads it as its
    # max_seq_length: `check_sentence_modules.py`), in the published file's form.
    name = hf.SENTENCE_CONFIG_FILE
    with (
        open(os.path.join(back, name), encoding="utf-8") as f,
        open(os.path.join(real_model.fetch_hf_model(), name), encoding="utf-8") as g,
    ):
        assert f.read().rstrip("\n") == g.read()
    assert hf.read_sentence_length(back, 512) == int(recorded["max_seq_length"])
