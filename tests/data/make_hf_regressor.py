"""Writes `tests/data/hf_regressor/`: a tiny Hugging Face `BertForSequenceClassification` with one
output and `problem_type="regression"` (STS-B's head), saved by transformers itself; small STS-B
files in GLUE's layout; and transformers' scores on their rows, for `tests/test_regression.py`
(which needs neither torch nor transformers).

Run once, by hand, from the repository root, in the environment of `make_hf_tiny.py`:

    /tmp/hfenv/bin/python tests/data/make_hf_regressor.py

What it writes, in `tests/data/hf_regressor/`:
- `model/`: the model as `save_pretrained` writes it, with its tokenizer's files (uncased);
- `stsb/dev.tsv`, `stsb/test.tsv`: STS-B's columns (`index genre filename year old_index source1
  source2 sentence1 sentence2 [score]`);
- `scores.json`: per file, the model's score of each row (evaluation mode), each pair encoded by
  transformers' tokenizer as run_glue does (`tokenizer(sentence1, sentence2, truncation=True,
  max_length=MAX_SEQ_LENGTH)`), with `max_seq_length` and the versions.
"""

import json
import os
import shutil
import sys

import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_hf_tiny import make_config, make_tokenizer, widen  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_regressor")
MAX_SEQ_LENGTH = 24
HEADER = ["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1", "sentence2"]
PAIRS = [
    ("John lives in Paris.", "John lives in Berlin.", "3.2"),
    ("The cafe was very good!", "The cafe was good.", "4.5"),
    ("Hello world.", "Who did go to Paris?", "0.4"),
    ("unable to play", "the playing was bad", "1.75"),
    ("What was good?", "What was very bad?", "2.0"),
    ("John and Paris and Berlin and the world and the cafe", "John lives in Paris, the world", "2.6"),
]
TEST_PAIRS = [
    ("Where did John go?", "John did go to Berlin."),
    ("hello", "hello world"),
    ("The resume was bad.", "It was naive."),
]


def write_tsv(path, rows, with_score):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\t".join(HEADER + (["score"] if with_score else [])) + "\n")
        for i, row in enumerate(rows):
            f.write(
                "\t".join([str(i), "main-captions", "MSRvid", "2012test", str(i), "none", "none", *row])
                + "\n"
            )


def main():
    if os.path.exists(OUT):
        shutil.rmtree(OUT)
    os.makedirs(os.path.join(OUT, "stsb"))
    torch.manual_seed(11)
    config = make_config("gelu", {})
    config.num_labels = 1
    config.problem_type = "regression"
    model = transformers.BertForSequenceClassification(config)
    widen(model, 11)
    model.save_pretrained(os.path.join(OUT, "model"))
    tokenizer = make_tokenizer(True, os.path.join(OUT, "model"))
    write_tsv(os.path.join(OUT, "stsb", "dev.tsv"), PAIRS, True)
    write_tsv(os.path.join(OUT, "stsb", "test.tsv"), TEST_PAIRS, False)
    model.eval()
    scores = {}
    for name, rows in (("dev", PAIRS), ("test", TEST_PAIRS)):
        encoded = tokenizer(
            [r[0] for r in rows],
            [r[1] for r in rows],
            truncation=True,
            max_length=MAX_SEQ_LENGTH,
            padding="max_length",
            return_tensors="pt",
        )
        with torch.no_grad():
            scores[name] = model(**encoded).logits[:, 0].tolist()
    scores.update(
        max_seq_length=MAX_SEQ_LENGTH, transformers=transformers.__version__, torch=torch.__version__
    )
    with open(os.path.join(OUT, "scores.json"), "w", encoding="utf-8") as f:
        json.dump(scores, f, indent=1)
    print(json.dumps(scores))


if __name__ == "__main__":
    main()
