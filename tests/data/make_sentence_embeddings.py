"""Writes `tests/data/minilm_sentence_embeddings.npz`: what sentence-transformers itself gives as
all-MiniLM-L6-v2's sentence embeddings (`encode()`) for a few texts, for
`tests/test_sentence_embeddings_real_model.py`, which needs neither torch nor sentence-transformers.

Run once, by hand, from the repository root, in a separate environment that has them (not
bert_tf's), e.g. the one `make_minilm.py` names plus `sentence-transformers==6.2.0`:

    /tmp/hfenv/bin/pip install sentence-transformers==6.2.0
    /tmp/hfenv/bin/python tests/data/make_sentence_embeddings.py

The model comes from the test cache (`tests.real_model.fetch_hf_model`). Besides the model as
published (its own modules: mean pooling, then Normalize), its transformer is encoded with a
`Pooling` module of each other mode built here, with and without a `Normalize` after it.

What the file holds, for `TEXTS`:
- `text`: the texts;
- `input_ids`: int32 [n, seq], the model's tokenizer on each text, padded with 0 to the longest;
- `published`: float32 [n, 384], `SentenceTransformer(model).encode(TEXTS)`;
- `max_seq_length`: int32 [], the published model's `max_seq_length` (its `sentence_bert_config.json`'s),
  past which `encode()` cuts a text;
- `<mode>` and `<mode>_normalized` for each of cls, mean, max, mean_sqrt_len_tokens: float32
  [n, 384], `encode` of `[Transformer, Pooling(mode)]` and `[Transformer, Pooling(mode),
  Normalize]` on the same weights.

And `tests/data/st_modules/`: the files of the modules that `save()` of the published model writes
(`modules.json`, `1_Pooling/config.json`, `2_Normalize/config.json`), for
`tests/test_sentence_embeddings.py` to hold `--hf_output_dir`'s against.
"""

import os
import shutil
import sys
import tempfile

import numpy as np
import sentence_transformers
import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.base.modules import Normalize
from sentence_transformers.sentence_transformer.modules import Pooling

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from tests import real_model  # noqa: E402  (the repository's root is on the path from here)

OUT = os.path.join(REPO, "tests", "data", "minilm_sentence_embeddings.npz")
MODULES_OUT = os.path.join(REPO, "tests", "data", "st_modules")
MODULE_FILES = ("modules.json", "1_Pooling/config.json", "2_Normalize/config.json")
MODES = ("cls", "mean", "max", "mean_sqrt_len_tokens")

# Texts of different lengths (so a batch pads), unrelated and related meanings; ones FullTokenizer
# splits as the model's tokenizer does (checked by the test on `input_ids`).
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "A café in Zürich serves a naïve crème brûlée, apparently!",
    "Quantization trades a little accuracy for smaller, faster models on phones.",
    "A fast brown fox leaps over a sleepy dog.",
    "Is the museum open on Sundays?",
    "Hi.",
]


def main():
    hf_dir = real_model.fetch_hf_model()
    torch.manual_seed(0)
    published = SentenceTransformer(hf_dir, device="cpu")
    transformer = published[0]
    arrays = {"text": np.array(TEXTS), "published": published.encode(TEXTS, convert_to_numpy=True)}
    arrays["max_seq_length"] = np.array(published.max_seq_length, np.int32)
    encoded = [published.tokenizer(text)["input_ids"] for text in TEXTS]
    length = max(len(ids) for ids in encoded)
    arrays["input_ids"] = np.array([ids + [0] * (length - len(ids)) for ids in encoded], np.int32)
    width = transformer.get_embedding_dimension()
    for mode in MODES:
        pooling = Pooling(width, pooling_mode=mode)
        plain = SentenceTransformer(modules=[transformer, pooling], device="cpu")
        arrays[mode] = plain.encode(TEXTS, convert_to_numpy=True)
        normalized = SentenceTransformer(modules=[transformer, pooling, Normalize()], device="cpu")
        arrays[f"{mode}_normalized"] = normalized.encode(TEXTS, convert_to_numpy=True)
    arrays = {k: v.astype(np.float32) if v.dtype.kind == "f" else v for k, v in arrays.items()}
    np.savez_compressed(OUT, **arrays)
    with tempfile.TemporaryDirectory() as saved:
        published.save(saved)
        for name in MODULE_FILES:
            os.makedirs(os.path.dirname(os.path.join(MODULES_OUT, name)), exist_ok=True)
            shutil.copyfile(os.path.join(saved, name), os.path.join(MODULES_OUT, name))
    print(
        f"wrote {OUT}: {os.path.getsize(OUT):,} bytes, {len(TEXTS)} texts; sentence-transformers "
        f"{sentence_transformers.__version__}, torch {torch.__version__}"
    )


if __name__ == "__main__":
    main()
