"""What the BERT benchmarks share: the pretraining batch shape, a synthetic batch, and running one
measurement in a fresh process. NumPy only (imported when used), so the GPU benchmark can use it
on a machine without TensorFlow."""

import json
import os
import subprocess
import sys

SEQ, PREDICTIONS, VOCAB = 128, 20, 30522


def synthetic_batch(batch, seed=0):
    """Random ids, full-length rows in two segments, 20 distinct masked positions per row."""
    import numpy as np

    rng = np.random.RandomState(seed)
    positions = np.sort(
        np.stack([rng.choice(np.arange(1, SEQ - 1), PREDICTIONS, replace=False) for _ in range(batch)])
    )
    return {
        "input_ids": rng.randint(1000, VOCAB, size=(batch, SEQ)).astype("int32"),
        "input_mask": np.ones((batch, SEQ), "int32"),
        "segment_ids": (np.arange(SEQ)[None] >= SEQ // 2).repeat(batch, 0).astype("int32"),
        "masked_lm_positions": positions.astype("int32"),
        "masked_lm_ids": rng.randint(1000, VOCAB, size=(batch, PREDICTIONS)).astype("int32"),
        "masked_lm_weights": np.ones((batch, PREDICTIONS), "float32"),
        "next_sentence_labels": rng.randint(0, 2, size=(batch, 1)).astype("int32"),
    }


def run_in_fresh_process(script, *args, missing="No module named"):
    """Runs `script --worker ...args` in a fresh process and returns the JSON of its `RESULT `
    line; None if it failed because a module is missing (`missing` in its stderr).

    Raises:
      RuntimeError: The worker failed otherwise (with the end of its stderr).
    """
    result = subprocess.run(
        [sys.executable, script, "--worker", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    for line in result.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    if missing in result.stderr:
        return None
    raise RuntimeError(f"{' '.join(args)} failed:\n{result.stderr[-3000:]}")


def hf_bert_config(layers, hidden, heads, intermediate):
    """Hugging Face transformers' `BertConfig` of that shape, with SDPA attention."""
    import transformers

    return transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=intermediate,
        attn_implementation="sdpa",
    )
