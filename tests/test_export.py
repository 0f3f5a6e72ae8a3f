"""SavedModel export: every signature, called from a moved export in a process without bert_tf.

The google_tiny fixture is exported once (with its heads) and moved; a fresh Python process that
imports only TensorFlow (and tensorflow-text) loads it and answers TF Serving REST request
bodies, and its outputs are compared with the original's reference outputs, with
`serving_default` on `FullTokenizer`'s ids, or with the float64 NumPy reference. Run with `-s` to
see the max abs difference of each comparison.

One fresh client process answers the requests of two exports: first those of an export without
the text signatures, before it imports tensorflow-text; then it runs `saved_model_cli show` on the
moved export, and answers that export's requests. The tools run forked (`tests/tool_runs.py`).

The tests that run an export's signatures or read its graph are `onednn_both`: `make test` runs
them with oneDNN on and off (BUILD_NOTES, Tests).
"""

import base64
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from bert_tf import BertConfig, BertModel, load_google_checkpoint
from bert_tf.checkpoints import reference
from bert_tf.export import (
    NamedLabels,
    export_bert,
    export_saved_model,
    next_version,
    versioned_directory,
)
from bert_tf.export.bert import ExportOptions, run_export
from bert_tf.text.packing import pack_inputs
from bert_tf.tokenization import FullTokenizer
from tests import model_fixtures as mf
from tests import tool_runs
from tests.conftest import FIXTURES_DIR

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVING_DOC = os.path.join(REPO, "docs", "serving.md")
VOCAB = os.path.join(mf.GOOGLE_TINY, "vocab.txt")
TRAIN_CONFIG = os.path.join(FIXTURES_DIR, "google_tiny_train", "bert_config.json")
TRAIN_CKPT = os.path.join(FIXTURES_DIR, "google_tiny_train", "model.ckpt-3")
MAX_SEQ_LENGTH = 128
MAX_PREDICTIONS = 20
ID_INPUTS = ("input_ids", "input_mask", "segment_ids")
ENCODER_OUTPUTS = ("sequence_output", "pooled_output")

TEXTS = [
    "Hello, world!",
    "The café's crème brûlée costs $4.50 — très bon!",
    "北京欢迎你 and Tokyo 東京, ＦＵＬＬＷＩＤＴＨ",
    "tabs\tand\u200bzero-width\u00a0spaces",
    "",
    " ".join(["The quick brown fox jumps over the lazy dog."] * 20),  # truncated
]
PAIRS = [
    ("Who wrote BERT?", "Google did, in 2018."),
    ("A single text: text_b is empty.", ""),
    ("text_b has no tokens", "\u200b"),
    ("   ", "Only text_b has tokens."),
    (" ".join(["long first"] * 100), "short second"),
    ("short first", " ".join(["long second"] * 100)),
    (" ".join(["both long"] * 100), " ".join(["really both"] * 100)),
]


def rest_columns(body, input_names):
    """A TF Serving REST `:predict` body -> {input name: batched value}, as the model server reads it.

    Row format: `instances`, one entry per example, each an object of named inputs or, for a
    signature with a single input, the bare value. Columnar format: `inputs`, an object of
    batched inputs or, for a single input, the bare batch. `{"b64": ...}` is a binary string.
    """

    def decode(value):
        if isinstance(value, dict):
            return base64.b64decode(value["b64"])
        if isinstance(value, list):
            return [decode(v) for v in value]
        return value

    def named(value):
        return isinstance(value, dict) and "b64" not in value

    if "instances" in body:
        rows = body["instances"]
        if all(named(row) for row in rows):
            assert all(sorted(row) == sorted(input_names) for row in rows), (rows, input_names)
            return {name: [decode(row[name]) for row in rows] for name in input_names}
        (name,) = input_names
        return {name: decode(rows)}
    inputs = body["inputs"]
    if named(inputs):
        assert sorted(inputs) == sorted(input_names), (inputs, input_names)
        return {name: decode(inputs[name]) for name in input_names}
    (name,) = input_names
    return {name: decode(inputs)}


# Run as a file in a fresh interpreter: argv = a plan (JSON), the outputs (.npz). The plan's
# parts run in this order, each optional: "no_text", an export and its requests answered before
# tensorflow-text is imported (output keys `no_text:<name>/<output>`, `no_text:modules`, ...);
# "saved_model_cli", a directory TensorFlow's `saved_model_cli show --all --dir` lists, still
# without tensorflow-text (`saved_model_cli:status`, `saved_model_cli:stdout`); "text", an export
# and its requests answered with tensorflow-text (keys `<name>/<output>`, `modules`, ...).
# Requests are {name: REST body}.
_CLIENT = """
import base64
import contextlib
import io
import json
import sys

sys.modules["bert_tf"] = None  # importing bert_tf fails here: the exports must not need it
import numpy as np
import tensorflow as tf

{rest_columns}


def answer(part, prefix, results):
    loaded = tf.saved_model.load(part["export"])
    for name, body in part["requests"].items():
        signature = loaded.signatures[body.get("signature_name", "serving_default")]
        specs = signature.structured_input_signature[1]
        columns = rest_columns(body, sorted(specs))
        outputs = signature(**{{k: tf.constant(v, dtype=specs[k].dtype) for k, v in columns.items()}})
        results.update({{f"{{prefix}}{{name}}/{{k}}": v.numpy() for k, v in outputs.items()}})
    results[prefix + "vocab_file"] = np.array(loaded.vocab_file.asset_path.numpy().decode())
    results[prefix + "do_lower_case"] = loaded.do_lower_case.numpy()
    results[prefix + "max_seq_length"] = loaded.max_seq_length.numpy()
    imported = {{name.split(".")[0] for name, module in sys.modules.items() if module is not None}}
    results[prefix + "modules"] = np.array(sorted(imported & {{"bert_tf", "tensorflow_text"}}), dtype=str)


plan_file, outputs_file = sys.argv[1:3]
with open(plan_file) as f:
    plan = json.load(f)
results = {{}}
if "no_text" in plan:
    answer(plan["no_text"], "no_text:", results)
if "saved_model_cli" in plan:  # what the `saved_model_cli` console script runs
    from tensorflow.python.tools.saved_model_cli import main

    sys.argv = ["saved_model_cli", "show", "--all", "--dir", plan["saved_model_cli"]]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        try:
            status = main()
        except SystemExit as exit:
            status = exit.code
    results["saved_model_cli:status"] = np.array(status or 0)
    results["saved_model_cli:stdout"] = np.array(printed.getvalue())
if "text" in plan:
    import tensorflow_text  # noqa: F401 (registers the ops of the text signatures)

    answer(plan["text"], "", results)
np.savez(outputs_file, **results)
"""


