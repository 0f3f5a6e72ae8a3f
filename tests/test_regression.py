"""A regression (GLUE's STS-B) end to end: a transformers `BertForSequenceClassification` with one
output (`tests/data/hf_regressor`, made by `make_hf_regressor.py` with transformers' own scores)
converted, evaluated and predicted by `run_classifier --task_name=stsb` without training, its
scores against transformers' and its metrics against SciPy's; written back to HF; fine-tuned a
few steps (the loss falls) and exported."""

import contextlib
import io
import json
import os
import shutil

import numpy as np
import pytest
import safetensors.numpy
import scipy.stats
import tensorflow as tf

from bert_tf.checkpoints import reference
from bert_tf.checkpoints.converter import ConvertOptions, run_convert
from bert_tf.tasks.classifier.run import ClassifierOptions, run_classifier

pytestmark = pytest.mark.usefixtures("scipy_sees_no_jax")

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "hf_regressor")
with open(os.path.join(DATA, "scores.json"), encoding="utf-8") as _f:
    HF_SCORES = json.load(_f)


def convert(**values):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = run_convert(ConvertOptions(print_parameters=False, **values))
    assert status == 0, printed.getvalue()
    return printed.getvalue()


def read_results(path):
    with open(path, encoding="utf-8") as f:
        return {key: float(value) for key, value in (line.split(" = ") for line in f.read().splitlines())}


def dev_labels():
    with open(os.path.join(DATA, "stsb", "dev.tsv"), encoding="utf-8") as f:
        return np.array([float(line.split("\t")[-1]) for line in f.read().splitlines()[1:]])


@pytest.fixture(scope="module")
def google(tmp_path_factory):
    """The regressor converted to the original's layout."""
    directory = str(tmp_path_factory.mktemp("regressor") / "google")
    convert(hf_model=os.path.join(DATA, "model"), output_dir=directory)
    return directory


def options(google, output_dir, **changes):
    return ClassifierOptions(
        **{
            "task_name": "stsb",
            "data_dir": os.path.join(DATA, "stsb"),
            "vocab_file": os.path.join(google, "vocab.txt"),
            "bert_config_file": os.path.join(google, "bert_config.json"),
            "init_checkpoint": os.path.join(google, "bert_model.ckpt"),
            "output_dir": str(output_dir),
            "max_seq_length": HF_SCORES["max_seq_length"],
            "eval_batch_size": 4,
            "predict_batch_size": 2,
            **changes,
        }
    )


def test_the_converted_head_is_one_output_at_the_top_level(google):
    shapes = dict(tf.train.list_variables(os.path.join(google, "bert_model.ckpt")))
    assert shapes["output_weights"] == [1, 24] and shapes["output_bias"] == [1]
    assert not os.path.exists(os.path.join(google, "labels.txt"))  # scores, no labels


def test_stsb_eval_and_predict_from_the_converted_model_give_transformers_scores(google, tmp_path):
    """No training: test_results.tsv holds transformers' scores (1e-4), STS-B.tsv GLUE's
    columns and rows, eval_results.txt SciPy's Pearson and Spearman of those scores."""
    results = run_classifier(options(google, tmp_path / "out", do_eval=True, do_predict=True))
    out = tmp_path / "out"
    scores = np.array([float(line) for line in (out / "test_results.tsv").read_text().splitlines()])
    np.testing.assert_allclose(scores, HF_SCORES["test"], atol=1e-4)
    np.testing.assert_allclose(results["predict"], HF_SCORES["test"], atol=1e-4)
    submission = (out / "STS-B.tsv").read_text().splitlines()
    assert submission[0] == "index\tprediction" and len(submission) == 1 + len(HF_SCORES["test"])
    for i, line in enumerate(submission[1:]):
        index, prediction = line.split("\t")
        assert index == str(i) and abs(float(prediction) - HF_SCORES["test"][i]) <= 5e-4 + 1e-4
        assert len(prediction.split(".")[1]) == 3
    written = read_results(out / "eval_results.txt")
    labels, hf_dev = dev_labels(), np.array(HF_SCORES["dev"])
    assert written["eval_pearson"] == pytest.approx(scipy.stats.pearsonr(hf_dev, labels)[0], abs=1e-4)
    assert written["eval_spearmanr"] == pytest.approx(scipy.stats.spearmanr(hf_dev, labels)[0], abs=1e-6)
    assert written["eval_loss"] == pytest.approx(np.mean((hf_dev - labels) ** 2), abs=1e-4)


def test_google_to_hf_gives_back_a_regression(google, tmp_path):
    back = str(tmp_path / "hf")
    convert(
        hf_output_dir=back,
        bert_config_file=os.path.join(google, "bert_config.json"),
        init_checkpoint=os.path.join(google, "bert_model.ckpt"),
        vocab_file=os.path.join(google, "vocab.txt"),
        do_lower_case=True,
    )
    with open(os.path.join(back, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    with open(os.path.join(DATA, "model", "config.json"), encoding="utf-8") as f:
        original = json.load(f)
    assert config["architectures"] == ["BertForSequenceClassification"]
    for key in ("problem_type", "id2label", "label2id"):
        assert config[key] == original[key], key
    written = safetensors.numpy.load_file(os.path.join(back, "model.safetensors"))
    source = safetensors.numpy.load_file(os.path.join(DATA, "model", "model.safetensors"))
    assert sorted(written) == sorted(source)
    assert all(np.array_equal(written[name], source[name]) for name in source)


@pytest.mark.onednn_both
def test_a_few_steps_of_stsb_lower_the_loss_and_export_the_scores(google, tmp_path):
    """Trained on the dev rows themselves, the squared error falls; the export's `scores` on a
    pair equal the trained model's."""
    before = run_classifier(options(google, tmp_path / "before", do_eval=True))["eval"]["eval_loss"]
    data_dir = tmp_path / "stsb"
    shutil.copytree(os.path.join(DATA, "stsb"), data_dir)
    shutil.copy(data_dir / "dev.tsv", data_dir / "train.tsv")
    trained = options(
        google,
        tmp_path / "after",
        data_dir=str(data_dir),
        do_train=True,
        do_eval=True,
        do_predict=True,
        train_batch_size=3,
        num_train_epochs=10.0,
        learning_rate=1e-3,
        seed=3,
        export_dir=str(tmp_path / "export"),
    )
    results = run_classifier(trained)
    assert results["eval"]["eval_loss"] < 0.8 * before, (before, results["eval"])
    loaded = tf.saved_model.load(results["export"])
    served = loaded.signatures["text_pair"](
        text_a=tf.constant([r.split("\t")[7] for r in _test_rows()]),
        text_b=tf.constant([r.split("\t")[8] for r in _test_rows()]),
    )
    assert sorted(served) == ["scores"]
    np.testing.assert_allclose(served["scores"].numpy(), results["predict"], atol=1e-5)
    weights = reference.load_checkpoint_weights(os.path.join(tmp_path / "after", "model.ckpt-20"))
    assert weights["output_weights"].shape == (1, 24)


def _test_rows():
    with open(os.path.join(DATA, "stsb", "test.tsv"), encoding="utf-8") as f:
        return f.read().splitlines()[1:]
