"""The texts file of `extract_features.py` and the export tools (the original's input format):
one example a line, `text_a` or `text_a ||| text_b`; each packed as the original's features."""

import dataclasses
import re

from bert_tf.files import exists, isdir, open_file, original_line
from bert_tf.text.packing import pack_inputs

_PAIR_SEPARATOR = re.compile(r"^(.*) \|\|\| (.*)$")


@dataclasses.dataclass
class InputExample:
    """One input line: `text_b` is None for a single sequence."""

    unique_id: int
    text_a: str
    text_b: str = None


def read_examples(input_file):
    """Yields the `InputExample`s of a file (local or `gs://...`), one per line (the line
    stripped, as the original).

    Bytes that are not UTF-8 are dropped, as the original's `convert_to_unicode` does.

    Raises:
      ValueError: The file does not exist, or it is empty (where the original writes an empty
        output): raised at the first read, so an output being written from it is not replaced.
    """
    if not exists(input_file) or isdir(input_file):
        raise ValueError(f"{input_file}: no such input file")
    unique_id = -1
    with open_file(input_file, "rb") as reader:
        for unique_id, line in enumerate(reader):
            line = original_line(line).decode("utf-8", "ignore").strip()
            match = _PAIR_SEPARATOR.match(line)
            if match:
                yield InputExample(unique_id, match.group(1), match.group(2))
            else:
                yield InputExample(unique_id, line)
    if unique_id < 0:
        raise ValueError(f"{input_file}: the input file is empty (one example a line)")


def convert_example(example, tokenizer, max_seq_length):
    """The original's `convert_examples_to_features` for one example: `[CLS] a [SEP] (b [SEP])`,
    the pair truncated longest-first, zero-padded (`bert_tf.text.packing.pack_inputs`)."""
    return pack_inputs(
        tokenizer.tokenize(example.text_a),
        tokenizer.tokenize(example.text_b) if example.text_b else None,
        max_seq_length,
        tokenizer,
    )
