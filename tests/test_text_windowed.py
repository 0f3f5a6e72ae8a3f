"""The `text_windowed` signature (`ExportModule`'s `doc_stride`), against references computed
here: `FullTokenizer`'s ids cut by `bert_tf.text.windows` (`doc_spans`), each window run through
the Keras model, each token read from its window of `max_context_spans`.

google_tiny at `max_seq_length` 16 (windows of 14 WordPieces, stride 5): the encoder exported by
`export_saved_model.py`'s options (in this process), a classifier pooling by mean and a tagger by
`export_saved_model`, each exported and loaded once; the classifier pooling by max is the
`ExportModule`'s signature before saving. `TEXTS` make 12 windows: the encoder and the tagger run
them 5 at a time (three batches, the last one short), the classifiers 32 at a time (the default:
one batch).
"""

import logging
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the text signatures' ops)

from bert_tf import BertConfig, BertModel, load_google_checkpoint
from bert_tf.export import ExportModule, NamedLabels, ServedModel, export_saved_model
from bert_tf.export.bert import ExportOptions, run_export
from bert_tf.modeling import BertClassifier, BertTagger
from bert_tf.text.packing import pack_inputs
from bert_tf.text.windows import DocSpan, doc_spans, max_context_spans
from bert_tf.tokenization import FullTokenizer
from tests import model_fixtures as mf

# SavedModels for TF Serving: `make test` runs these with oneDNN on and off (BUILD_NOTES, Tests).
pytestmark = pytest.mark.onednn_both

VOCAB = os.path.join(mf.GOOGLE_TINY, "vocab.txt")
MAX_SEQ_LENGTH = 16
DOC_STRIDE = 5
ID_INPUTS = ("input_ids", "input_mask", "segment_ids")
LONG = (
    "The café's crème brûlée costs $4.50 — très bon! John Smith works for Acme in Paris, "
    "where the quick brown fox jumps over the lazy dog twice a day; 北京欢迎你 and Tokyo 東京."
)
# A long text (several windows), one that fits, an empty one, one just past a window.
TEXTS = [
    LONG,
    "Hello, world!",
    "",
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen",
]
SHORT_TEXTS = ["Hello, world!", "", "Naïve café", "tabs\tand\u200bzero-width\u00a0spaces"]
LABELS = ["O", "B-PER", "I-PER"]
# Probabilities of two float32 computations of the same model (the signature's batch of windows,
# the Keras model's): their matmuls add in another order wherever the kernels block the rows
# differently (oneDNN's, or Eigen's AVX-512 and AVX2 ones), so they agree to float32's rounding
# through the layers, not to the bit (measured up to 2e-6 on an AVX-512 Xeon).
PROBABILITIES = 1e-5
WINDOW_BATCH_SIZE = 5
# The encoder export's max_windowed_tokens: exactly `TEXTS`' size, 4 texts x (51 + 2).
MAX_WINDOWED_TOKENS = 212


@pytest.fixture(scope="module")
def tokenizer():
    return FullTokenizer(VOCAB, do_lower_case=True)


def windows_of(tokenizer, text):
    """The reference windows of `text`: its tokens, their spans, each window's packed inputs and
    each token's window. An empty text gets one empty window, as the signature gives it."""
    tokens = tokenizer.tokenize(text)
    spans = doc_spans(len(tokens), MAX_SEQ_LENGTH - 2, DOC_STRIDE) or [DocSpan(0, 0)]
    packed = [
        pack_inputs(tokens[s.start : s.start + s.length], None, MAX_SEQ_LENGTH, tokenizer) for s in spans
    ]
    inputs = {k: np.array([p[k] for p in packed], np.int32) for k in ID_INPUTS}
    return tokens, spans, inputs, max_context_spans(spans, len(tokens))


def per_token(window_outputs, spans, best):
    """Rows of [CLS], each token from its window of most context, the last window's [SEP]."""
    rows = [window_outputs[0][0]]
    rows += [window_outputs[w][1 + t - spans[w].start] for t, w in enumerate(best)]
    rows.append(window_outputs[-1][spans[-1].length + 1])
    return np.stack(rows)


