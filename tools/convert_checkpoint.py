"""Converts a Google BERT checkpoint to Keras (or back) and checks it numerically.

Google -> Keras (checks against the float64 NumPy reference; exits 1 above tolerance):
  python tools/convert_checkpoint.py --bert_config_file=.../bert_config.json \
      --init_checkpoint=.../bert_model.ckpt [--output=model.keras | model.weights.h5]

Keras -> Google (writes bert_model.ckpt.* and bert_config.json, checks the bytes read back):
  python tools/convert_checkpoint.py --keras_model=model.keras --output=out/bert_model.ckpt
"""

from absl import flags

from bert_tf import cli

flags.DEFINE_string("bert_config_file", None, "The checkpoint's bert_config.json.")
flags.DEFINE_string("init_checkpoint", None, "Google checkpoint prefix or its directory.")
flags.DEFINE_string(
    "keras_model", None, "A bert_tf model saved as .keras, to write back as a Google checkpoint."
)
flags.DEFINE_string("output", None, "Keras file (.keras / .weights.h5) or Google checkpoint prefix.")
flags.DEFINE_float("tolerance", None, "Largest allowed max-abs difference from the reference (default 1e-4).")
flags.DEFINE_integer("seed", 0, "Seed of the generated check inputs.")
flags.DEFINE_bool("print_parameters", True, "Print the parameter count per component.")

FLAGS = flags.FLAGS


def main(argv):
    del argv
    from bert_tf.checkpoints import converter, parameters
    from bert_tf.modeling import BertPretrainer

    if FLAGS.keras_model:
        if not FLAGS.output:
            raise ValueError("--keras_model needs --output (the Google checkpoint prefix to write)")
        model, prefix = converter.keras_to_google(FLAGS.keras_model, FLAGS.output)
        print(f"Wrote {len(model.weights)} variables to {prefix} (read back identically).")
        return 0
    if not (FLAGS.bert_config_file and FLAGS.init_checkpoint):
        raise ValueError("give --bert_config_file and --init_checkpoint, or --keras_model")
    tolerance = converter.DEFAULT_TOLERANCE if FLAGS.tolerance is None else FLAGS.tolerance
    result = converter.google_to_keras(
        FLAGS.bert_config_file, FLAGS.init_checkpoint, FLAGS.output, tolerance, FLAGS.seed
    )
    print(result.load_report)
    if FLAGS.print_parameters:
        # The pretraining heads are counted where the checkpoint has them.
        with_heads = isinstance(result.model, BertPretrainer)
        print(parameters.format_parameter_table(parameters.parameter_counts(result.model.config, with_heads)))
    print(result.verification.format_table())
    if not result.verification.ok:
        return 1
    if FLAGS.output:
        print(f"Wrote {FLAGS.output}")
    return 0


if __name__ == "__main__":
    cli.run(main)
