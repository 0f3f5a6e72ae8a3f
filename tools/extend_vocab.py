r"""Adds tokens to a pretrained checkpoint's vocabulary, for continued pretraining on a domain.

From a list (one token a line), over [unusedN] entries (--mode=unused, the default) or as new
rows (--mode=append):
  python tools/extend_vocab.py --bert_config_file=.../bert_config.json \
      --init_checkpoint=.../bert_model.ckpt --vocab_file=.../vocab.txt --do_lower_case=true \
      --new_tokens=tokens.txt [--mode=append] --output_dir=out

Chosen from a domain corpus (the words saving the most pieces, written to out/added_tokens.txt):
  python tools/extend_vocab.py ... --corpus='domain/*.txt' --max_new_tokens=500 --output_dir=out

A new token's embedding (and output bias) is the mean of its old pieces'; out/ is then the
--bert_config_file, --vocab_file and --init_checkpoint of create_pretraining_data.py and
run_pretraining.py.
"""

from bert_tf import cli
from bert_tf.checkpoints.vocab_extension import ExtendVocabOptions, run_extend_vocab
from bert_tf.options import define_flags, options_from_flags

define_flags(ExtendVocabOptions, omit=("max_seq_length",))


def main(argv):
    del argv
    run_extend_vocab(options_from_flags(ExtendVocabOptions))


if __name__ == "__main__":
    cli.run(main)