def call_in_fresh_process(plan, tmp_path):
    """Runs `plan` (see `_CLIENT`) in a new interpreter that has no bert_tf; returns its outputs."""
    client = tmp_path / "client.py"
    client.write_text(_CLIENT.format(rest_columns=inspect.getsource(rest_columns)))
    plan_file, outputs_file = tmp_path / "plan.json", tmp_path / "outputs.npz"
    plan_file.write_text(json.dumps(plan))
    result = subprocess.run(
        [sys.executable, str(client), str(plan_file), str(outputs_file)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    with np.load(outputs_file) as data:
        return {key: data[key] for key in data.files}


def columnar(signature, **inputs):
    return {
        "signature_name": signature,
        "inputs": {k: np.asarray(v).tolist() for k, v in inputs.items()},
    }


def packed_ids(tokenizer, pairs):
    """`FullTokenizer` + the original's packing, to MAX_SEQ_LENGTH: {input: [rows]}."""
    rows = [
        pack_inputs(tokenizer.tokenize(a), tokenizer.tokenize(b) if b else None, MAX_SEQ_LENGTH, tokenizer)
        for a, b in pairs
    ]
    return {name: [row[name] for row in rows] for name in ID_INPUTS}


def serialized_examples(batch):
    """The rows of a reference batch as the original's pretraining TFRecords hold them."""
    for row in range(len(batch["input_ids"])):

        def ints(name, row=row):
            return tf.train.Feature(int64_list=tf.train.Int64List(value=batch[name][row]))

        feature = {name: ints(name) for name in (*ID_INPUTS, "masked_lm_positions", "masked_lm_ids")}
        feature["masked_lm_weights"] = tf.train.Feature(
            float_list=tf.train.FloatList(value=batch["masked_lm_weights"][row])
        )
        feature["next_sentence_labels"] = ints("next_sentence_labels")
        yield tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def readme_requests():
    """The REST bodies docs/serving.md marks with `<!-- rest-request -->` (json blocks, curl's -d)."""
    with open(SERVING_DOC, encoding="utf-8") as f:
        blocks = re.findall(r"<!-- rest-request -->\s*```(\w+)\n(.*?)```", f.read(), re.DOTALL)
    bodies = []
    for language, text in blocks:
        if language == "sh":
            text = re.search(r"-d '(.*?)'", text, re.DOTALL).group(1)
        bodies.append(json.loads(text))
    return bodies


def max_diff(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def as_packed(name, outputs, input_mask):
    """The output `name` of `outputs` as an export with token packing gives it (the default,
    `bert_tf.modeling.token_packing`): per-token outputs are zeros at the padding."""
    value = np.asarray(outputs[name])
    if name != "sequence_output":
        return value
    return value * (np.asarray(input_mask) > 0)[..., None]


def report(name, diff):
    print(f"\n  max |{name}| = {diff:.3e}")
    return diff


@pytest.fixture(scope="module")
def batches():
    return mf.reference_arrays()


@pytest.fixture(scope="module")
def tokenizer():
    return FullTokenizer(VOCAB, do_lower_case=True)


@pytest.fixture(scope="module")
def moved_export(tmp_path_factory):
    """google_tiny exported with its heads, then moved; the vocab it was made from is deleted."""
    root = tmp_path_factory.mktemp("export")
    vocab = root / "vocab.txt"
    shutil.copy(VOCAB, vocab)
    path, load_report = export_bert(
        mf.GOOGLE_TINY_CKPT,
        mf.GOOGLE_TINY_CONFIG,
        str(vocab),
        True,
        MAX_SEQ_LENGTH,
        str(root / "written"),
        with_heads=True,
        max_predictions_per_seq=MAX_PREDICTIONS,
    )
    assert path == str(root / "written" / "1")
    assert len(load_report.loaded) == 46 and not load_report.unused
    vocab.unlink()
    (root / "moved").mkdir()
    moved = root / "moved" / "bert"
    shutil.move(root / "written", moved)
    assert os.listdir(moved) == ["1"]
    return moved


@pytest.fixture(scope="module")
def requests(batches, tokenizer):
    """Every signature's requests: {name: REST body}."""
    requests = {}
    for key, batch in batches.items():
        ids = {name: batch[name] for name in ID_INPUTS}
        requests[f"ids_{key}"] = columnar("serving_default", **ids)
        positions = np.zeros([len(batch["input_ids"]), MAX_PREDICTIONS], np.int32)
        positions[:, : batch["masked_lm_positions"].shape[1]] = batch["masked_lm_positions"]
        requests[f"pretraining_{key}"] = columnar("pretraining", **ids, masked_lm_positions=positions)
    requests["text"] = {"signature_name": "text", "instances": TEXTS}
    requests["text_ids"] = columnar("serving_default", **packed_ids(tokenizer, [(t, "") for t in TEXTS]))
    requests["pair"] = columnar("text_pair", text_a=[a for a, _ in PAIRS], text_b=[b for _, b in PAIRS])
    requests["pair_ids"] = columnar("serving_default", **packed_ids(tokenizer, PAIRS))
    # Requests of short texts only, which the text signatures pad to less than MAX_SEQ_LENGTH.
    requests["text_short"] = {"signature_name": "text", "instances": TEXTS[:5]}
    requests["text_short_ids"] = columnar(
        "serving_default", **packed_ids(tokenizer, [(t, "") for t in TEXTS[:5]])
    )
    requests["pair_short"] = columnar(
        "text_pair", text_a=[a for a, _ in PAIRS[:4]], text_b=[b for _, b in PAIRS[:4]]
    )
    requests["pair_short_ids"] = columnar("serving_default", **packed_ids(tokenizer, PAIRS[:4]))
    # b1 and b2: both 128 long, with padding, two segments and one single-segment row.
    examples = [e for key in ("b1", "b2") for e in serialized_examples(batches[key])]
    requests["examples"] = {
        "signature_name": "tf_example",
        "instances": [{"b64": base64.b64encode(e).decode()} for e in examples],
    }
    both = {name: np.concatenate([batches["b1"][name], batches["b2"][name]]) for name in ID_INPUTS}
    requests["examples_ids"] = columnar("serving_default", **both)
    for i, body in enumerate(readme_requests()):
        requests[f"readme_{i}"] = body
    return requests


@pytest.fixture(scope="module")
def keras_export(moved_export, tmp_path_factory):
    """google_tiny saved as a .keras file and exported without the text signatures and without
    token packing (the original's outputs at the padding too) to the next version beside a copy
    of the moved export: (base directory, `export_bert`'s path and report)."""
    tmp_path = tmp_path_factory.mktemp("keras")
    model = BertModel(BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG))
    load_google_checkpoint(model, mf.GOOGLE_TINY_CKPT)
    model.save(tmp_path / "bert.keras")
    base = tmp_path / "bert"
    shutil.copytree(moved_export / "1", base / "1")
    path, load_report = export_bert(
        str(tmp_path / "bert.keras"),
        None,
        VOCAB,
        True,
        MAX_SEQ_LENGTH,
        str(base),
        text_signatures=False,
        pack_tokens=False,
    )
    return base, path, load_report


@pytest.fixture(scope="module")
def served(moved_export, keras_export, requests, batches, tmp_path_factory):
    """The outputs of every request, computed in one fresh process (`_CLIENT`): the reference
    batches through the .keras file's export before tensorflow-text is imported (`no_text:`
    keys), `saved_model_cli show --all` of the moved export, then every request of `requests`
    from the moved export."""
    keras_requests = {
        key: columnar("serving_default", **{k: batches[key][k] for k in ID_INPUTS}) for key in mf.BATCHES
    }
    plan = {
        "no_text": {"export": keras_export[1], "requests": keras_requests},
        "saved_model_cli": str(moved_export / "1"),
        "text": {"export": str(moved_export / "1"), "requests": requests},
    }
    return call_in_fresh_process(plan, tmp_path_factory.mktemp("client"))


@pytest.mark.onednn_both
def test_the_fresh_process_has_no_bert_tf_and_finds_the_moved_vocab(served, moved_export):
    assert list(served["modules"]) == ["tensorflow_text"]
    vocab_file = str(served["vocab_file"])
    assert vocab_file == str(moved_export / "1" / "assets" / "vocab.txt")
    with open(vocab_file, "rb") as moved, open(VOCAB, "rb") as original:
        assert moved.read() == original.read()
    assert bool(served["do_lower_case"]) is True
    assert int(served["max_seq_length"]) == MAX_SEQ_LENGTH


@pytest.mark.onednn_both
@pytest.mark.parametrize("batch", mf.BATCHES)
def test_serving_default_matches_the_original(served, batches, batch):
    """The original's outputs at the real tokens, and zeros at the padding (the export packs the
    tokens; `test_keras_file_exports_...` checks an export without packing at every position)."""
    # b0 is 32 long, b1 and b2 are 128: any length up to max_seq_length.
    mask = batches[batch]["input_mask"]
    assert 0 < mask.sum() < mask.size  # real tokens and padding
    for name in ENCODER_OUTPUTS:
        got = served[f"ids_{batch}/{name}"]
        assert got.shape == batches[batch][name].shape
        want = as_packed(name, batches[batch], mask)
        assert report(f"serving_default {batch} {name} - original", max_diff(got, want)) <= 1e-5


@pytest.mark.onednn_both
@pytest.mark.parametrize("batch", mf.BATCHES)
def test_pretraining_matches_the_original(served, batches, batch):
    want = batches[batch]
    rows, predictions = want["masked_lm_positions"].shape
    log_probs = served[f"pretraining_{batch}/masked_lm_log_probs"]
    assert log_probs.shape == (rows, MAX_PREDICTIONS, 30522)
    want_log_probs = want["masked_lm_log_probs"].reshape(rows, predictions, -1)
    # Slots past the batch's own predictions are padding (position 0) the original never had.
    diff = max_diff(log_probs[:, :predictions], want_log_probs)
    assert report(f"pretraining {batch} masked_lm_log_probs - original", diff) <= 1e-5
    diff = max_diff(served[f"pretraining_{batch}/next_sentence_log_probs"], want["next_sentence_log_probs"])
    assert report(f"pretraining {batch} next_sentence_log_probs - original", diff) <= 1e-5


@pytest.mark.onednn_both
@pytest.mark.parametrize(
    "signature, seq", [("text", 128), ("pair", 128), ("text_short", 24), ("pair_short", 16)]
)
def test_text_signatures_match_serving_default_on_full_tokenizer_ids(served, requests, signature, seq):
    """The text signatures pad to the request's longest row rounded up to 8 (24 for 20 tokens,
    16 for 13; a truncated row fills `MAX_SEQ_LENGTH`), and give at each real token what
    `serving_default` gives on `FullTokenizer`'s ids padded to `MAX_SEQ_LENGTH`."""
    ids = requests[f"{signature}_ids"]["inputs"]
    masks, segments = np.array(ids["input_mask"]), np.array(ids["segment_ids"])
    assert not masks.all() and masks[:, -1].any() == (seq == MAX_SEQ_LENGTH)  # padded rows, truncated ones
    assert -(-masks.sum(axis=1).max() // 8) * 8 == seq
    if signature == "pair":
        assert segments.any(axis=1).sum() == 5  # five pairs, two packed as single texts
    got, want = served[f"{signature}/sequence_output"], served[f"{signature}_ids/sequence_output"]
    assert got.shape == (len(masks), seq, want.shape[2])
    diff = max_diff(got[masks[:, :seq] == 1], want[masks == 1])
    assert report(f"{signature} sequence_output - serving_default(FullTokenizer ids)", diff) <= 1e-5
    got, want = served[f"{signature}/pooled_output"], served[f"{signature}_ids/pooled_output"]
    assert got.shape == want.shape
    assert (
        report(f"{signature} pooled_output - serving_default(FullTokenizer ids)", max_diff(got, want)) <= 1e-5
    )


@pytest.mark.onednn_both
def test_tf_example_equals_serving_default(served, batches):
    for name in ENCODER_OUTPUTS:
        got, want = served[f"examples/{name}"], served[f"examples_ids/{name}"]
        report(f"tf_example {name} - serving_default", max_diff(got, want))
        np.testing.assert_array_equal(got, want)
    # ...and both are the original's, so no feature went in as another.
    want = np.concatenate([batches["b1"]["pooled_output"], batches["b2"]["pooled_output"]])
    assert max_diff(served["examples/pooled_output"], want) <= 1e-5


@pytest.mark.onednn_both
def test_ids_outside_the_tables_are_errors_and_an_empty_batch_is_served(opened, moved_export):
    """What a server may be sent: a negative id would read a row from the table's end, an int64
    id past 2^32 would wrap into range, a masked position past its sequence another example's
    token; each is refused with a message naming the input."""
    path, loaded = opened  # the moved export, loaded with tensorflow-text's ops
    assert path == str(moved_export / "1")
    ids = loaded.signatures["serving_default"]

    def inputs(input_id=1000, segment_id=0, rows=2, seq=8):
        return dict(
            input_ids=tf.fill((rows, seq), input_id),
            input_mask=tf.ones((rows, seq), tf.int32),
            segment_ids=tf.fill((rows, seq), segment_id),
        )

    for bad, message in [
        (dict(input_id=-1), "input_ids has a negative id"),
        (dict(input_id=30522), "input_ids has an id of vocab_size=30522 or more, past the embedding table"),
        (dict(segment_id=-1), "segment_ids has a negative id"),
        (dict(segment_id=2), "segment_ids has an id of type_vocab_size=2 or more"),
        (dict(seq=0), r"input_ids has no tokens per row \(at least \[CLS\]\)"),
    ]:
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            ids(**inputs(**bad))
    # The three inputs in other shapes broadcast inside the model: answered, wrongly.
    for name, shape in (("input_mask", (1, 8)), ("segment_ids", (2, 1)), ("input_mask", (2, 9))):
        request = dict(inputs(), **{name: tf.zeros(shape, tf.int32)})
        with pytest.raises(tf.errors.InvalidArgumentError, match=f"{name} is not shaped as input_ids"):
            ids(**request)
    with pytest.raises(tf.errors.InvalidArgumentError, match="input_mask holds a value other than 0 and 1"):
        ids(**dict(inputs(), input_mask=tf.fill((2, 8), 7)))
    assert ids(**inputs(rows=0))["sequence_output"].shape == (0, 8, 128)
    assert ids(**inputs(rows=0, seq=0))["pooled_output"].shape == (0, 128)
    assert loaded.signatures["text"](text=tf.zeros([0], tf.string))["pooled_output"].shape == (0, 128)
    with pytest.raises(tf.errors.InvalidArgumentError, match="text_a and text_b hold different numbers"):
        loaded.signatures["text_pair"](text_a=tf.constant(["a", "b"]), text_b=tf.constant(["c"]))

    example = tf.train.Example()
    for name, value in (("input_ids", 2**32 + 7), ("input_mask", 1), ("segment_ids", 0)):
        example.features.feature[name].int64_list.value.extend([value] * MAX_SEQ_LENGTH)
    with pytest.raises(tf.errors.InvalidArgumentError, match="input_ids has an id of vocab_size"):
        loaded.signatures["tf_example"](examples=tf.constant([example.SerializeToString()]))

    pretraining = loaded.signatures["pretraining"]
    for position, message in [(8, "position past the sequence"), (-1, "masked_lm_positions has a negative")]:
        positions = tf.fill((2, MAX_PREDICTIONS), position)
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            pretraining(**inputs(), masked_lm_positions=positions)


@pytest.mark.onednn_both
def test_readme_requests_give_the_reference_outputs(served, requests, tokenizer):
    weights = reference.load_checkpoint_weights(mf.GOOGLE_TINY_CKPT)
    config = BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG)
    names = [name for name in requests if name.startswith("readme_")]
    signatures = {requests[name].get("signature_name", "serving_default") for name in names}
    assert signatures == {"serving_default", "text", "text_pair"}
    assert {"instances", "inputs"} <= {key for name in names for key in requests[name]}
    for name in names:
        body = requests[name]
        signature = body.get("signature_name", "serving_default")
        if signature == "serving_default":
            ids = rest_columns(body, ID_INPUTS)
        elif signature == "text":
            ids = packed_ids(tokenizer, [(text, "") for text in rest_columns(body, ["text"])["text"]])
        else:
            columns = rest_columns(body, ["text_a", "text_b"])
            ids = packed_ids(tokenizer, list(zip(columns["text_a"], columns["text_b"], strict=True)))
        want = reference.reference_forward(weights, config, *(np.asarray(ids[k]) for k in ID_INPUTS))
        # The text signatures pad to the request: their tokens are compared.
        seq = served[f"{name}/sequence_output"].shape[1]
        real = np.asarray(ids["input_mask"])[:, :seq] == 1
        want["sequence_output"] = np.where(real[..., None], want["sequence_output"][:, :seq], 0)
        for output in ENCODER_OUTPUTS:
            got = served[f"{name}/{output}"]
            if output == "sequence_output":
                got = np.where(real[..., None], got, 0)
            diff = max_diff(got, want[output])
            what = f"docs/serving.md request {name} ({signature}) {output} - float64 reference"
            assert report(what, diff) <= 1e-5


def _readme_signature_table():
    with open(SERVING_DOC, encoding="utf-8") as f:
        text = f.read().split("<!-- signatures-table", 1)[1]
    rows = set()
    for line in text.splitlines()[3:]:
        if not line.startswith("|"):
            break
        signature, kind, name, dtype, shape = (cell.strip().strip("`") for cell in line.strip("|").split("|"))
        rows.add((signature, kind, name, dtype, shape))
    return rows


@pytest.mark.onednn_both
def test_saved_model_cli_lists_the_documented_signatures(served):
    # Run in the fresh process, before tensorflow-text is imported there (as a shell runs it).
    assert int(served["saved_model_cli:status"]) == 0
    stdout = str(served["saved_model_cli:stdout"])
    dtypes = {"DT_INT32": "int32", "DT_FLOAT": "float32", "DT_STRING": "string"}
    listed = set()
    for block in stdout.split("signature_def[")[1:]:
        signature = re.match(r"'(\w+)'", block).group(1)
        if signature == "__saved_model_init_op":  # the asset's initializer, not a serving signature
            continue
        for kind, name, dtype, shape in re.findall(
            r"(input|output)s\['(\w+)'\] tensor_info:\s+dtype: (\w+)\s+shape: \(([-\d, ]*)\)", block
        ):
            dims = tuple(int(d) for d in shape.split(",") if d.strip())
            listed.add((signature, kind, name, dtypes[dtype], dims))
    sizes = {"batch": -1, "seq": -1, "max_seq_length": MAX_SEQ_LENGTH, "hidden_size": 128}
    sizes.update(vocab_size=30522, max_predictions_per_seq=MAX_PREDICTIONS)
    documented = {
        (signature, kind, name, dtype, tuple(int(sizes.get(d, d)) for d in shape.strip("[]").split(", ")))
        for signature, kind, name, dtype, shape in _readme_signature_table()
    }
    assert len(documented) == 21
    assert listed == documented


@pytest.mark.onednn_both
def test_the_export_holds_the_generic_layer_norm(moved_export):
    """Traced here the LayerNorms would be the form TensorFlow's oneDNN fuses (a batch norm in
    training mode, which a server without oneDNN runs slower than the generic ops); the export
    traces the generic ops (`bert_tf.onednn.portable`)."""
    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((moved_export / "1" / "saved_model.pb").read_bytes())
    op_types = {
        node.op
        for meta_graph in saved.meta_graphs
        for function in meta_graph.graph_def.library.function
        for node in function.node_def
    }
    assert {"Mean", "Rsqrt"} <= op_types
    assert not {op for op in op_types if "BatchNorm" in op or op.startswith("_Mkl")}, sorted(op_types)


def run_tool(*args):
    return tool_runs.run(
        [sys.executable, os.path.join(REPO, "tools", "export_saved_model.py"), *args], cwd=REPO, timeout=600
    )


def test_tool_exports_a_training_checkpoint_over_an_existing_version(moved_export, batches, tmp_path):
    base = tmp_path / "bert"
    shutil.copytree(moved_export / "1", base / "1")
    result = run_tool(
        f"--bert_config_file={TRAIN_CONFIG}",
        f"--init_checkpoint={TRAIN_CKPT}",
        f"--vocab_file={VOCAB}",
        f"--max_seq_length={MAX_SEQ_LENGTH}",
        f"--export_dir={base}",
        "--version=1",
        "--overwrite",
        "--notext_signatures",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Loaded 39 variables" in result.stdout  # BertModel: the heads are reported unused
    assert "7 checkpoint weights are not used" in result.stdout
    assert "93 optimizer/step entries were skipped" in result.stdout  # 46 adam_m, 46 adam_v, global_step
    assert f"Exported {base / '1'}" in result.stdout
    assert sorted(os.listdir(base)) == ["1"]

    loaded = tf.saved_model.load(str(base / "1"))
    assert sorted(loaded.signatures) == ["serving_default", "tf_example"]
    batch = batches["b1"]
    got = loaded.signatures["serving_default"](**{k: tf.constant(batch[k]) for k in ID_INPUTS})
    weights = reference.load_checkpoint_weights(TRAIN_CKPT)
    want = reference.reference_forward(
        weights, BertConfig.from_json_file(TRAIN_CONFIG), *(batch[k] for k in ID_INPUTS)
    )
    for name in ENCODER_OUTPUTS:
        diff = max_diff(got[name], as_packed(name, want, batch["input_mask"]))
        assert report(f"training checkpoint serving_default {name} - float64 reference", diff) <= 1e-5
    # Replaced, not kept: the released checkpoint's outputs are another model's.
    assert max_diff(got["pooled_output"], batch["pooled_output"]) > 1e-3


@pytest.mark.onednn_both
def test_keras_file_exports_to_the_next_version_without_tensorflow_text(keras_export, served, batches):
    """Exported with `pack_tokens=False`: the original's outputs at every position, the padding's
    too."""
    base, path, load_report = keras_export
    assert path == str(base / "2") and load_report is None
    assert sorted(os.listdir(base)) == ["1", "2"]

    # serving_default and tf_example need no tensorflow-text: a process without it loads the export
    # (the fresh process, before it imports tensorflow-text for the other export).
    assert list(served["no_text:modules"]) == []
    for key in mf.BATCHES:
        for name in ENCODER_OUTPUTS:
            diff = max_diff(served[f"no_text:{key}/{name}"], batches[key][name])
            assert report(f".keras export serving_default {key} {name} - original", diff) <= 1e-5


@pytest.mark.onednn_both
def test_any_model_with_output_names_exports(batches, tmp_path, caplog):
    """The fine-tuning tasks' path: a Keras model returning one tensor, named by `output_names`.
    The model has never been called: its head's variables are made by the export (they were
    made inside a signature's trace, and the save failed on an untracked resource)."""

    class Classifier(keras.Model):
        def __init__(self, bert):
            super().__init__()
            self.bert = bert
            self.dense = keras.layers.Dense(3)

        def call(self, inputs):
            return keras.ops.softmax(self.dense(self.bert(inputs)["pooled_output"]))

    bert = BertModel(BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG))
    load_google_checkpoint(bert, mf.GOOGLE_TINY_CKPT)
    classifier = Classifier(bert)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = export_saved_model(
            classifier,
            ["probabilities"],
            VOCAB,
            True,
            MAX_SEQ_LENGTH,
            str(tmp_path / "cls"),
            text_signatures=False,
        )
    # Keras warned of "a softmax over axis -1 of a tensor of shape (1, 2, 1, 1)" on every export.
    assert [str(w.message) for w in caught if "softmax" in str(w.message)] == []
    assert "export_saved_model without config: the id signatures accept ids outside" in caplog.text
    inputs = {k: batches["b1"][k] for k in ID_INPUTS}
    want = np.asarray(classifier(inputs))
    loaded = tf.saved_model.load(path)
    got = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in inputs.items()})
    assert list(got) == ["probabilities"]
    # Two float32 computations (the served graph, the Keras model): equal to float32's rounding
    # through the layers, not to the bit on every CPU's kernels.
    np.testing.assert_allclose(got["probabilities"], want, atol=1e-5)
    np.testing.assert_allclose(np.sum(want, axis=1), 1.0, atol=1e-6)
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_seq_length=128"):
        too_long = np.ones([1, MAX_SEQ_LENGTH + 1], np.int32)
        loaded.signatures["serving_default"](input_ids=too_long, input_mask=too_long, segment_ids=too_long)


