"""Turns a text corpus into pretraining TFRecords, with the original create_pretraining_data flags.

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

import logging

from absl import app, flags

from bert_tf import cli

flags.DEFINE_string("input_file", None, "Input text file(s): comma-separated glob patterns.")
flags.DEFINE_string("output_file", None, "Output TFRecord file(s), comma-separated (scale mode: one prefix).")
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (True for uncased models).")
flags.DEFINE_bool("do_whole_word_mask", False, "Mask whole words instead of single WordPieces.")
flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum number of masked LM predictions per sequence.")
flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
flags.DEFINE_integer("dupe_factor", 10, "Number of times to duplicate the input data (with different masks).")
flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
flags.DEFINE_float(
    "short_seq_prob", 0.1, "Probability of creating sequences shorter than the maximum length."
)
flags.DEFINE_integer(
    "num_workers", 0, "0: the original's exact single-process output; N: scale mode with N processes."
)
flags.DEFINE_float(
    "shard_size_mb", 8.0, "Scale mode: megabytes of text per shard (bounds each worker's memory)."
)
flags.DEFINE_string(
    "runner",
    None,
    "Run scale mode on this Apache Beam runner: DirectRunner (--num_workers local processes, "
    "0: one per core), DataflowRunner, FlinkRunner, SparkRunner, PortableRunner. Flags this tool "
    "does not define are Beam pipeline options.",
)
flags.DEFINE_integer(
    "num_output_shards", 0, "With --runner: the number of output files (0: the runner decides)."
)

for _name in ("input_file", "output_file", "vocab_file"):
    flags.mark_flag_as_required(_name)

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
    from bert_tf.data import PretrainingDataOptions, create_pretraining_data

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    options = PretrainingDataOptions(
        vocab_file=FLAGS.vocab_file,
        do_lower_case=FLAGS.do_lower_case,
        do_whole_word_mask=FLAGS.do_whole_word_mask,
        max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        random_seed=FLAGS.random_seed,
        dupe_factor=FLAGS.dupe_factor,
        masked_lm_prob=FLAGS.masked_lm_prob,
        short_seq_prob=FLAGS.short_seq_prob,
    )
    summary = create_pretraining_data(
        FLAGS.input_file,
        FLAGS.output_file,
        options,
        FLAGS.num_workers,
        FLAGS.shard_size_mb,
        runner=FLAGS.runner,
        num_output_shards=FLAGS.num_output_shards,
        pipeline_args=argv[1:] if FLAGS.runner else (),
    )
    print(summary.format())


if __name__ == "__main__":
    cli.run(main, flags_parser=parse_flags)
