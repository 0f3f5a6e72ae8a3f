r"""Exports a BERT model (with its fine-tuned head) as a LiteRT or ONNX file, checked in its runtime.

  python tools/export_edge.py --format=tflite --quantize=int8 --bert_config_file=bert_config.json \
      --init_checkpoint=bert_model.ckpt --vocab_file=vocab.txt --max_seq_length=128 \
      --calibration_texts=texts.txt --output=bert.tflite [--check_texts=FILE] [--benchmark]

The file takes int32 input_ids, input_mask, segment_ids [batch, seq] and returns the outputs of
the SavedModel's id signature. It is run in its own runtime (LiteRT, onnxruntime) against the
Keras model and written only if every output is within its tolerance (exit status 1 otherwise);
docs/edge.md says what each --quantize does and how it is checked.
"""

from bert_tf import cli
from bert_tf.export.edge import EdgeOptions, run_export_edge
from bert_tf.options import define_flags, options_from_flags

define_flags(EdgeOptions)


def main(argv):
    del argv
    return run_export_edge(options_from_flags(EdgeOptions))


if __name__ == "__main__":
    cli.run(main)
