"""Multiple choice (SWAG): `run_classifier.py --task_name=swag|multiple_choice`
(`bert_tf.tasks.multiple_choice`), held against transformers: its `run_swag.py` packing, and a
`BertForMultipleChoice` converted both ways, as recorded in `tests/data/hf_tiny/`
(`tests/data/make_hf_swag.py`)."""

import dataclasses
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints.pretrained import load_weights, open_pretrained
from bert_tf.modeling import BertMultipleChoice
from bert_tf.tasks.multiple_choice.data import convert_example, read_examples, task_files
from bert_tf.tasks.multiple_choice.run import MultipleChoiceOptions, run_multiple_choice
from bert_tf.text.tokenization import FullTokenizer
from tests import tool_runs
from tests.test_hf import HF_TINY, LOGITS_TOLERANCE, convert, hf_tensors, read_json
from tests.test_packing import original_pair_lengths

SWAG = os.path.join(HF_TINY, "swag")
MAX_SEQ_LENGTH = 24  # make_hf_swag.py's


@pytest.fixture(scope="module")
def hf():
    return np.load(os.path.join(HF_TINY, "multiple_choice.npz"))


@pytest.fixture(scope="module")
def google(tmp_path_factory):
    """The HF model converted to the original's files by the tool's library call."""
    out = str(tmp_path_factory.mktemp("mc") / "google")
    status, printed = convert(f"--hf_model={HF_TINY}/multiple_choice", f"--output_dir={out}")
    assert status == 0, printed
    assert printed.strip().splitlines()[-1] == "--do_lower_case=true"
    return out


def packed(set_name, data_dir=SWAG, files=None):
    """bert_tf's features of a SWAG file's rows, stacked: {name: [rows, choices, seq]}."""
    tokenizer = FullTokenizer(os.path.join(HF_TINY, "multiple_choice", "vocab.txt"), do_lower_case=True)
    examples = read_examples(files or task_files("swag"), data_dir, set_name)
    features = [convert_example(i, e, MAX_SEQ_LENGTH, tokenizer) for i, e in enumerate(examples)]
    return {key: np.array([f[key] for f in features]) for key in features[0]}


def test_swag_rows_are_packed_as_transformers_run_swag(hf):
    """Every choice of val.csv and test.csv (one of them cut, b alone) gives transformers' ids."""
    for set_name, prefix in (("dev", "val"), ("test", "test")):
        got = packed(set_name)
        np.testing.assert_array_equal(got["input_ids"], hf[f"{prefix}_input_ids"])
        np.testing.assert_array_equal(got["input_mask"], hf[f"{prefix}_attention_mask"])
        np.testing.assert_array_equal(got["segment_ids"], hf[f"{prefix}_token_type_ids"])
    assert (hf["val_attention_mask"][3].sum(-1) == MAX_SEQ_LENGTH).any()  # the cut row
    assert packed("dev")["label_ids"].tolist() == [0, 0, 1, 3]
    assert packed("test")["label_ids"].tolist() == [0, 0]  # no labels: 0, as the classifier's


def test_a_pair_cut_on_both_sides_keeps_the_originals_lengths(hf):
    """cut.csv: both texts too long for an odd budget. transformers gives the odd piece to the
    longer text (b on ties), the original (and bert_tf) to a: the one known difference."""
    files = dataclasses.replace(task_files("swag"), set_files={"dev": "cut.csv"})
    got = packed("dev", files=files)
    tokenizer = FullTokenizer(os.path.join(HF_TINY, "multiple_choice", "vocab.txt"), do_lower_case=True)
    example = read_examples(files, SWAG, "dev")[0]
    len_a = len(tokenizer.tokenize(example.context))
    len_b = len(tokenizer.tokenize(f"{example.question} {example.endings[0]}"))
    want_a, want_b = original_pair_lengths(len_a, len_b, MAX_SEQ_LENGTH - 3)
    assert (want_a, want_b) == (11, 10)
    for choice in range(4):
        segments = got["segment_ids"][0, choice]
        assert (segments[1:] == 0).sum() - 1 == want_a and segments.sum() - 1 == want_b
        hf_segments = hf["cut_token_type_ids"][0, choice]
        assert ((hf_segments[1:] == 0).sum() - 1, hf_segments.sum() - 1) == (want_b, want_a)
        # The pieces kept are the texts' first ones on both sides.
        ids, hf_ids = got["input_ids"][0, choice], hf["cut_input_ids"][0, choice]
        np.testing.assert_array_equal(ids[: 1 + want_b], hf_ids[: 1 + want_b])


