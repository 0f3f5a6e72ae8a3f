"""Pretrains BERT (or continues pretraining) on create_pretraining_data.py's TFRecords.

The original's run_pretraining.py flags, plus --strategy, --mixed_precision, --jit_compile,
--gradient_accumulation_steps, --gradient_reduction, --optimizer, --seed, --keep_checkpoint_max:
  python tools/run_pretraining.py --input_file='out/*.tfrecord' --output_dir=out/pretraining \
      --bert_config_file=bert_config.json --do_train --do_eval --train_batch_size=32 \
      --max_seq_length=128 --max_predictions_per_seq=20 --num_train_steps=1000 \
      --num_warmup_steps=100 --learning_rate=1e-4

Rerunning the same command after a crash resumes from the latest checkpoint in --output_dir.
"""

from absl import flags

from bert_tf import cli

# The original's flags, with its defaults.
flags.DEFINE_string("bert_config_file", None, "The bert_config.json of the model to train.")
flags.DEFINE_string("input_file", None, "Input TFRecord files (comma-separated globs).")
flags.DEFINE_string("output_dir", None, "Where checkpoints, eval_results.txt and TensorBoard events go.")
flags.DEFINE_string("init_checkpoint", None, "Initial weights (usually a pretrained Google checkpoint).")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the records (must match data generation).")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked LM predictions per record (must match the data).")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run evaluation.")
flags.DEFINE_integer("train_batch_size", 32, "Total (global) batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Total (global) batch size for evaluation.")
flags.DEFINE_float("learning_rate", 5e-5, "The peak learning rate.")
flags.DEFINE_integer(
    "num_train_steps", 100000, "Number of training steps (a total: resumed runs continue to it)."
)
flags.DEFINE_integer("num_warmup_steps", 10000, "Number of linear warm-up steps.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "Save a checkpoint every this many steps.")
flags.DEFINE_integer(
    "iterations_per_loop", 1000, "Steps per compiled loop call (metrics are logged after each)."
)
flags.DEFINE_integer("max_eval_steps", 100, "Number of evaluation batches.")
flags.DEFINE_bool("use_tpu", False, "Train on a Cloud TPU (same as --strategy=tpu).")
flags.DEFINE_string("tpu_name", None, "The Cloud TPU's name or grpc:// address.")
flags.DEFINE_string("tpu_zone", None, "GCE zone of the Cloud TPU.")
flags.DEFINE_string("gcp_project", None, "GCP project of the Cloud TPU.")
flags.DEFINE_string("master", None, "TensorFlow master URL (used for the TPU when --tpu_name is not given).")
flags.DEFINE_integer("num_tpu_cores", 8, "TPU cores (checked against the TPU found; TF2 uses all of them).")
# bert_tf's.
flags.DEFINE_enum(
    "strategy", "default", ["default", "mirrored", "multi_worker_mirrored", "tpu"], "tf.distribute strategy."
)
flags.DEFINE_enum(
    "mixed_precision",
    "float32",
    ["float32", "mixed_float16", "mixed_bfloat16"],
    "Compute dtype; mixed_float16 uses dynamic loss scaling. Weights stay float32.",
)
flags.DEFINE_bool("jit_compile", False, "Compile the forward and backward pass with XLA.")
flags.DEFINE_integer(
    "gradient_accumulation_steps", 1, "Micro-batches per step (same update as the whole batch)."
)
flags.DEFINE_enum(
    "gradient_reduction",
    "global",
    ["global", "tpu_original"],
    "global: one step equals one device's on the global batch; tpu_original: each replica clips "
    "its own gradient and the clipped gradients are summed, as the original on TPU.",
)
flags.DEFINE_enum(
    "optimizer", "adamw", ["adamw", "lamb"], "adamw: the original's AdamWeightDecay; lamb: LAMB."
)
flags.DEFINE_integer("seed", None, "Seed of the weight initialisation, dropout and input shuffling.")
flags.DEFINE_integer("keep_checkpoint_max", 5, "Checkpoints kept in --output_dir (0: all).")

for _name in ("input_file", "bert_config_file", "output_dir"):
    flags.mark_flag_as_required(_name)

FLAGS = flags.FLAGS


def main(argv):
    del argv
    import logging

    from bert_tf.training.pretraining import PretrainingOptions, run_pretraining

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    names = [field for field in PretrainingOptions.__dataclass_fields__ if field in FLAGS]
    options = PretrainingOptions(**{name: FLAGS[name].value for name in names})
    if FLAGS.use_tpu:
        options.strategy = "tpu"
    run_pretraining(options)


if __name__ == "__main__":
    cli.run(main)