def tiny_config():
    return BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG)


def tiny_bert():
    bert = BertModel(tiny_config())
    load_google_checkpoint(bert, mf.GOOGLE_TINY_CKPT)
    return bert


def with_tiny_bert_and_a_bold_head(model, seed):
    """`model` (a `BertClassifier` or `BertTagger`) with google_tiny's encoder and a head of
    large random weights, so that windows disagree on the best class."""
    model({k: np.zeros([1, 2], np.int32) for k in ID_INPUTS})
    model.bert.set_weights(tiny_bert().get_weights())
    rng = np.random.default_rng(seed)
    encoder = {id(v) for v in model.bert.weights}
    for variable in model.weights:
        if id(variable) not in encoder:
            variable.assign(rng.normal(0, 1.0, variable.shape).astype(np.float32))
    return model


class Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    """The signatures of the encoder exported with `--doc_stride` (by the tool's options) and
    loaded, the Keras model, and what the export logged."""
    options = ExportOptions(
        bert_config_file=mf.GOOGLE_TINY_CONFIG,
        init_checkpoint=mf.GOOGLE_TINY_CKPT,
        vocab_file=VOCAB,
        max_seq_length=MAX_SEQ_LENGTH,
        export_dir=str(tmp_path_factory.mktemp("encoder")),
        doc_stride=DOC_STRIDE,
        window_batch_size=WINDOW_BATCH_SIZE,
        max_windowed_tokens=MAX_WINDOWED_TOKENS,
    )
    logger, records = logging.getLogger("bert_tf.export.module"), Records()
    logger.addHandler(records)
    level, logger.level = logger.level, logging.INFO
    try:
        loaded = tf.saved_model.load(run_export(options))
    finally:
        logger.removeHandler(records)
        logger.setLevel(level)
    return loaded.signatures, tiny_bert(), records.messages


def export_head(model, labels, tmp_path_factory, **options):
    """The signatures of `model` exported with its `probabilities` named by `labels` (and
    `export_saved_model`'s `options`), and loaded."""
    path = export_saved_model(
        NamedLabels(model, LABELS, scores="probabilities", output=labels),
        ["probabilities", labels],
        VOCAB,
        True,
        MAX_SEQ_LENGTH,
        str(tmp_path_factory.mktemp("head")),
        config=model.config,
        doc_stride=DOC_STRIDE,
        **options,
    )
    return tf.saved_model.load(path).signatures


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    """{pooling: signatures}, and the Keras model."""
    model = with_tiny_bert_and_a_bold_head(BertClassifier(tiny_config(), len(LABELS)), seed=1)
    named = NamedLabels(model, LABELS, scores="probabilities", output="label")
    served = ServedModel(named, ("probabilities", "label"))
    module = ExportModule(served, VOCAB, True, MAX_SEQ_LENGTH, doc_stride=DOC_STRIDE, window_pooling="max")
    return {"mean": export_head(model, "label", tmp_path_factory), "max": module.signatures()}, model


@pytest.fixture(scope="module")
def tagger(tmp_path_factory):
    model = with_tiny_bert_and_a_bold_head(BertTagger(tiny_config(), len(LABELS)), seed=2)
    # As `run_tagger.py` exports it: the text signatures also return the tokens.
    return (
        export_head(model, "labels", tmp_path_factory, text_tokens=True, window_batch_size=WINDOW_BATCH_SIZE),
        model,
    )


def decoded(strings):
    return [s.decode() for s in strings]


