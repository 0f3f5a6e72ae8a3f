r"""Fine-tunes BERT on SQuAD 1.1 or 2.0 and writes its answers: the original's run_squad.py.

The original's flags (--train_file, --predict_file, --doc_stride, --max_query_length,
--n_best_size, --max_answer_length, --version_2_with_negative, --null_score_diff_threshold,
--verbose_logging and the common ones), plus --do_eval (official exact match and F1 of the
predictions on --predict_file), --export_dir (a SavedModel returning the start and end logits)
and the trainer's --strategy, --mixed_precision, --jit_compile, --seed, --keep_checkpoint_max:
  python tools/run_squad.py --vocab_file=$BERT_BASE_DIR/vocab.txt \
      --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --do_train=True \
      --train_file=$SQUAD_DIR/train-v1.1.json --do_predict=True \
      --predict_file=$SQUAD_DIR/dev-v1.1.json --train_batch_size=12 --learning_rate=3e-5 \
      --num_train_epochs=2.0 --max_seq_length=384 --doc_stride=128 --output_dir=/tmp/squad_base/
"""

from bert_tf import cli
from bert_tf.options import define_flags, options_from_flags
from bert_tf.tasks.squad.run import SquadOptions, run_squad

# SQuAD evaluates the predictions (--predict_batch_size): the original has no --eval_batch_size.
define_flags(SquadOptions, omit=("eval_batch_size",))


def main(argv):
    del argv
    run_squad(options_from_flags(SquadOptions))


if __name__ == "__main__":
    cli.run(main)
