r"""Converts a Google BERT checkpoint to Keras (or back) and checks it numerically.

Google -> Keras (checks against the float64 NumPy reference; exits 1 above tolerance):
  python tools/convert_checkpoint.py --bert_config_file=.../bert_config.json \
      --init_checkpoint=.../bert_model.ckpt [--output=model.keras | model.weights.h5]

Keras -> Google (writes bert_model.ckpt.* and bert_config.json, checks the bytes read back):
  python tools/convert_checkpoint.py --keras_model=model.keras --output=out/bert_model.ckpt
"""

from bert_tf import cli
from bert_tf.checkpoints.converter import ConvertOptions, run_convert
from bert_tf.options import define_flags, options_from_flags

define_flags(ConvertOptions)


def main(argv):
    del argv
    return run_convert(options_from_flags(ConvertOptions))


if __name__ == "__main__":
    cli.run(main)