@pytest.mark.onednn_both
def test_named_labels_and_the_text_signatures_tokens(tokenizer, tmp_path):
    """A tagger-shaped model: per-token probabilities, their best label's name, and the tokens
    the text signatures packed, against `FullTokenizer`'s tokens and `pack_inputs`' ids."""

    class Tagger(keras.Model):
        def __init__(self, bert):
            super().__init__()
            self.bert = bert
            self.dense = keras.layers.Dense(3)

        def call(self, inputs):
            return {"probabilities": keras.ops.softmax(self.dense(self.bert(inputs)["sequence_output"]))}

    bert = BertModel(BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG))
    load_google_checkpoint(bert, mf.GOOGLE_TINY_CKPT)
    tagger = Tagger(bert)
    label_list = ["O", "B-PER", "I-PER"]
    length = 16
    texts = TEXTS[:3] + [TEXTS[5]]  # the last is cut to fit
    packed = [pack_inputs(tokenizer.tokenize(text), None, length, tokenizer) for text in texts]
    want = tagger({k: np.array([p[k] for p in packed], np.int32) for k in ID_INPUTS})["probabilities"]
    want = np.asarray(want)
    path = export_saved_model(
        NamedLabels(tagger, label_list, scores="probabilities", output="labels"),
        ["probabilities", "labels"],
        VOCAB,
        True,
        length,
        str(tmp_path / "tagger"),
        text_tokens=True,
    )
    import tensorflow_text  # noqa: F401  (the text signatures' ops)

    loaded = tf.saved_model.load(path)
    got = loaded.signatures["text"](text=tf.constant(texts))
    assert sorted(got) == ["end_offsets", "labels", "probabilities", "segment_ids", "start_offsets", "tokens"]
    for row, example in zip(got["tokens"].numpy(), packed, strict=True):
        assert [t.decode() for t in row] == example["tokens"] + [""] * (length - len(example["tokens"]))
    np.testing.assert_array_equal(got["segment_ids"], [p["segment_ids"] for p in packed])
    # The offsets: FullTokenizer's, in bytes, -1 at [CLS], [SEP] and the padding.
    for i, text in enumerate(texts):
        tokens, starts, ends = tokenizer.tokenize_with_offsets(text)
        real = len(packed[i]["tokens"]) - 2
        for name, offsets in (("start_offsets", starts), ("end_offsets", ends)):
            in_bytes = [len(text[:offset].encode()) for offset in offsets[:real]]
            assert got[name][i].numpy().tolist() == [-1, *in_bytes, -1] + [-1] * (length - real - 2), (
                name,
                i,
            )
    # In a pair, the offsets of text_b's tokens are into text_b (segment 1).
    pair = loaded.signatures["text_pair"](text_a=tf.constant(["Who?"]), text_b=tf.constant(["Ünï cödé."]))
    assert [t.decode() for t in pair["tokens"][0].numpy()][:7] == [
        "[CLS]",
        "who",
        "?",
        "[SEP]",
        "un",
        "##i",
        "code",
    ]
    assert pair["segment_ids"][0].numpy().tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 1] + [0] * 7
    assert pair["start_offsets"][0].numpy().tolist()[:9] == [-1, 0, 3, -1, 0, 3, 6, 12, -1]
    assert pair["end_offsets"][0].numpy().tolist()[:9] == [-1, 3, 4, -1, 3, 5, 12, 13, -1]
    # At the real tokens (the export packs them: the padding's outputs are not the model's).
    real = np.array([p["input_mask"] for p in packed]) > 0
    np.testing.assert_allclose(got["probabilities"].numpy()[real], want[real], atol=1e-5)
    names = [label_list[i] for i in np.argmax(want, axis=-1)[real]]
    assert [label.decode() for label in got["labels"].numpy()[real]] == names
    by_ids = loaded.signatures["serving_default"](**{k: tf.constant([packed[0][k]]) for k in ID_INPUTS})
    assert sorted(by_ids) == ["labels", "probabilities"]  # the tokens come with text only
    with pytest.raises(ValueError, match="return 'start_offsets' themselves"):
        export_saved_model(
            tagger, ["start_offsets"], VOCAB, True, length, str(tmp_path / "bad"), text_tokens=True
        )
    assert not os.path.exists(tmp_path / "bad")


