"""Learns a WordPiece vocab.txt from a corpus, consistent with the original FullTokenizer.

python tools/build_vocab.py --input_file=corpus/*.txt --vocab_size=30522 --output=vocab.txt
"""

from bert_tf import cli
from bert_tf.options import define_flags, options_from_flags
from bert_tf.text.vocabulary import BuildVocabOptions, run_build_vocab

define_flags(BuildVocabOptions)


def main(argv):
    del argv
    run_build_vocab(options_from_flags(BuildVocabOptions))


if __name__ == "__main__":
    cli.run(main)
