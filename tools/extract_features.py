"""Extracts per-token BERT activations to JSON lines, with the original extract_features.py flags.

  python tools/extract_features.py --input_file=in.txt --output_file=out.jsonl \
      --vocab_file=vocab.txt --bert_config_file=bert_config.json \
      --init_checkpoint=bert_model.ckpt --layers=-1,-2,-3,-4 --max_seq_length=128
"""

import contextlib

from absl import flags, logging

from bert_tf import cli

flags.DEFINE_string("input_file", None, "Text file, one example a line ('text_a' or 'text_a ||| text_b').")
flags.DEFINE_string("output_file", None, "JSON lines file to write.")
flags.DEFINE_string(
    "layers", "-1,-2,-3,-4", "Comma-separated encoder layer indexes (negative: from the top)."
)
flags.DEFINE_string("bert_config_file", None, "The bert_config.json of the checkpoint.")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per sequence after WordPiece, [CLS] and [SEP] included.")
flags.DEFINE_string("init_checkpoint", None, "Google checkpoint prefix or directory.")
flags.DEFINE_string("vocab_file", None, "The vocab.txt the model was trained with.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (True for uncased models).")
flags.DEFINE_integer("batch_size", 32, "Examples per forward pass.")
flags.DEFINE_bool("use_tpu", False, "Run on the Cloud TPU at --master (a TPUStrategy).")
flags.DEFINE_string("master", None, "With --use_tpu: the TPU's address, e.g. grpc://10.240.1.2:8470.")
flags.DEFINE_integer("num_tpu_cores", 8, "With --use_tpu: TPU cores (TensorFlow 2 uses all the TPU has).")
flags.DEFINE_bool(
    "use_one_hot_embeddings",
    False,
    "Accepted for the original's command lines: it chose the original's TPU embedding lookup, "
    "which gives the same values as the gather used here.",
)

for _name in ("input_file", "output_file", "bert_config_file", "init_checkpoint", "vocab_file"):
    flags.mark_flag_as_required(_name)

FLAGS = flags.FLAGS


def _with_progress(records):
    from bert_tf.progress import Progress

    progress = Progress("extract_features", rate_of="examples")
    for count, record in enumerate(records, start=1):
        progress.update(examples=count)
        yield record
    progress.done()


def main(argv):
    del argv
    from bert_tf import BertConfig, BertModel, files, load_google_checkpoint, tokenization
    from bert_tf.export.bert import check_vocab_and_length
    from bert_tf.tasks import feature_extraction as features

    try:
        layer_indexes = [int(x) for x in FLAGS.layers.split(",")]
    except ValueError:
        raise ValueError(f"--layers must be comma-separated integers, got {FLAGS.layers!r}") from None
    if FLAGS.batch_size < 1:
        raise ValueError(f"--batch_size must be at least 1, got {FLAGS.batch_size}")
    files.check_output_path(FLAGS.output_file, "--output_file")
    tokenization.validate_case_matches_checkpoint(FLAGS.do_lower_case, FLAGS.init_checkpoint)
    tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
    scope = contextlib.nullcontext()
    if FLAGS.use_tpu:
        from bert_tf.training.distribution import create_distribution

        tpu = create_distribution("tpu", master=FLAGS.master, num_tpu_cores=FLAGS.num_tpu_cores)
        scope = tpu.strategy.scope()
    with scope:  # a model made under a strategy's scope predicts through it
        config = BertConfig.from_json_file(FLAGS.bert_config_file)
        check_vocab_and_length(config, FLAGS.vocab_file, FLAGS.max_seq_length)
        model = BertModel(config)
        logging.info("%s", load_google_checkpoint(model, FLAGS.init_checkpoint))
        records = features.extract_features(
            model,
            tokenizer,
            features.read_examples(FLAGS.input_file),
            FLAGS.max_seq_length,
            layer_indexes,
            FLAGS.batch_size,
        )
        count = features.write_jsonl(_with_progress(records), FLAGS.output_file)
    print(f"Wrote features of {count} examples to {FLAGS.output_file}")


if __name__ == "__main__":
    cli.run(main)
