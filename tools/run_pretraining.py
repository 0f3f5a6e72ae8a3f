r"""Pretrains BERT (or continues pretraining) on create_pretraining_data.py's TFRecords.

The original's run_pretraining.py flags, plus --strategy, --mixed_precision, --jit_compile,
--gradient_accumulation_steps, --gradient_reduction, --optimizer, --seed, --keep_checkpoint_max:
  python tools/run_pretraining.py --input_file='out/*.tfrecord' --output_dir=out/pretraining \
      --bert_config_file=bert_config.json --do_train --do_eval --train_batch_size=32 \
      --max_seq_length=128 --max_predictions_per_seq=20 --num_train_steps=1000 \
      --num_warmup_steps=100 --learning_rate=1e-4

Rerunning the same command after a crash resumes from the latest checkpoint in --output_dir.
"""

from bert_tf import cli
from bert_tf.options import define_flags, options_from_flags
from bert_tf.tasks.pretraining.run import PretrainingOptions, run_pretraining

define_flags(PretrainingOptions, omit=("vocab_file", "do_lower_case", "force_do_lower_case"))


def main(argv):
    del argv
    run_pretraining(options_from_flags(PretrainingOptions))


if __name__ == "__main__":
    cli.run(main)