def test_the_converted_checkpoint_has_the_head_and_gives_transformers_logits(google, hf):
    shapes = dict(tf.train.list_variables(google))
    assert shapes["cls/multiple_choice/output_weights"] == [1, 24]
    assert shapes["cls/multiple_choice/output_bias"] == [1]
    assert not any(name.startswith("output_") or "/squad/" in name for name in shapes)
    pretrained = open_pretrained(f"{google}/bert_config.json", init_checkpoint=google)
    model = BertMultipleChoice(pretrained.config)
    load_weights(model, google)
    inputs = {
        "input_ids": hf["val_input_ids"],
        "input_mask": hf["val_attention_mask"],
        "segment_ids": hf["val_token_type_ids"],
    }
    got = model(inputs)
    np.testing.assert_allclose(got["logits"], hf["val_logits"], atol=LOGITS_TOLERANCE, rtol=0)
    np.testing.assert_allclose(got["probabilities"], hf["val_probabilities"], atol=LOGITS_TOLERANCE, rtol=0)


def test_hf_output_dir_writes_back_transformers_tensors_and_config(google, tmp_path):
    back = str(tmp_path / "hf")
    status, _ = convert(
        f"--bert_config_file={google}/bert_config.json",
        f"--init_checkpoint={google}",
        f"--vocab_file={google}/vocab.txt",
        "--do_lower_case=true",
        f"--hf_output_dir={back}",
    )
    assert status == 0
    original, written = hf_tensors(os.path.join(HF_TINY, "multiple_choice")), hf_tensors(back)
    assert sorted(written) == sorted(original) and "classifier.weight" in written
    assert all(written[key].tobytes() == original[key].tobytes() for key in original)
    config = read_json(os.path.join(back, "config.json"))
    want = read_json(os.path.join(HF_TINY, "multiple_choice", "config.json"))
    assert config["architectures"] == ["BertForMultipleChoice"]
    assert all(want[key] == value for key, value in config.items())


def test_run_classifier_swag_evaluates_and_predicts_transformers_probabilities(google, hf, tmp_path):
    """The tool straight from the converted checkpoint (no training): val.csv's accuracy and
    loss, test.csv's (no label column) probabilities, all transformers'."""
    out = tmp_path / "out"
    result = tool_runs.run(
        [
            sys.executable,
            "tools/run_classifier.py",
            "--task_name=SWAG",
            "--do_eval",
            "--do_predict",
            f"--data_dir={SWAG}",
            f"--vocab_file={google}/vocab.txt",
            f"--bert_config_file={google}/bert_config.json",
            f"--init_checkpoint={google}",
            f"--max_seq_length={MAX_SEQ_LENGTH}",
            "--eval_batch_size=3",
            f"--output_dir={out}",
        ],
        cwd=tool_runs.REPO,
    )
    assert result.returncode == 0, result.stderr
    rows = [line.split("\t") for line in (out / "test_results.tsv").read_text().splitlines()]
    np.testing.assert_allclose(np.array(rows, float), hf["test_probabilities"], atol=LOGITS_TOLERANCE, rtol=0)
    results = dict(line.split(" = ") for line in (out / "eval_results.txt").read_text().splitlines())
    labels = np.array([0, 0, 1, 3])
    probabilities = hf["val_probabilities"].astype(np.float64)
    assert float(results["eval_accuracy"]) == np.mean(probabilities.argmax(-1) == labels) == 0.25
    nll = -np.log(probabilities[np.arange(4), labels]).mean()
    assert float(results["eval_loss"]) == pytest.approx(nll, abs=LOGITS_TOLERANCE)


def write_csv(path, header, rows):
    path.write_text("\n".join(",".join(row) for row in [header, *rows]) + "\n", encoding="utf-8")


@pytest.mark.parametrize(
    "file, rows, message",
    [
        (
            "val.csv",
            [["a", "b", "c", "d", "e", "f", "4"]],
            "val.csv:2: label '4' is not the index of one of the 4",
        ),
        ("val.csv", [["a", "b", "c", "d", "e", "f", ""]], "val.csv:2: label ''"),
        ("val.csv", [["a", "b", "c", "d", "e", "f"]], "val.csv:2: 6 columns, expected 7"),
    ],
)
def test_a_bad_swag_row_names_its_file_and_line(tmp_path, file, rows, message):
    write_csv(tmp_path / file, ["sent1", "sent2", *(f"ending{i}" for i in range(4)), "label"], rows)
    with pytest.raises(ValueError, match=message):
        read_examples(task_files("swag"), str(tmp_path), "dev")


def test_a_generic_csv_reads_its_columns_and_names_a_missing_one(tmp_path):
    files = task_files("multiple_choice", "context", None, "a, b,c", "answer")
    write_csv(
        tmp_path / "dev.csv", ["answer", "c", "context", "b", "a"], [["2", "third", "ctx", "second", "first"]]
    )
    write_csv(tmp_path / "test.csv", ["answer", "c", "context", "b", "a"], [["", "3", "x", "2", "1"]])
    (example,) = read_examples(files, str(tmp_path), "dev")
    assert (example.context, example.question, example.endings, example.label) == (
        "ctx",
        None,
        ["first", "second", "third"],
        2,
    )
    assert read_examples(files, str(tmp_path), "test")[0].label is None
    with pytest.raises(ValueError, match="--ending_columns: name at least two"):
        task_files("multiple_choice", "context", None, "a", "answer")
    files = task_files("multiple_choice", "context", "question", "a,b,c", "answer")
    with pytest.raises(ValueError, match=r"dev.csv: no column 'question' \(--text_b_column\)"):
        read_examples(files, str(tmp_path), "dev")


