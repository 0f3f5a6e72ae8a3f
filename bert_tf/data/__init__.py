"""TFRecord data: the pretraining data (`create_pretraining_data.py`: corpus -> instances ->
masked examples -> TFRecords, exact or sharded in `pipeline`, shard by shard in `shards`, on
Apache Beam in `beam_pipeline`, its options in `options`), its reader (`dataset`), and the
fine-tuning tasks' feature files (`records`)."""

from bert_tf.data.options import CreatePretrainingDataOptions, PretrainingDataOptions
from bert_tf.data.pipeline import create_pretraining_data, run_create_pretraining_data
from bert_tf.data.shards import Summary


def __getattr__(name):
    # The reader needs TensorFlow; the writer side does not, so it is imported on demand.
    if name == "make_pretraining_dataset":
        from bert_tf.data.dataset import make_pretraining_dataset

        return make_pretraining_dataset
    raise AttributeError(f"module 'bert_tf.data' has no attribute {name!r}")


__all__ = [
    "CreatePretrainingDataOptions",
    "PretrainingDataOptions",
    "Summary",
    "create_pretraining_data",
    "make_pretraining_dataset",
    "run_create_pretraining_data",
]
