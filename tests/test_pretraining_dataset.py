"""The tf.data reader of pretraining TFRecords."""

import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import make_pretraining_dataset
from tests import pretraining_fixtures as pf

FIXTURE = os.path.join(pf.DATA_DIR, "sample_s12345.tfrecord")


def test_eval_batches_are_the_records_in_order_as_int32(fixtures_dir):
    dataset = make_pretraining_dataset(FIXTURE, 4, 128, 20, is_training=False)
    batches = list(dataset)
    assert len(batches) == 15
    first, want = batches[0], pf.fixture_records()[:4]
    for name, value in first.items():
        assert value.dtype == (tf.float32 if name == "masked_lm_weights" else tf.int32), name
        np.testing.assert_array_equal(value.numpy(), np.array([r[name] for r in want]), err_msg=name)
    assert first["next_sentence_labels"].shape == (4, 1)


def test_eval_reads_the_files_in_the_order_given(fixtures_dir, tmp_path):
    records = list(tf.data.TFRecordDataset(FIXTURE).as_numpy_iterator())
    # "a[1]" also matches "a1" as a glob: the file named "a[1]" is read, not "a1".
    parts = {"b.tfrecord": records[:4], "a[1].tfrecord": records[4:8], "a1.tfrecord": records[8:12]}
    for name, part in parts.items():
        with tf.io.TFRecordWriter(str(tmp_path / name)) as writer:
            for record in part:
                writer.write(record)
    files = [str(tmp_path / "b.tfrecord"), str(tmp_path / "a[1].tfrecord")]
    dataset = make_pretraining_dataset(files, 4, 128, 20, is_training=False, repeat=False)
    got = [batch["input_ids"].numpy().tolist() for batch in dataset]
    want = [[r["input_ids"] for r in pf.fixture_records()[i : i + 4]] for i in (0, 4)]
    assert got == want


def test_training_shards_files_per_pipeline_and_repeats(fixtures_dir, tmp_path):
    records = list(tf.data.TFRecordDataset(FIXTURE).as_numpy_iterator())
    paths = []
    for i in range(4):
        path = str(tmp_path / f"part-{i}.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for record in records[i::4]:
                writer.write(record)
        paths.append(path)
    seen = []
    for pipeline_id in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline_id)
        dataset = make_pretraining_dataset(
            str(tmp_path / "part-*.tfrecord"), 5, 128, 20, is_training=True, input_context=context, seed=1
        )
        ids = set()
        for batch in dataset.take(30):  # 150 examples from a pipeline holding 30: it repeats
            ids.update(tuple(row) for row in batch["input_ids"].numpy().tolist())
        want = {
            tuple(r["input_ids"]) for i in (pipeline_id, pipeline_id + 2) for r in pf.fixture_records()[i::4]
        }
        assert ids == want
        seen.append(ids)
    assert not seen[0] & seen[1]
    with pytest.raises(ValueError, match=r"input_patterns: '.*none-\*' matches no file"):
        make_pretraining_dataset(str(tmp_path / "none-*"), 4, 128, 20)
