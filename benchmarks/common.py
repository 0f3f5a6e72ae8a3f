"""What the BERT benchmarks share: the pretraining batch shape, the encoder's matmul FLOPs, a
synthetic batch, running one measurement in a fresh process, and the peers' models. Nothing
beyond the standard library is imported until used, so the GPU benchmark can use it on a machine
without TensorFlow."""

import json
import os
import subprocess
import sys
import time

SEQ, PREDICTIONS, VOCAB = 128, 20, 30522
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bert_config(shape):
    """bert_tf's `BertConfig` (from this working tree) of a shape {layers, hidden, heads,
    intermediate}, with BERT's vocabulary and two segment types."""
    if REPO not in sys.path:
        sys.path.insert(0, REPO)
    from bert_tf import BertConfig

    return BertConfig(
        vocab_size=VOCAB,
        hidden_size=shape["hidden"],
        num_hidden_layers=shape["layers"],
        num_attention_heads=shape["heads"],
        intermediate_size=shape["intermediate"],
        type_vocab_size=2,
    )


def encoder_matmul_flops(shape, last_layer_rows):
    """Matmul FLOPs of the encoder's forward pass over the batch (2 per multiply-add, attention
    included), its last layer's queries at `last_layer_rows` rows per sequence (SEQ: all)."""
    hidden, inner = shape["hidden"], shape["intermediate"]
    tokens = shape["batch"] * SEQ

    def layer(query_rows):
        keys_values = 2 * 2 * tokens * hidden * hidden
        query_output = 2 * 2 * query_rows * hidden * hidden
        feed_forward = 2 * 2 * query_rows * hidden * inner
        attention = 2 * 2 * query_rows * SEQ * hidden  # scores and context, over all heads
        return keys_values + query_output + feed_forward + attention

    return (shape["layers"] - 1) * layer(tokens) + layer(shape["batch"] * last_layer_rows)


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


def run_in_fresh_process(script, *args, missing="No module named", env=None, python=None):
    """Runs `script --worker ...args` in a fresh process and returns the JSON of its `RESULT `
    line; None if it failed because a module is missing (`missing` in its stderr). `env`: more
    environment variables for the process (e.g. `TF_ENABLE_ONEDNN_OPTS`); `python`: the
    interpreter (default this one), e.g. another environment's with torch.

    Raises:
      RuntimeError: The worker failed otherwise (with the end of its stderr).
    """
    result = subprocess.run(
        [python or sys.executable, script, "--worker", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **(env or {})),
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


def keras_hub_masked_lm(shape, batch):
    """keras-hub's `BertMaskedLM` of that shape (dropout 0.1, no preprocessor), compiled with
    keras-hub's defaults, under the global dtype policy; and its inputs from `synthetic_batch`.

    Returns:
      (model, x, labels, sample weights).
    """
    import keras_hub

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB,
        num_layers=shape["layers"],
        num_heads=shape["heads"],
        hidden_dim=shape["hidden"],
        intermediate_dim=shape["intermediate"],
        max_sequence_length=512,
        num_segments=2,
        dropout=0.1,
    )
    model = keras_hub.models.BertMaskedLM(backbone=backbone, preprocessor=None)
    model.compile()
    x = {
        "token_ids": batch["input_ids"],
        "padding_mask": batch["input_mask"],
        "segment_ids": batch["segment_ids"],
        "mask_positions": batch["masked_lm_positions"],
    }
    return model, x, batch["masked_lm_ids"], batch["masked_lm_weights"]


def fit_step_timer(steps):
    """A Keras callback that times a `fit` of `steps` steps from the first step's start to the
    last step's end; the seconds are in its `seconds`.

    What `fit` does around its steps is left out, as the bert_tf figures leave out making their
    iterators: once per `fit` call, which is once per epoch in a real run. On the 2-core machine
    it was sometimes seconds: after the last step, a TensorFlow `fit` returned only at the next
    power-of-two multiple of 10 ms since it started (20.48 s, 40.96 s). The last step's loss is
    read, which waits for it where steps run asynchronously (JAX on a GPU).
    """
    import keras

    class StepTimer(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if batch == 0:
                self.start = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            if batch == steps - 1:
                float(logs["loss"])
                self.seconds = time.perf_counter() - self.start

    return StepTimer()


def memory_bytes(field):
    """`VmHWM` (the peak resident memory) or `VmRSS` (the resident memory now) of this process:
    the kernel's figures for this program alone (`ru_maxrss` keeps the peak of the process that
    started it, from before the exec)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")
