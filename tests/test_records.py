"""The fine-tuning feature files: written atomically and in the same bytes in every process, read
back as the original's input_fn (training: repeated and shuffled; otherwise every record once,
then zero rows, per input pipeline).
"""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data.records import records_dataset, write_records


def _records(tmp_path, count):
    path = str(tmp_path / "r.tf_record")
    rows = [
        {"input_ids": [i, 10 + i], "weights": [0.5 * i], "is_real_example": [1]} for i in range(1, count + 1)
    ]
    assert write_records(path, rows) == count
    spec = {
        "input_ids": tf.io.FixedLenFeature([2], tf.int64),
        "weights": tf.io.FixedLenFeature([1], tf.float32),
        "is_real_example": tf.io.FixedLenFeature([], tf.int64),
    }
    return path, spec


def test_eval_dataset_covers_every_record_once_then_zero_rows(tmp_path):
    path, spec = _records(tmp_path, 5)
    batches = list(records_dataset(path, spec, 2, is_training=False, num_batches=3))
    assert [b["input_ids"].dtype for b in batches] == [tf.int32] * 3
    ids = np.concatenate([b["input_ids"].numpy() for b in batches])
    np.testing.assert_array_equal(ids, [[1, 11], [2, 12], [3, 13], [4, 14], [5, 15], [0, 0]])
    np.testing.assert_array_equal(np.concatenate([b["is_real_example"] for b in batches]), [1, 1, 1, 1, 1, 0])
    np.testing.assert_array_equal(
        np.concatenate([b["weights"] for b in batches])[:, 0], [0.5, 1, 1.5, 2, 2.5, 0]
    )
    # The second of two input pipelines reads records 2 and 4, then zero rows.
    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1, num_replicas_in_sync=2)
    batches = records_dataset(path, spec, 2, is_training=False, input_context=context, num_batches=2)
    np.testing.assert_array_equal(np.concatenate([b["input_ids"][:, 0] for b in batches]), [2, 4, 0, 0])


def test_training_dataset_repeats_every_record_in_full_batches(tmp_path):
    path, spec = _records(tmp_path, 5)
    dataset = records_dataset(path, spec, 2, is_training=True, seed=3)
    assert dataset.element_spec["input_ids"].shape == (2, 2)
    # Shuffled after the repeat (the original's order), so epochs mix in the buffer of 100.
    seen = np.concatenate([b["input_ids"][:, 0].numpy() for b in dataset.take(10)])
    assert len(seen) == 20 and set(seen) == {1, 2, 3, 4, 5}


def test_records_are_absent_after_a_failed_write(tmp_path):
    def rows():
        yield {"input_ids": [1]}
        raise RuntimeError("conversion failed")

    with pytest.raises(RuntimeError):
        write_records(str(tmp_path / "train.tf_record"), rows())
    assert os.listdir(tmp_path) == []


# Writes `path`.
_WRITE_RECORDS = """
from bert_tf.data.records import write_records
features = [{"input_ids": [101, 7, 102], "input_mask": [1, 1, 1], "segment_ids": [0, 0, 0], "label_ids": [i],
             "is_real_example": [1]} for i in range(3)]
write_records(path, features)
"""


def test_feature_records_are_the_same_bytes_in_every_process(tmp_path):
    """A `tf.train.Example`'s features are a map, which protobuf wrote in an order that changed
    from one process to the next: two runs of a tool gave other bytes."""
    # This process (its hash seed drawn at random) and two with seeds of their own.
    exec(_WRITE_RECORDS, {"path": str(tmp_path / "here.tf_record")})
    outputs = [(tmp_path / "here.tf_record").read_bytes()]
    for seed in ("1", "2"):
        path = tmp_path / f"seed{seed}.tf_record"
        code = "import sys; path = sys.argv[1]" + _WRITE_RECORDS
        env = dict(os.environ, PYTHONHASHSEED=seed)
        subprocess.run([sys.executable, "-c", code, str(path)], env=env, check=True, timeout=120)
        outputs.append(path.read_bytes())
    assert outputs[0] == outputs[1] == outputs[2]
