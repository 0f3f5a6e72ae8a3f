r"""Fine-tunes BERT for token tagging (e.g. CoNLL-2003 named entities): bert_tf's, beyond the original.

The original classifier's common flags (--vocab_file, --bert_config_file, --init_checkpoint,
--output_dir, --do_train/--do_eval/--do_predict, batch sizes, --learning_rate, ...) and the
trainer's (--strategy, --mixed_precision, ...), plus the files, the labels and --export_dir (a
SavedModel returning each token's label):
  python tools/run_tagger.py --do_train --do_eval --do_predict \
      --train_file=$CONLL_DIR/train.txt --eval_file=$CONLL_DIR/valid.txt \
      --predict_file=$CONLL_DIR/test.txt --vocab_file=$BERT_BASE_DIR/vocab.txt \
      --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --do_lower_case=False \
      --max_seq_length=128 --train_batch_size=32 --learning_rate=5e-5 --num_train_epochs=3.0 \
      --output_dir=/tmp/ner_output/
"""

from bert_tf import cli
from bert_tf.options import define_flags, options_from_flags
from bert_tf.tasks.tagging.run import TaggingOptions, run_tagger

define_flags(TaggingOptions)


def main(argv):
    del argv
    run_tagger(options_from_flags(TaggingOptions))


if __name__ == "__main__":
    cli.run(main)
