r"""Converts a Google BERT checkpoint to Keras (or back) and checks it numerically.

Google -> Keras (checks against the float64 NumPy reference; exits 1 above tolerance):
  python tools/convert_checkpoint.py --bert_config_file=.../bert_config.json \
      --init_checkpoint=.../bert_model.ckpt [--output=model.keras | model.weights.h5]

Keras -> Google (writes bert_model.ckpt.* and bert_config.json, checks the bytes read back):
  python tools/convert_checkpoint.py --keras_model=model.keras --output=out/bert_model.ckpt

Hugging Face -> Google (bert_config.json, vocab.txt, bert_model.ckpt.*, checkpoint, labels.txt,
model_settings.json with the tokenizer's do_lower_case, which the other tools read; checked as
Google -> Keras):
  python tools/convert_checkpoint.py --hf_model=hf_dir --output_dir=out

Google -> Hugging Face (config.json, model.safetensors, vocab.txt, tokenizer_config.json,
special_tokens_map.json):
  python tools/convert_checkpoint.py --bert_config_file=out/bert_config.json \
      --init_checkpoint=out --vocab_file=out/vocab.txt --hf_output_dir=hf_out [--labels_file=out/labels.txt]
"""

from bert_tf import cli
from bert_tf.checkpoints.converter import ConvertOptions, run_convert
from bert_tf.options import define_flags, options_from_flags

define_flags(ConvertOptions, omit=("max_seq_length",))


def main(argv):
    del argv
    return run_convert(options_from_flags(ConvertOptions))


if __name__ == "__main__":
    cli.run(main)
