"""Checks by hand, with sentence-transformers itself, what `tests/test_sentence_embeddings*.py` can
only check against files it wrote: that `SentenceTransformer` loads what `convert_checkpoint.py
--hf_output_dir` writes for a converted sentence encoder, with the same modules and embeddings.

It converts the real all-MiniLM-L6-v2 (`tests.real_model.fetch_hf_model`) HF -> Google -> HF with
bert_tf's tool, then in this process loads the result with `SentenceTransformer`: its modules must
be Transformer, Pooling (mean) and Normalize, its `max_seq_length` the published model's (recorded
in `minilm_sentence_embeddings.npz`), and `encode()` must give the recorded embeddings to 1e-5.

Run from the repository root, in the environment `make_sentence_embeddings.py` names, with
bert_tf's own:

    /tmp/hfenv/bin/python tests/data/check_sentence_modules.py [--bert_tf_python=.venv/bin/python]
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
from sentence_transformers import SentenceTransformer

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from tests import real_model  # noqa: E402  (the repository's root is on the path from here)


def convert(python, *flags):
    command = [python, os.path.join(REPO, "tools", "convert_checkpoint.py"), "--noprint_parameters", *flags]
    # This checkout's bert_tf, whatever the environment has installed.
    env = dict(os.environ, PYTHONPATH=REPO)
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env, check=False)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr[-2000:]}")


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
        f"ok: {', '.join(kinds)} (mean pooling), max_seq_length {model.max_seq_length}; encode() within "
        f"{difference:.1e} of the recorded embeddings"
    )


if __name__ == "__main__":
    main()
