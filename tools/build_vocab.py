"""Learns a WordPiece vocab.txt from a corpus, consistent with the original FullTokenizer.

python tools/build_vocab.py --input_file=corpus/*.txt --vocab_size=30522 --output=vocab.txt
"""

import logging

from absl import flags

from bert_tf import cli

flags.DEFINE_string("input_file", None, "Text file(s): comma-separated glob patterns.")
flags.DEFINE_integer("vocab_size", 30522, "Target vocabulary size, special tokens included.")
flags.DEFINE_string("output", None, "The vocab.txt to write.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case and strip accents (an uncased vocab).")
flags.DEFINE_list(
    "reserved_tokens",
    ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
    "Special tokens, first in the vocab; [PAD] must come first.",
)
flags.DEFINE_integer("min_count", 2, "Ignore words seen fewer times (their characters still count).")

for _name in ("input_file", "output"):
    flags.mark_flag_as_required(_name)

FLAGS = flags.FLAGS


def main(argv):
    del argv
    from bert_tf.text.vocabulary import build_vocab

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    tokens = build_vocab(
        FLAGS.input_file,
        FLAGS.output,
        FLAGS.vocab_size,
        FLAGS.do_lower_case,
        tuple(FLAGS.reserved_tokens),
        FLAGS.min_count,
    )
    print(f"Wrote {len(tokens):,} tokens to {FLAGS.output}")


if __name__ == "__main__":
    cli.run(main)
