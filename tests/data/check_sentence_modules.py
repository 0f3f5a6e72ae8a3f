"""Checks by hand, with sentence-transformers itself, what `tests/test_sentence_embeddings*.py` can
only check against files it wrote: that `SentenceTransformer` loads what `convert_checkpoint.py
--hf_output_dir` writes for a converted sentence encoder, with the same modules and embeddings.

It converts the real all-MiniLM-L6-v2 (`tests.real_model.fetch_hf_model`) HF -> Google -> HF with
bert_tf's tool, then in this process loads the result with `SentenceTransformer`: its modules must
be Transformer, Pooling (mean) and Normalize, its `max_seq_length` the published model's (recorded
in `minilm_sentence_embeddings.npz`), and `encode()` must give the recorded embeddings to 1e-5.

Then, for each case of `sentence_lengths.json` (hf_tiny's model as a sentence encoder with the
case's `tokenizer_config.json` and `sentence_bert_config.json`), sentence-transformers'
`max_seq_length`, and the length its `encode()` cuts a long text at, must be the case's, which
`tests/test_sentence_embeddings.py` holds bert_tf's `read_hf_model` to.

Run from the repository root, in the environment `make_sentence_embeddings.py` names, with
bert_tf's own:

    /tmp/hfenv/bin/python tests/data/check_sentence_modules.py [--bert_tf_python=.venv/bin/python]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from sentence_transformers import SentenceTransformer

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(REPO, "tests", "data")
sys.path.insert(0, REPO)

from tests import real_model  # noqa: E402  (the repository's root is on the path from here)


def convert(python, *flags):
    command = [python, os.path.join(REPO, "tools", "convert_checkpoint.py"), "--noprint_parameters", *flags]
    # This checkout's bert_tf, whatever the environment has installed.
    env = dict(os.environ, PYTHONPATH=REPO)
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env, check=False)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr[-2000:]}")


def sentence_layout(directory, case):
    """hf_tiny's BertModel with a Transformer and a mean Pooling module, and `case`'s
    `tokenizer_config` and `sentence_bert_config` as their files (none where the case has none)."""
    shutil.copytree(os.path.join(DATA, "hf_tiny", "model"), directory)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    written = {
        "modules.json": modules,
        "1_Pooling/config.json": {"word_embedding_dimension": 24, "pooling_mode": "mean"},
        "tokenizer_config.json": case.get("tokenizer_config"),
        "sentence_bert_config.json": case.get("sentence_bert_config"),
    }
    for name, data in written.items():
        if data is not None:
            with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
                json.dump(data, f)
    return directory


def check_lengths(python, work):
    """sentence-transformers' length of each `sentence_lengths.json` case, and bert_tf's."""
    with open(os.path.join(DATA, "sentence_lengths.json"), encoding="utf-8") as f:
        cases = json.load(f)
    directories = [sentence_layout(os.path.join(work, f"lengths_{i}"), case) for i, case in enumerate(cases)]
    read = "import json, sys; from bert_tf.checkpoints import hf; "
    read += "print(json.dumps([hf.read_hf_model(d).max_seq_length for d in sys.argv[1:]]))"
    result = subprocess.run(
        [python, "-c", read, *directories],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=REPO),
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"bert_tf's read_hf_model failed:\n{result.stderr[-2000:]}")
    lengths = json.loads(result.stdout.strip().splitlines()[-1])
    long_text = " ".join(["hello"] * 60)
    for case, directory, bert_tf_length in zip(cases, directories, lengths, strict=True):
        model = SentenceTransformer(directory, device="cpu")
        cut = model.encode(long_text, output_value="token_embeddings").shape[0]
        got = (model.max_seq_length, cut, bert_tf_length)
        want = (case["max_seq_length"],) * 3
        assert got == want, f"{case['case']}: sentence-transformers' length, cut, bert_tf's {got}, not {want}"
    return len(cases)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bert_tf_python", default=os.path.join(REPO, ".venv", "bin", "python"))
    args = parser.parse_args()
    recorded = np.load(os.path.join(REPO, "tests", "data", "minilm_sentence_embeddings.npz"))
    with tempfile.TemporaryDirectory() as work:
        google, back = os.path.join(work, "google"), os.path.join(work, "hf")
        convert(args.bert_tf_python, f"--hf_model={real_model.fetch_hf_model()}", f"--output_dir={google}")
        convert(
            args.bert_tf_python,
            f"--bert_config_file={google}/bert_config.json",
            f"--init_checkpoint={google}",
            f"--vocab_file={google}/vocab.txt",
            "--do_lower_case=true",
            f"--hf_output_dir={back}",
        )
        model = SentenceTransformer(back, device="cpu")
        kinds = [type(module).__name__ for module in model]
        assert kinds == ["Transformer", "Pooling", "Normalize"], kinds
        assert model[1].pooling_mode == "mean", model[1].pooling_mode
        assert model.max_seq_length == int(recorded["max_seq_length"]), model.max_seq_length
        got = model.encode([str(text) for text in recorded["text"]], convert_to_numpy=True)
        difference = float(np.max(np.abs(got - recorded["published"])))
        assert difference <= 1e-5, difference
        print(
            f"ok: {', '.join(kinds)} (mean pooling), max_seq_length {model.max_seq_length}; encode() "
            f"within {difference:.1e} of the recorded embeddings"
        )
        count = check_lengths(args.bert_tf_python, work)
    print(
        f"ok: sentence-transformers' max_seq_length and bert_tf's are sentence_lengths.json's ({count} cases)"
    )


if __name__ == "__main__":
    main()
