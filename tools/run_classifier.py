r"""Fine-tunes BERT for sentence (pair) classification: the original's run_classifier.py.

The original's flags (--task_name cola, mnli, mrpc or xnli, case-insensitive), plus every other
GLUE task by name (sst2, qqp, stsb, qnli, rte, wnli, mnli-mm), tsv/csv for your own files,
--export_dir, and the trainer's --strategy, --mixed_precision, --jit_compile, --seed,
--keep_checkpoint_max; --task_name=swag (SWAG's CSVs) or multiple_choice (yours, with
--ending_columns) fine-tunes a multiple-choice model instead:
  python tools/run_classifier.py --task_name=MRPC --do_train --do_eval --data_dir=$GLUE_DIR/MRPC \
      --vocab_file=$BERT_BASE_DIR/vocab.txt --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --max_seq_length=128 --train_batch_size=32 \
      --learning_rate=2e-5 --num_train_epochs=3.0 --output_dir=/tmp/mrpc_output/
"""

from bert_tf import cli
from bert_tf.options import define_flags, options_from_flags
from bert_tf.tasks.multiple_choice.run import MultipleChoiceOptions, run_classifier_tool

define_flags(MultipleChoiceOptions)


def main(argv):
    del argv
    run_classifier_tool(options_from_flags(MultipleChoiceOptions))


if __name__ == "__main__":
    cli.run(main)
