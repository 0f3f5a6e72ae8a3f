"""Fine-tunes BERT on SQuAD 1.1 or 2.0 and writes its answers: the original's run_squad.py.

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

from absl import flags

from bert_tf import cli
from bert_tf.tasks.finetuning import FinetuningOptions
from bert_tf.training.options import define_flags, options_from_flags

flags.DEFINE_string("train_file", None, "SQuAD json for training. E.g., train-v1.1.json")
flags.DEFINE_string("predict_file", None, "SQuAD json for predictions. E.g., dev-v1.1.json or test-v1.1.json")
# SQuAD evaluates the predictions (--predict_batch_size): the original has no --eval_batch_size.
define_flags(
    FinetuningOptions,
    omit=("eval_batch_size",),
    helps={"do_predict": "Whether to run eval on the dev set (--predict_file): writes predictions.json."},
    max_seq_length=384,
)
flags.DEFINE_integer(
    "doc_stride", 128, "When splitting a long document into windows, the most tokens between starts."
)
flags.DEFINE_integer("max_query_length", 64, "Question WordPieces kept; longer questions are truncated.")
flags.DEFINE_integer("n_best_size", 20, "Answers kept per question in nbest_predictions.json.")
flags.DEFINE_integer(
    "max_answer_length", 30, "The most WordPieces in an answer (start and end are predicted independently)."
)
flags.DEFINE_bool("verbose_logging", False, "Log every answer that cannot be aligned with the original text.")
flags.DEFINE_bool("version_2_with_negative", False, "SQuAD 2.0: some questions have no answer.")
flags.DEFINE_float(
    "null_score_diff_threshold", 0.0, 'SQuAD 2.0: answer "" if null score - best non-null score exceeds this.'
)

for _name in ("vocab_file", "bert_config_file", "output_dir"):
    flags.mark_flag_as_required(_name)


def main(argv):
    del argv
    import logging

    from bert_tf.tasks.squad import SquadOptions, run_squad

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    run_squad(options_from_flags(SquadOptions))


if __name__ == "__main__":
    cli.run(main)