def test_the_encoder_reads_each_token_from_its_window_of_most_context(encoder, tokenizer):
    signatures, bert, _ = encoder
    got = signatures["text_windowed"](text=tf.constant(TEXTS))
    assert sorted(got) == ["end_offsets", "sequence_output", "start_offsets", "tokens"]  # no pooled_output
    lengths = [len(tokenizer.tokenize(text)) + 2 for text in TEXTS]
    assert lengths[0] > 3 * MAX_SEQ_LENGTH
    width = -(-max(lengths) // 8) * 8
    assert got["sequence_output"].shape == (len(TEXTS), width, 128)
    for i, text in enumerate(TEXTS):
        tokens, spans, inputs, best = windows_of(tokenizer, text)
        want = per_token(np.asarray(bert(inputs)["sequence_output"]), spans, best)
        n = len(tokens) + 2
        np.testing.assert_allclose(got["sequence_output"][i][:n], want, atol=1e-5, rtol=0)
        assert not np.any(got["sequence_output"][i][n:])  # filled with 0
        assert decoded(got["tokens"][i].numpy()) == ["[CLS]", *tokens, "[SEP]"] + [""] * (width - n)
        # Offsets: FullTokenizer's in bytes, -1 at [CLS], [SEP] and the padding.
        _, starts, ends = tokenizer.tokenize_with_offsets(text)
        for name, offsets in (("start_offsets", starts), ("end_offsets", ends)):
            in_bytes = [len(text[:offset].encode()) for offset in offsets]
            assert got[name][i].numpy().tolist() == [-1, *in_bytes] + [-1] * (width - n + 1), name


def test_a_request_that_fits_equals_the_text_signature(encoder, classifier, tagger, tokenizer):
    texts = tf.constant(SHORT_TEXTS)
    lengths = [len(tokenizer.tokenize(text)) + 2 for text in SHORT_TEXTS]
    signatures = encoder[0]
    windowed, text = (signatures[name](text=texts) for name in ("text_windowed", "text"))
    assert windowed["sequence_output"].shape == text["sequence_output"].shape
    for i, n in enumerate(lengths):
        np.testing.assert_allclose(
            windowed["sequence_output"][i][:n], text["sequence_output"][i][:n], atol=1e-5
        )
    for pooling, signatures in classifier[0].items():
        windowed, text = (signatures[name](text=texts) for name in ("text_windowed", "text"))
        np.testing.assert_allclose(
            windowed["probabilities"], text["probabilities"], atol=PROBABILITIES, err_msg=pooling
        )
        assert decoded(windowed["label"].numpy()) == decoded(text["label"].numpy())
    signatures = tagger[0]
    windowed, text = (signatures[name](text=texts) for name in ("text_windowed", "text"))
    for i, n in enumerate(lengths):
        np.testing.assert_allclose(
            windowed["probabilities"][i][:n], text["probabilities"][i][:n], atol=PROBABILITIES
        )
        assert decoded(windowed["labels"][i][:n].numpy()) == decoded(text["labels"][i][:n].numpy())
        assert decoded(windowed["tokens"][i].numpy()) == decoded(text["tokens"][i].numpy())
        for name in ("start_offsets", "end_offsets"):
            assert windowed[name][i].numpy().tolist() == text[name][i].numpy().tolist()


def test_the_classifier_pools_the_windows_probabilities(classifier, tokenizer):
    exports, model = classifier
    for pooling, signatures in exports.items():
        got = signatures["text_windowed"](text=tf.constant(TEXTS))
        assert sorted(got) == ["label", "probabilities"]
        want = []
        for text in TEXTS:
            windows = np.asarray(model(windows_of(tokenizer, text)[2])["probabilities"])
            want.append(windows.mean(axis=0) if pooling == "mean" else windows.max(axis=0))
        np.testing.assert_allclose(got["probabilities"], np.stack(want), atol=PROBABILITIES, err_msg=pooling)
        assert decoded(got["label"].numpy()) == [LABELS[i] for i in np.argmax(want, axis=1)]
    # The long text's windows differ enough that mean and max, or other windows, would not pass.
    windows = np.asarray(model(windows_of(tokenizer, LONG)[2])["probabilities"])
    assert np.min(np.max(windows, axis=0) - np.mean(windows, axis=0)) > 1e-3


def test_the_tagger_labels_each_token_from_its_window_of_most_context(tagger, tokenizer):
    signatures, model = tagger
    got = signatures["text_windowed"](text=tf.constant(TEXTS))
    assert sorted(got) == ["end_offsets", "labels", "probabilities", "start_offsets", "tokens"]
    width = got["labels"].shape[1]
    for i, text in enumerate(TEXTS):
        tokens, spans, inputs, best = windows_of(tokenizer, text)
        want = per_token(np.asarray(model(inputs)["probabilities"]), spans, best)
        n = len(tokens) + 2
        np.testing.assert_allclose(got["probabilities"][i][:n], want, atol=PROBABILITIES)
        names = [LABELS[j] for j in np.argmax(want, axis=1)]
        assert decoded(got["labels"][i].numpy()) == names + [""] * (width - n)


def test_a_request_past_max_windowed_tokens_is_refused_and_the_model_serves_on(encoder, tokenizer):
    signatures, _, _ = encoder
    texts = [*TEXTS, ""]  # one text more than the cap admits
    size = len(texts) * (max(len(tokenizer.tokenize(text)) for text in texts) + 2)
    assert size > MAX_WINDOWED_TOKENS
    with pytest.raises(tf.errors.InvalidArgumentError, match=rf"is {size} tokens .*max_windowed_tokens=212"):
        signatures["text_windowed"](text=tf.constant(texts))
    got = signatures["text_windowed"](text=tf.constant(["Hello, world!"]))
    assert decoded(got["tokens"][0].numpy()[:6]) == ["[CLS]", *tokenizer.tokenize("Hello, world!"), "[SEP]"]


def test_an_empty_request_gets_empty_outputs(encoder, classifier):
    got = encoder[0]["text_windowed"](text=tf.constant([], tf.string))
    assert got["sequence_output"].shape[0] == 0 and got["tokens"].shape[0] == 0
    got = classifier[0]["mean"]["text_windowed"](text=tf.constant([], tf.string))
    assert got["probabilities"].shape == (0, len(LABELS))


def test_the_export_logs_that_text_cuts_and_text_windowed_windows(encoder):
    assert any(
        "text signatures cut a text past max_seq_length=16 WordPieces; text_windowed windows it "
        "(14 pieces a window, doc_stride=5; 5 windows at a time, requests up to "
        "max_windowed_tokens=212)" in message
        for message in encoder[2]
    ), encoder[2]


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"doc_stride": 0}, "doc_stride must be positive"),
        ({"doc_stride": 4, "text_signatures": False}, "it needs text_signatures"),
        ({"doc_stride": 4, "window_pooling": "sum"}, "window_pooling must be one of"),
        ({"doc_stride": 4, "window_batch_size": 0}, "window_batch_size must be positive"),
        ({"doc_stride": 4, "max_windowed_tokens": 0}, "max_windowed_tokens must be positive"),
        ({"doc_stride": 4, "max_text_a_tokens": 4}, "windows its own way"),
        ({"doc_stride": 4, "output_names": ["pooled_output"]}, "text_windowed would return nothing"),
        ({"doc_stride": 4, "output_names": ["sequence_output", "tokens"]}, "returns 'tokens' itself"),
    ],
)
def test_bad_windowing_arguments_are_errors_and_write_nothing(arguments, message, tmp_path):
    class Outputs(keras.layers.Layer):
        """An encoder that also returns a `tokens` output."""

        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def call(self, inputs):
            outputs = self.bert(inputs)
            return dict(outputs, tokens=outputs["sequence_output"])

    arguments = dict(arguments)
    output_names = arguments.pop("output_names", ["sequence_output"])
    model = Outputs(BertModel(BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG)))
    with pytest.raises(ValueError, match=message):
        export_saved_model(model, output_names, VOCAB, True, 8, str(tmp_path / "out"), **arguments)
    assert not os.path.exists(tmp_path / "out")
