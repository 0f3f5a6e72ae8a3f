"""Fine-tunes BERT for sentence (pair) classification: the original's run_classifier.py.

The original's flags (--task_name cola, mnli, mrpc or xnli, case-insensitive), plus tsv/csv for
your own files, --export_dir, and the trainer's --strategy, --mixed_precision, --jit_compile,
--seed, --keep_checkpoint_max:
  python tools/run_classifier.py --task_name=MRPC --do_train --do_eval --data_dir=$GLUE_DIR/MRPC \
      --vocab_file=$BERT_BASE_DIR/vocab.txt --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --max_seq_length=128 --train_batch_size=32 \
      --learning_rate=2e-5 --num_train_epochs=3.0 --output_dir=/tmp/mrpc_output/
"""

from absl import flags

from bert_tf import cli
from bert_tf.tasks.finetuning import FinetuningOptions
from bert_tf.training.options import define_flags, options_from_flags

flags.DEFINE_string("data_dir", None, "The input data dir, with the task's .tsv files.")
flags.DEFINE_string("task_name", None, "The task: cola, mnli, mrpc, xnli (the original's), or tsv/csv.")
define_flags(FinetuningOptions)
# bert_tf's.
flags.DEFINE_string("text_a_column", "sentence", "tsv/csv: the header name of the text column.")
flags.DEFINE_string("text_b_column", None, "tsv/csv: the header name of the second text of a pair.")
flags.DEFINE_string("label_column", "label", "tsv/csv: the header name of the label column.")
flags.DEFINE_string(
    "labels", None, "tsv/csv: the labels, comma-separated (default: those of train.tsv/csv, sorted)."
)

for _name in ("data_dir", "task_name", "vocab_file", "bert_config_file", "output_dir"):
    flags.mark_flag_as_required(_name)


def main(argv):
    del argv
    import logging

    from bert_tf.tasks.classifier import ClassifierOptions, run_classifier

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    run_classifier(options_from_flags(ClassifierOptions))


if __name__ == "__main__":
    cli.run(main)
