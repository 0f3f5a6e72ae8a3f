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
    with pytest.raises(ValueError, match="no TFRecord file matches"):
        make_pretraining_dataset(str(tmp_path / "none-*"), 4, 128, 20)
