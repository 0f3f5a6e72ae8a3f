r"""Turns a text corpus into pretraining TFRecords, with the original create_pretraining_data flags.

Exact mode (default): the original's examples, in its order, for the same input, vocab and seed:
  python tools/create_pretraining_data.py --input_file=corpus/*.txt --output_file=out.tfrecord \
      --vocab_file=vocab.txt --do_lower_case=True --max_seq_length=128 \
      --max_predictions_per_seq=20 --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=5

Scale mode: --num_workers=N shards the corpus and writes <output_file>-SSSSS-of-NNNNN files in
parallel, with memory bounded by --shard_size_mb.

On Apache Beam (pip install 'bert_tf[beam]'): --runner=DirectRunner|DataflowRunner|FlinkRunner|
SparkRunner runs scale mode's shards on that runner; every flag this tool does not define is a
Beam pipeline option (--project, --region, --temp_location, --setup_file, --flink_master, ...):
  python tools/create_pretraining_data.py --input_file='gs://bucket/corpus/*.txt' \
      --output_file=gs://bucket/data/train.tfrecord --vocab_file=gs://bucket/vocab.txt \
      --runner=DataflowRunner --project=my-project --region=us-central1 \
      --temp_location=gs://bucket/tmp --setup_file=./setup.py --max_num_workers=100
"""

from absl import app, flags

from bert_tf import cli
from bert_tf.data import CreatePretrainingDataOptions, run_create_pretraining_data
from bert_tf.options import define_flags, options_from_flags

define_flags(CreatePretrainingDataOptions)

FLAGS = flags.FLAGS


def parse_flags(argv):
    """absl's parsing, except that with --runner the flags this tool does not define are left
    in argv for Beam's `PipelineOptions` (without --runner they are errors, as always)."""
    try:
        rest = FLAGS(argv, known_only=True)
    except flags.Error:
        rest = None  # reported by absl's own parsing below
    if rest is not None and FLAGS.runner:
        return rest
    return app.parse_flags_with_usage(argv)


def main(argv):
    options = options_from_flags(CreatePretrainingDataOptions)
    summary = run_create_pretraining_data(options, pipeline_args=argv[1:] if options.runner else ())
    print(summary.format())


if __name__ == "__main__":
    cli.run(main, flags_parser=parse_flags)
