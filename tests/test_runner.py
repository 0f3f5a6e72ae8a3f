"""The runner every job uses: the original's step arithmetic, the checks before anything is
written, and evaluation and prediction on two replicas (MirroredStrategy on 2 logical CPUs, in a
process of its own) against the float64 NumPy reference of a checkpoint in the original's
layout; the fine-tuning heads in float32 under mixed precision.
"""

import json
import os
import sys

import numpy as np
import pytest

from bert_tf.training.options import FinetuningOptions
from bert_tf.training.runner import Runner, train_steps, warmup_steps
from tests import finetuning_fixtures as ff
from tests import model_fixtures as mf
from tests import tool_runs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(REPO, "tools", "demo_data", "mrpc_keyword")


def test_train_and_warmup_steps_are_the_originals_arithmetic(tmp_path, fixtures_dir):
    # MRPC: 3,668 examples, batch 32, 3 epochs -> int(343.875) = 343 steps, int(34.3) = 34 warm-up.
    assert train_steps(3668, 32, 3.0) == 343
    assert warmup_steps(343, 0.1) == 34
    assert train_steps(10, 32, 3.0) == 0
    options = FinetuningOptions(
        vocab_file=os.path.join(mf.GOOGLE_TINY, "vocab.txt"),
        bert_config_file=mf.GOOGLE_TINY_CONFIG,
        output_dir=str(tmp_path),
        do_train=True,
    )
    runner = Runner.for_finetuning(options)
    with pytest.raises(
        ValueError, match="10 training examples with --train_batch_size=32 .* give no training step"
    ):
        runner.train_records(None, "unused", {}, 10)


def _larger_vocab(tmp_path):
    """google_tiny's vocab.txt with one token more than its config's vocab_size (30522)."""
    with open(os.path.join(mf.GOOGLE_TINY, "vocab.txt"), encoding="utf-8") as f:
        text = f.read()
    path = tmp_path / "larger_vocab.txt"
    path.write_text(text + "[EXTRA]\n", encoding="utf-8")
    return str(path)


def test_options_are_checked_before_anything_is_written(tmp_path, fixtures_dir):
    base = dict(
        vocab_file=os.path.join(mf.GOOGLE_TINY, "vocab.txt"),
        bert_config_file=mf.GOOGLE_TINY_CONFIG,
        output_dir=str(tmp_path / "out"),
        do_eval=True,
    )
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    for changes, message in (
        (dict(do_eval=False), "at least one of --do_train, --do_eval or --do_predict"),
        (dict(max_seq_length=513), r"--max_seq_length.*max_position_embeddings \(512\)"),
        (dict(vocab_file=_larger_vocab(tmp_path)), r"--vocab_file.*the vocabulary has 30523 tokens"),
        (dict(init_checkpoint="cased_L-12_H-768_A-12/bert_model.ckpt", do_lower_case=True), "do_lower_case"),
        (dict(export_dir=str(a_file)), r"^--export_dir: .*/a_file is a file, not a directory$"),
    ):
        with pytest.raises(ValueError, match=message):
            Runner.for_finetuning(FinetuningOptions(**dict(base, **changes)))
    assert not (tmp_path / "out").exists()


_MIRRORED = """
import json, os, sys
sys.path.insert(0, os.getcwd())
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from bert_tf.tasks.classifier.run import ClassifierOptions, run_classifier
results = run_classifier(ClassifierOptions(**json.loads(sys.argv[1])))
print(json.dumps({"replicas": tf.distribute.MirroredStrategy().num_replicas_in_sync,
                  "eval": results["eval"], "predict": results["predict"].tolist()}))
"""


def test_eval_and_predict_on_two_replicas_match_the_reference(tmp_path, fixtures_dir):
    """32 dev and 16 test examples in batches of 6: the last batch of each holds padding rows,
    which a replica may get only of; outputs come back in file order."""
    prefix = str(tmp_path / "original" / "model.ckpt-77")
    weights = ff.write_original_finetuned_checkpoint(prefix, 2, 77, seed=5)
    output_dir = tmp_path / "mirrored"
    options = dict(
        task_name="mrpc",
        data_dir=DEMO,
        vocab_file=os.path.join(mf.GOOGLE_TINY, "vocab.txt"),
        bert_config_file=mf.GOOGLE_TINY_CONFIG,
        output_dir=str(output_dir),
        init_checkpoint=prefix,
        max_seq_length=32,
        do_eval=True,
        do_predict=True,
        eval_batch_size=6,
        predict_batch_size=6,
        strategy="mirrored",
    )
    # Forked before TensorFlow has run an op (`tests.tool_runs`), so the script can still make
    # the logical devices.
    result = tool_runs.run(
        [sys.executable, "-c", _MIRRORED, json.dumps(options)],
        cwd=REPO,
        timeout=600,
        server=tool_runs.TENSORFLOW,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert got["replicas"] == 2
    probabilities, _ = ff.reference_probabilities(weights, str(output_dir / "predict.tf_record"), 32)
    np.testing.assert_allclose(got["predict"], probabilities, rtol=0, atol=2e-6)
    expected = ff.eval_reference(weights, str(output_dir / "eval.tf_record"), 32, 6)
    for key, value in expected.items():
        assert got["eval"][key] == pytest.approx(value, abs=1e-5), key


def test_heads_compute_in_float32_under_mixed_precision(fixtures_dir):
    import keras

    from bert_tf.config import BertConfig
    from bert_tf.modeling import BertClassifier, BertTagger

    config = BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG)
    ids = np.array([[101, 3899, 1037, 102, 0]], np.int32)
    inputs = {"input_ids": ids, "input_mask": np.array([[1, 1, 1, 1, 0]], np.int32), "segment_ids": 0 * ids}
    for model_class in (BertClassifier, BertTagger):
        mixed = model_class(config, 3, dtype="mixed_bfloat16")
        exact = model_class(config, 3)
        exact.set_weights(mixed.get_weights())
        assert [w.dtype for w in mixed.weights] == ["float32"] * len(mixed.weights)
        logits = mixed(inputs)["logits"]
        assert logits.dtype == "float32"
        # bfloat16 keeps 8 bits of mantissa in the encoder; the head adds no rounding of its own.
        np.testing.assert_allclose(keras.ops.convert_to_numpy(logits), exact(inputs)["logits"], atol=2e-2)


def test_every_jobs_task_is_a_task_for_the_runner():
    """Each job's task object has what the runner calls (`bert_tf.training.task.Task`); an object
    without the loss terms is not one."""
    from bert_tf.config import BertConfig
    from bert_tf.tasks.classifier.task import ClassifierTask
    from bert_tf.tasks.pretraining.task import PretrainingTask
    from bert_tf.tasks.squad.task import SquadTask
    from bert_tf.tasks.tagging.task import TaggingTask
    from bert_tf.training.task import Task

    config = BertConfig(
        vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16
    )
    tasks = [ClassifierTask(config, 2), TaggingTask(config, 3), SquadTask(config), PretrainingTask(config)]
    assert all(isinstance(task, Task) for task in tasks)

    class NoLoss:
        model, metric_names, loss_epsilons = tasks[0].model, (), (0.0,)

        def loss_denominators(self, batch):
            return []

    assert not isinstance(NoLoss(), Task)