def test_a_wrong_output_name_is_an_error_and_writes_nothing(tmp_path):
    bert = BertModel(BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG))
    with pytest.raises(ValueError, match="no outputs \\['logits'\\]"):
        export_saved_model(bert, ["logits"], VOCAB, True, 16, str(tmp_path / "out"), text_signatures=False)
    assert not os.path.exists(tmp_path / "out")


def test_exporting_over_a_version_is_refused_before_loading(moved_export):
    before = sorted(os.listdir(moved_export / "1"))
    with pytest.raises(ValueError, match="already exists; pass --overwrite"):
        export_bert(
            mf.GOOGLE_TINY_CKPT, mf.GOOGLE_TINY_CONFIG, VOCAB, True, 128, str(moved_export), version=1
        )
    assert sorted(os.listdir(moved_export)) == ["1"]
    assert sorted(os.listdir(moved_export / "1")) == before


@pytest.mark.parametrize(
    "case",
    ["vocab size", "max_seq_length", "missing checkpoint", "cut keras file"],
)
def test_bad_input_is_a_one_line_error_and_writes_nothing(case, tmp_path):
    flags = {
        "bert_config_file": mf.GOOGLE_TINY_CONFIG,
        "init_checkpoint": mf.GOOGLE_TINY_CKPT,
        "vocab_file": VOCAB,
        "max_seq_length": "128",
        "export_dir": str(tmp_path / "models" / "bert"),
    }
    if case == "vocab size":
        with open(VOCAB, encoding="utf-8") as f:
            (tmp_path / "large_vocab.txt").write_text(f.read() + "[EXTRA]\n", encoding="utf-8")
        flags["vocab_file"] = str(tmp_path / "large_vocab.txt")
        expected = "large_vocab.txt: the vocabulary has 30523 tokens but the model's vocab_size is 30522"
    elif case == "max_seq_length":
        flags["max_seq_length"] = "513"
        expected = "max_seq_length 513 is above the model's max_position_embeddings (512)"
    elif case == "missing checkpoint":
        flags["init_checkpoint"] = str(tmp_path / "no_such" / "bert_model.ckpt")
        expected = os.path.join("no_such", "bert_model.ckpt")
    else:  # Keras says "File not found" of a file that is there
        (tmp_path / "cut.keras").write_bytes(b"PK\x03\x04 cut short")
        flags["init_checkpoint"] = str(tmp_path / "cut.keras")
        expected = "cut.keras: not a Keras model saved as .keras (not a whole zip archive)"
    if case == "vocab size":  # through the tool: its one line and exit status
        result = run_tool(*(f"--{k}={v}" for k, v in flags.items()))
        assert result.returncode == 2, result.stderr[-3000:]
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and expected in errors[0], result.stderr[-3000:]
        assert "Traceback" not in result.stderr
    else:  # the tool's call, in this process (TensorFlow's start-up once)
        with pytest.raises(ValueError, match=re.escape(expected)) as error:
            run_export(ExportOptions(**dict(flags, max_seq_length=int(flags["max_seq_length"]))))
        assert "\n" not in str(error.value)  # one line, as the tool prints it
    assert not os.path.exists(tmp_path / "models")


