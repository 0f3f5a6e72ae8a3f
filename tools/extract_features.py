r"""Extracts per-token BERT activations to JSON lines, with the original extract_features.py flags.

  python tools/extract_features.py --input_file=in.txt --output_file=out.jsonl \
      --vocab_file=vocab.txt --bert_config_file=bert_config.json \
      --init_checkpoint=bert_model.ckpt --layers=-1,-2,-3,-4 --max_seq_length=128
"""

from bert_tf import cli
from bert_tf.options import define_flags, options_from_flags
from bert_tf.tasks.features.run import FeaturesOptions, run_extract_features

define_flags(FeaturesOptions)


def main(argv):
    del argv
    run_extract_features(options_from_flags(FeaturesOptions))


if __name__ == "__main__":
    cli.run(main)