def test_fine_tuning_learns_and_exports(google, tmp_path):
    """A few steps on SWAG-shaped files where the right ending is always "is good.": the loss
    on them falls; the export's id and text signatures give the tool's probabilities."""
    rng = np.random.default_rng(0)
    words = ["john", "lives", "in", "paris", "the", "cafe", "was", "bad", "very", "world", "play"]
    header = ["", "sent1", "sent2", *(f"ending{i}" for i in range(4)), "label"]
    rows = []
    for i in range(16):
        endings = [" ".join(rng.choice(words, 3)) for _ in range(4)]
        label = int(rng.integers(4))
        endings[label] = "is good."
        rows.append([str(i), " ".join(rng.choice(words, 4)), "he", *endings, str(label)])
    data = tmp_path / "swag"
    data.mkdir()
    for name in ("train.csv", "val.csv", "test.csv"):
        write_csv(data / name, header, rows)
    common = dict(
        task_name="swag",
        data_dir=str(data),
        vocab_file=f"{google}/vocab.txt",
        bert_config_file=f"{google}/bert_config.json",
        init_checkpoint=google,
        max_seq_length=16,
        eval_batch_size=16,
        predict_batch_size=16,
        seed=1,
    )
    before = run_multiple_choice(
        MultipleChoiceOptions(output_dir=str(tmp_path / "before"), do_eval=True, **common)
    )
    after = run_multiple_choice(
        MultipleChoiceOptions(
            output_dir=str(tmp_path / "after"),
            export_dir=str(tmp_path / "export"),
            do_train=True,
            do_eval=True,
            do_predict=True,
            train_batch_size=8,
            num_train_epochs=5.0,
            learning_rate=2e-3,
            **common,
        )
    )
    assert after["eval"]["eval_loss"] < 0.5 * before["eval"]["eval_loss"]
    assert after["eval"]["eval_accuracy"] == 1.0
    loaded = tf.saved_model.load(after["export"])
    assert sorted(loaded.signatures) == ["serving_default", "text_choices"]
    features = {key: tf.constant(value, tf.int32) for key, value in packed_rows(data, google).items()}
    by_ids = loaded.signatures["serving_default"](**features)["probabilities"]
    np.testing.assert_allclose(by_ids, after["predict"], atol=1e-5, rtol=0)
    by_text = loaded.signatures["text_choices"](
        context=tf.constant([row[1] for row in rows]),
        question=tf.constant([row[2] for row in rows]),
        endings=tf.constant([row[3:7] for row in rows]),
    )["probabilities"]
    np.testing.assert_allclose(by_text, after["predict"], atol=1e-5, rtol=0)


def packed_rows(data_dir, google):
    """The ids of test.csv as the tool packs them, [rows, choices, 16]."""
    tokenizer = FullTokenizer(f"{google}/vocab.txt", do_lower_case=True)
    examples = read_examples(task_files("swag"), str(data_dir), "test")
    features = [convert_example(i, e, 16, tokenizer) for i, e in enumerate(examples)]
    return {key: np.array([f[key] for f in features]) for key in ("input_ids", "input_mask", "segment_ids")}


@pytest.mark.onednn_both
@pytest.mark.parametrize("fmt", ["onnx", "tflite"])
def test_the_edge_file_takes_choices_and_gives_transformers_probabilities(google, hf, tmp_path, fmt):
    """LiteRT and ONNX (float32): the file takes int32 [batch, choices, seq] ids; on run_swag's
    ids it gives transformers' probabilities (1e-4)."""
    from bert_tf.export.edge import EdgeOptions, Runtime, export_edge

    result = export_edge(
        EdgeOptions(
            format=fmt,
            bert_config_file=os.path.join(google, "bert_config.json"),
            init_checkpoint=os.path.join(google, "bert_model.ckpt"),
            vocab_file=os.path.join(google, "vocab.txt"),
            max_seq_length=MAX_SEQ_LENGTH,
            output=str(tmp_path / f"mc.{fmt}"),
        )
    )
    assert result.ok and result.edge.choices and result.edge.head == "multiple choice"
    ids = {
        "input_ids": hf["val_input_ids"].astype(np.int32),
        "input_mask": hf["val_attention_mask"].astype(np.int32),
        "segment_ids": hf["val_token_type_ids"].astype(np.int32),
    }
    got = Runtime(fmt, result.path, result.edge.outputs)(ids)
    np.testing.assert_allclose(got["probabilities"], hf["val_probabilities"], atol=1e-4)