def test_a_padded_embedding_table_and_blank_vocab_lines_are_accepted(tmp_path, caplog):
    """As the original runs them: a config whose table has rows beyond the vocabulary (e.g.
    padded to a multiple of 8) warns; blank lines (no text tokenizes to "") do not count."""
    from bert_tf.checkpoints.pretrained import check_vocab_and_length

    config = BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG)
    with open(VOCAB, encoding="utf-8") as f:
        (tmp_path / "blank_line.txt").write_text(f.read() + "\n", encoding="utf-8")
    with caplog.at_level("WARNING", logger="bert_tf.checkpoints.pretrained"):
        check_vocab_and_length(config, str(tmp_path / "blank_line.txt"), 128)
        assert not caplog.records
        padded = BertConfig.from_dict(dict(config.to_dict(), vocab_size=30528))
        check_vocab_and_length(padded, VOCAB, 128)
    assert "has 30522 tokens and the model's vocab_size is 30528: no token reaches the last 6" in caplog.text
    (tmp_path / "blank.txt").write_text("\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"blank\.txt: the vocab file has blank lines only"):
        check_vocab_and_length(config, str(tmp_path / "blank.txt"), 128)


def test_versions_count_up_from_one_past_other_names(tmp_path):
    base = tmp_path / "models"
    assert next_version(str(base)) == 1
    for expected in ("1", "2"):
        with versioned_directory(str(base)) as (tmp, final):
            assert final == str(base / expected) and not os.path.exists(final)
            (tmp_path / "marker").write_text(expected)
            shutil.copy(tmp_path / "marker", os.path.join(tmp, "saved_model.pb"))
        assert (base / expected / "saved_model.pb").read_text() == expected
    (base / "7").mkdir()
    (base / "abc").mkdir()
    (base / "3.tmp").mkdir()
    assert next_version(str(base)) == 8


def test_an_existing_version_is_replaced_only_with_overwrite(tmp_path):
    base = tmp_path / "models"
    (base / "1").mkdir(parents=True)
    (base / "1" / "saved_model.pb").write_text("old")
    with pytest.raises(ValueError, match="1 already exists"), versioned_directory(str(base), version=1):
        pytest.fail("the block must not run")
    assert (base / "1" / "saved_model.pb").read_text() == "old"
    with versioned_directory(str(base), version=1, overwrite=True) as (tmp, _):
        with open(os.path.join(tmp, "saved_model.pb"), "w") as f:
            f.write("new")
        assert (base / "1" / "saved_model.pb").read_text() == "old"  # untouched until complete
    assert sorted(os.listdir(base)) == ["1"]
    assert os.listdir(base / "1") == ["saved_model.pb"]
    assert (base / "1" / "saved_model.pb").read_text() == "new"


def test_a_version_another_export_wrote_meanwhile_is_kept(tmp_path):
    """Two exports to one directory at once pick the same version: the later to finish is
    refused, not written over the other (without --overwrite)."""
    base = tmp_path / "models"
    refused = pytest.raises(ValueError, match=r"1 was written by another export while this one ran")
    with refused, versioned_directory(str(base)) as (tmp, final):
        (base / "1").mkdir()  # the other export, finishing first
        (base / "1" / "saved_model.pb").write_text("other")
        with open(os.path.join(tmp, "saved_model.pb"), "w") as f:
            f.write("this")
    assert sorted(os.listdir(base)) == ["1"] and (base / "1" / "saved_model.pb").read_text() == "other"


def test_a_failed_export_leaves_nothing_behind(tmp_path):
    base = tmp_path / "models"
    with pytest.raises(RuntimeError), versioned_directory(str(base)) as (tmp, _):
        with open(os.path.join(tmp, "saved_model.pb"), "w") as f:
            f.write("half")
        raise RuntimeError("interrupted")
    assert not os.path.exists(base)  # created by the export, so removed with it
    (base / "1").mkdir(parents=True)
    with pytest.raises(RuntimeError), versioned_directory(str(base)):
        raise RuntimeError("interrupted")
    assert os.listdir(base) == ["1"]


def test_the_next_export_cleans_up_after_killed_ones(tmp_path):
    """kill -9 during `--overwrite` left the old version moved aside (a full copy, never deleted;
    the only copy if the new one had not arrived), and during an export a half-written one."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()  # a process id that no longer runs, as a killed export's
    base = tmp_path / "models"
    pid = process.pid
    left = {
        f"1.old.tmp-{pid}": "only copy",
        "2": "replaced",
        f"2.old.tmp-{pid}": "old two",
        f"5.tmp-{pid}": "half",
    }
    for name, content in left.items():
        (base / name).mkdir(parents=True)
        (base / name / "saved_model.pb").write_text(content)
    with versioned_directory(str(base)) as (tmp, final):
        assert final == str(base / "3")
        (base / "marker").write_text("new")
        shutil.copy(base / "marker", os.path.join(tmp, "saved_model.pb"))
    (base / "marker").unlink()
    assert sorted(os.listdir(base)) == ["1", "2", "3"]
    assert [(base / v / "saved_model.pb").read_text() for v in "123"] == ["only copy", "replaced", "new"]


@pytest.fixture(scope="module")
def opened(moved_export):
    from bert_tf.export.query import open_export

    return open_export(str(moved_export))


def _query(opened, **flags):
    from bert_tf.export.query import QueryOptions, query_saved_model

    return query_saved_model(QueryOptions(export_dir="unused", **flags), export=opened)


def _joined(values):
    return ",".join(str(int(v)) for v in values)


def test_query_opens_the_highest_version_or_the_version_given(moved_export, tmp_path):
    from bert_tf.export.query import version_directory

    assert version_directory(str(moved_export)) == str(moved_export / "1")
    assert version_directory(str(moved_export / "1")) == str(moved_export / "1")
    (tmp_path / "3").mkdir()
    (tmp_path / "12").mkdir()
    assert version_directory(str(tmp_path)) == str(tmp_path / "12")
    with pytest.raises(ValueError, match="neither a SavedModel nor a directory of versions"):
        version_directory(str(tmp_path / "3"))


@pytest.mark.onednn_both
def test_query_runs_every_kind_of_signature_with_tensorflow_texts_ops(opened, served, batches):
    text = _query(opened, text=TEXTS[1])  # --signature=text by default with --text
    assert list(text) == list(_query(opened, signature="text", text=TEXTS[1]))
    # Padded to its own 20 tokens (24), not to the batch's 128: compared at the tokens.
    assert np.asarray(text["sequence_output"]).shape == (24, 128)
    assert max_diff(text["sequence_output"][:20], served["text/sequence_output"][1][:20]) <= 1e-6
    assert max_diff(text["pooled_output"], served["text/pooled_output"][1]) <= 1e-6
    pair = _query(opened, text=PAIRS[0][0], text_b=PAIRS[0][1])
    assert max_diff(pair["pooled_output"], served["pair/pooled_output"][0]) <= 1e-6
    # Ids (padding included) against the original's outputs, through serving_default and tf_example.
    batch = batches["b1"]
    ids = {name: _joined(batch[name][2]) for name in ID_INPUTS}
    for signature in ("serving_default", "tf_example"):
        got = _query(opened, signature=signature, **ids)
        for name in ENCODER_OUTPUTS:
            diff = max_diff(got[name], as_packed(name, {name: batch[name][2]}, batch["input_mask"][2]))
            assert report(f"query {signature} {name} - original", diff) <= 1e-5
    count = batch["masked_lm_positions"].shape[1]  # the export's width is MAX_PREDICTIONS
    positions = _joined([*batch["masked_lm_positions"][2], *[0] * (MAX_PREDICTIONS - count)])
    heads = _query(opened, signature="pretraining", masked_lm_positions=positions, **ids)
    want = batch["masked_lm_log_probs"].reshape(len(batch["input_ids"]), count, -1)[2]
    assert max_diff(np.asarray(heads["masked_lm_log_probs"])[:count], want) <= 1e-5


def test_query_names_what_it_cannot_do(opened):
    for flags, message in (
        (dict(signature="nope", text="a"), r"/1: no signature 'nope'; it has pretraining, serving_default"),
        (dict(signature="text_pair", text="a"), "the text_pair signature needs --text and --text_b"),
        (dict(input_ids="101,x"), r"--input_ids must be comma-separated integers, got '101,x'"),
        (dict(input_ids="101,102", input_mask="1"), "--input_mask has 1 values, --input_ids 2"),
        (
            dict(signature="pretraining", input_ids="101,102", masked_lm_positions="1"),
            "--masked_lm_positions has 1 values; the pretraining signature takes 20",
        ),
        (
            dict(input_ids="101,102", masked_lm_positions="1"),
            "the serving_default signature takes no masked_lm",
        ),
    ):
        with pytest.raises(ValueError, match=message):
            _query(opened, **flags)


def test_the_query_tool_prints_one_json_object(moved_export):
    tool = os.path.join(REPO, "tools", "query_saved_model.py")
    result = tool_runs.run(
        [sys.executable, tool, f"--export_dir={moved_export}", "--text=Jim Henson was a puppeteer"],
        cwd=REPO,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    outputs = json.loads(result.stdout)
    assert sorted(outputs) == ["pooled_output", "sequence_output"]
    # [CLS] jim henson was a puppet ##eer [SEP]: 8 tokens, padded to 8 (not MAX_SEQ_LENGTH).
    assert len(outputs["pooled_output"]) == 128 and len(outputs["sequence_output"]) == 8


def test_text_tokens_flag_adds_tokens_offsets_and_segments(tmp_path, tokenizer, capsys):
    """`export_saved_model.py --text_tokens` (its options, run in this process): the encoder's
    text signatures also return the tokens with their byte offsets and segments; the outputs at
    the tokens are those of `serving_default` on `FullTokenizer`'s ids."""
    import tensorflow_text  # noqa: F401  (the text signatures' ops)

    from bert_tf.export.bert import ExportOptions, run_export

    options = ExportOptions(
        bert_config_file=mf.GOOGLE_TINY_CONFIG,
        init_checkpoint=mf.GOOGLE_TINY_CKPT,
        vocab_file=VOCAB,
        max_seq_length=32,
        export_dir=str(tmp_path / "bert"),
        text_tokens=True,
    )
    loaded = tf.saved_model.load(run_export(options))
    a, b = ["Who wrote BERT?", "Naïve café"], ["Google did, in 2018.", ""]
    got = loaded.signatures["text_pair"](text_a=tf.constant(a), text_b=tf.constant(b))
    assert sorted(got) == [
        "end_offsets",
        "pooled_output",
        "segment_ids",
        "sequence_output",
        "start_offsets",
        "tokens",
    ]
    rows = [
        pack_inputs(tokenizer.tokenize(x), tokenizer.tokenize(y), 32, tokenizer)
        for x, y in zip(a, b, strict=True)
    ]
    assert got["tokens"].shape == (2, 16)  # 13 tokens, padded to 16
    fixed = loaded.signatures["serving_default"](**{k: tf.constant([r[k] for r in rows]) for k in ID_INPUTS})
    for i, row in enumerate(rows):
        n = len(row["tokens"])
        assert [t.decode() for t in got["tokens"][i].numpy()] == row["tokens"] + [""] * (16 - n)
        assert got["segment_ids"][i].numpy().tolist() == row["segment_ids"][:16]
        assert max_diff(got["sequence_output"][i][:n], fixed["sequence_output"][i][:n]) <= 1e-5
    assert max_diff(got["pooled_output"], fixed["pooled_output"]) <= 1e-5
    text = b[0].encode()
    spans = [
        text[s:e]
        for s, e, seg in zip(
            *(got[k][0].numpy() for k in ("start_offsets", "end_offsets", "segment_ids")), strict=True
        )
        if seg == 1 and s >= 0
    ]
    assert spans == [b"Google", b"did", b",", b"in", b"2018", b"."]
    assert got["start_offsets"][1].numpy().tolist()[:4] == [-1, 0, 7, -1]  # "naive", "cafe": bytes
    assert got["end_offsets"][1].numpy().tolist()[:4] == [-1, 6, 12, -1]


def test_the_length_is_the_flag_else_the_recorded_one_else_128(tmp_path, caplog):
    """`--max_seq_length` given wins; else the one recorded in the model's `model_settings.json`
    (a sentence encoder's); else 128: the export holds it and `text` cuts a long text there."""
    import tensorflow_text  # noqa: F401  (the text signatures' ops)

    model = tmp_path / "model"
    model.mkdir()
    shutil.copy(mf.GOOGLE_TINY_CONFIG, model / "bert_config.json")
    (model / "model_settings.json").write_text('{"max_seq_length": 20}\n')
    long_text = " ".join(["hello"] * 40)  # 40 WordPieces, 42 with [CLS] and [SEP]
    settings_file = str(model / "model_settings.json")
    for given, want, said in ((None, 20, f"(recorded in {settings_file})"), (24, 24, "(given)")):
        options = ExportOptions(
            bert_config_file=str(model / "bert_config.json"),
            init_checkpoint=mf.GOOGLE_TINY_CKPT,
            vocab_file=VOCAB,
            max_seq_length=given,
            export_dir=str(tmp_path / "bert"),
        )
        caplog.clear()
        with caplog.at_level("INFO", logger="bert_tf.export.bert"):
            loaded = tf.saved_model.load(run_export(options))
        assert f"max_seq_length={want} {said}" in caplog.text
        assert int(loaded.max_seq_length.numpy()) == want
        assert loaded.signatures["text"](text=tf.constant([long_text]))["sequence_output"].shape[1] == want
    # google_tiny records none.
    path, _ = export_bert(
        mf.GOOGLE_TINY_CKPT,
        mf.GOOGLE_TINY_CONFIG,
        VOCAB,
        True,
        None,
        str(tmp_path / "bert"),
        text_signatures=False,
    )
    assert int(tf.saved_model.load(path).max_seq_length.numpy()) == 128


def test_the_recorded_pooling_applies_unless_pooling_is_none(tmp_path, tokenizer, caplog):
    """A model whose `model_settings.json` records a pooling exports `sentence_embedding` (the
    recorded mean pooling, normalized) without flags; `--pooling=none` exports the same model
    without it in every signature, and is refused with `--normalize` before anything is written."""
    model = tmp_path / "model"
    model.mkdir()
    shutil.copy(mf.GOOGLE_TINY_CONFIG, model / "bert_config.json")
    (model / "model_settings.json").write_text('{"normalize": true, "pooling": "mean"}\n')

    def export(**flags):
        options = ExportOptions(
            bert_config_file=str(model / "bert_config.json"),
            init_checkpoint=mf.GOOGLE_TINY_CKPT,
            vocab_file=VOCAB,
            max_seq_length=16,
            export_dir=str(tmp_path / "bert"),
            text_signatures=False,
            **flags,
        )
        return tf.saved_model.load(run_export(options))

    rows = [pack_inputs(tokenizer.tokenize(text), None, 16, tokenizer) for text in TEXTS[:2]]
    inputs = {name: tf.constant([row[name] for row in rows]) for name in ID_INPUTS}
    pooled = export().signatures["serving_default"](**inputs)
    mask = inputs["input_mask"].numpy()[:, :, None]
    mean = (pooled["sequence_output"].numpy() * mask).sum(1) / mask.sum(1)
    want = mean / np.linalg.norm(mean, axis=1, keepdims=True)
    np.testing.assert_allclose(pooled["sentence_embedding"].numpy(), want, atol=1e-5)

    with caplog.at_level("INFO", logger="bert_tf.export.bert"):
        unpooled = export(pooling="none")
    assert "no sentence_embedding (--pooling=none)" in caplog.text
    assert sorted(unpooled.signatures) == ["serving_default", "tf_example"]
    for signature in unpooled.signatures.values():
        assert sorted(signature.structured_outputs) == sorted(ENCODER_OUTPUTS)
    served = unpooled.signatures["serving_default"](**inputs)
    np.testing.assert_allclose(
        served["sequence_output"].numpy(), pooled["sequence_output"].numpy(), atol=1e-6
    )

    export_dir = tmp_path / "refused"
    with pytest.raises(ValueError, match=r"^--normalize needs a pooling, not --pooling=none$"):
        export_bert(
            mf.GOOGLE_TINY_CKPT,
            str(model / "bert_config.json"),
            VOCAB,
            True,
            16,
            str(export_dir),
            pooling="none",
            normalize=True,
        )
    assert not export_dir.exists()
