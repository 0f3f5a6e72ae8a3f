r"""Exports a BERT checkpoint as a versioned SavedModel for TF Serving.

  python tools/export_saved_model.py --bert_config_file=bert_config.json \
      --init_checkpoint=bert_model.ckpt --vocab_file=vocab.txt --do_lower_case=True \
      --max_seq_length=128 --export_dir=/models/bert [--with_heads] [--text_tokens] [--overwrite]

Writes `<export_dir>/<version>/` (the next free integer version unless --version is given)
with the signatures serving_default, text, text_pair, tf_example and, with --with_heads,
pretraining (docs/serving.md documents their inputs and outputs).
"""

from bert_tf import cli
from bert_tf.export.bert import ExportOptions, run_export
from bert_tf.options import define_flags, options_from_flags

define_flags(ExportOptions)


def main(argv):
    del argv
    run_export(options_from_flags(ExportOptions))


if __name__ == "__main__":
    cli.run(main)
