"""Writes the multiple-choice fixtures in `tests/data/hf_tiny/`: a tiny Hugging Face
`BertForMultipleChoice` saved by transformers, SWAG-format files, and what transformers computes
on them, for `tests/test_multiple_choice.py` (which needs neither torch nor transformers).

Run once, by hand, from the repository root, in the environment of `make_hf_tiny.py` (whose
vocabulary, config, weight drawing and tokenizer it reuses):

    /work/hfvenv/bin/python tests/data/make_hf_swag.py

What it writes, in `tests/data/hf_tiny/`:
- `multiple_choice/`: the model (hidden_act "gelu", uncased), as `save_pretrained` writes it,
  with its tokenizer's files;
- `swag/val.csv`, `swag/test.csv`: SWAG's files as distributed (an unnamed index column,
  `video-id`, `fold-ind`, `startphrase`, `sent1`, `sent2`, `gold-source`, `ending0`-`ending3`,
  `label`; `test.csv` without `label`); `swag/cut.csv`: one row whose pair is cut on both sides
  to an odd budget, where transformers' truncation and the original's differ;
- `multiple_choice.npz`: for each file (`val_`, `test_`, `cut_` prefixes), each choice packed as
  transformers' `examples/pytorch/multiple-choice/run_swag.py` packs it (first text `sent1`,
  second `f"{sent2} {ending}"`, `truncation=True`, `max_length=MAX_SEQ_LENGTH`,
  `padding="max_length"`): `input_ids`, `attention_mask`, `token_type_ids`
  [rows, 4, MAX_SEQ_LENGTH]; and the model's `logits` and `probabilities` (softmax over the
  endings) [rows, 4] in evaluation mode.
"""

import csv
import os
import shutil
import sys

import numpy as np
import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_hf_tiny  # noqa: E402

OUT = make_hf_tiny.OUT
MAX_SEQ_LENGTH = 24
ENDINGS = ("ending0", "ending1", "ending2", "ending3")
HEADER = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source", *ENDINGS, "label"]

# (sent1, sent2, endings, label); the words are the vocabulary's or spelled out in letters.
VAL = [
    (
        "John lives in Paris.",
        "He",
        ("was very good.", "is bad.", "play in Berlin.", "did go to the cafe."),
        0,
    ),
    ("The cafe was good.", "Who", ("lives in Berlin?", "was bad!", "is the world?", "did play."), 0),
    ("Hello world!", "The world", ("is good.", "was unable.", "is very very bad.", "plays."), 1),
    # Only the second text is cut (it alone is too long): both truncations agree.
    ("John plays.", "Then he", ("went to the cafe in Paris and lives in Berlin.", "is.", "was.", "did."), 3),
]
TEST = [
    ("Where did John go?", "He", ("went to Paris.", "went to Berlin.", "did not go.", "was bad."), None),
    ("The resume is naive.", "It", ("was good!", "is very bad.", "is unable.", "plays in Paris."), None),
]
# Both texts too long for an odd budget (MAX_SEQ_LENGTH - 3 = 21): the original gives the first
# text the odd piece, transformers' tokenizers the longer text.
CUT = [
    (
        "John lives in Paris and plays in Berlin and the cafe.",
        "The cafe",
        ("was very good and the world is very bad and john",) * 4,
        0,
    ),
]


def write_swag(path, rows):
    """A SWAG file as distributed; `label` only where the rows have labels."""
    labelled = rows[0][3] is not None
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(HEADER if labelled else HEADER[:-1])
        for i, (sent1, sent2, endings, label) in enumerate(rows):
            row = [i, f"anetv_{i}", i, f"{sent1} {sent2}", sent1, sent2, "gold", *endings]
            writer.writerow(row + [label] if labelled else row)


def main():
    directory = os.path.join(OUT, "multiple_choice")
    for path in (directory, os.path.join(OUT, "swag")):
        if os.path.exists(path):
            shutil.rmtree(path)
    os.makedirs(os.path.join(OUT, "swag"))
    seed = len(make_hf_tiny.HEADS)
    torch.manual_seed(seed)
    model = transformers.BertForMultipleChoice(make_hf_tiny.make_config("gelu", {}))
    make_hf_tiny.widen(model, seed)
    model.save_pretrained(directory)
    tokenizer = make_hf_tiny.make_tokenizer(True, directory)
    model.eval()
    arrays = {}
    for name, rows in (("val", VAL), ("test", TEST), ("cut", CUT)):
        write_swag(os.path.join(OUT, "swag", f"{name}.csv"), rows)
        # run_swag's preprocessing, row by row.
        first = [sent1 for sent1, _, endings, _ in rows for _ in endings]
        second = [f"{sent2} {ending}" for _, sent2, endings, _ in rows for ending in endings]
        encoded = tokenizer(first, second, truncation=True, max_length=MAX_SEQ_LENGTH, padding="max_length")
        inputs = {
            key: torch.tensor(value).view(len(rows), len(ENDINGS), -1) for key, value in encoded.items()
        }
        with torch.no_grad():
            logits = model(**inputs).logits
        for key, value in inputs.items():
            arrays[f"{name}_{key}"] = value.numpy()
        arrays[f"{name}_logits"] = logits.numpy()
        arrays[f"{name}_probabilities"] = torch.softmax(logits, dim=-1).numpy()
    np.savez(os.path.join(OUT, "multiple_choice.npz"), **arrays)
    print(f"wrote {directory}, swag/ and multiple_choice.npz; transformers {transformers.__version__}")


if __name__ == "__main__":
    main()
