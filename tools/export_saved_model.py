"""Exports a BERT checkpoint as a versioned SavedModel for TF Serving.

  python tools/export_saved_model.py --bert_config_file=bert_config.json \
      --init_checkpoint=bert_model.ckpt --vocab_file=vocab.txt --do_lower_case=True \
      --max_seq_length=128 --export_dir=/models/bert [--with_heads] [--overwrite]

Writes `<export_dir>/<version>/` (the next free integer version unless --version is given)
with the signatures serving_default, text, text_pair, tf_example and, with --with_heads,
pretraining (README.md documents their inputs and outputs).
"""

from absl import flags

from bert_tf import cli

flags.DEFINE_string("bert_config_file", None, "The checkpoint's bert_config.json (optional for .keras).")
flags.DEFINE_string(
    "init_checkpoint",
    None,
    "Google checkpoint prefix or directory (released or pretraining output), or .keras.",
)
flags.DEFINE_string("vocab_file", None, "The vocab.txt the model was trained with.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (True for uncased models).")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the text and tf.Example signatures.")
flags.DEFINE_string("export_dir", None, "Model base directory (TF Serving's --model_base_path).")
flags.DEFINE_bool("with_heads", False, "Add the `pretraining` signature (masked LM and next sentence).")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Width of masked_lm_positions in `pretraining`.")
flags.DEFINE_bool(
    "text_signatures", True, "Export `text` and `text_pair` (their ops come from tensorflow-text)."
)
flags.DEFINE_integer("version", None, "Version to write (default: one above the highest existing).")
flags.DEFINE_bool("overwrite", False, "Replace the version if it exists.")

for _name in ("init_checkpoint", "vocab_file", "export_dir"):
    flags.mark_flag_as_required(_name)

FLAGS = flags.FLAGS


def main(argv):
    del argv
    from bert_tf.export import export_bert

    path, report = export_bert(
        FLAGS.init_checkpoint,
        FLAGS.bert_config_file,
        FLAGS.vocab_file,
        FLAGS.do_lower_case,
        FLAGS.max_seq_length,
        FLAGS.export_dir,
        with_heads=FLAGS.with_heads,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        text_signatures=FLAGS.text_signatures,
        version=FLAGS.version,
        overwrite=FLAGS.overwrite,
    )
    if report is not None:
        print(report)
    print(f"Exported {path}")


if __name__ == "__main__":
    cli.run(main)
