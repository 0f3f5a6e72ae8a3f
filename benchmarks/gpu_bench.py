"""BERT pretraining step and forward pass on one GPU, on Keras' JAX backend, beside its peers.

    KERAS_BACKEND=jax python benchmarks/gpu_bench.py [--steps=30] [--warmup=5]
    KERAS_BACKEND=jax python benchmarks/gpu_bench.py --no_peers --breakdown --profile_dir=/tmp/p
    KERAS_BACKEND=jax JAX_PLATFORMS=cpu python benchmarks/gpu_bench.py --tiny   # a smoke run

For a machine with JAX, PyTorch and transformers but no TensorFlow: bert_tf's model, losses and
optimizer are written in `keras.ops`, so a copy of the working tree plus the keras wheel (and
keras-hub's, for that peer) is all it needs.

Measured at BERT-base (L=12, H=768, A=12, vocab 30,522), batch 256, seq 128, 20 masked
positions, bfloat16 (weights float32), `--steps` timed steps after `--warmup`:

- bert_tf train: `BertPretrainer` (both heads) under `mixed_bfloat16`, the trainer's loss
  (`PretrainingTask.loss_terms`: the original's masked-LM and next-sentence losses), clipping to
  global norm 1.0 and the original's `AdamWeightDecay`, in one `jax.jit` step
  (`stateless_call` / `stateless_apply`); dropout 0.1 as BERT trains.
- bert_tf forward: `BertModel` under `jax.jit`, with XLA's defaults and with its Triton GEMM
  fusions off for that function (`CUBLAS_EPILOGUES`).
- peers, when importable: keras-hub `BertMaskedLM` on JAX (MLM head only, its default
  `compile()`, trained by Keras' own `fit`: keras-hub's `fit` feeds arrays through grain or
  tf.data, which such a machine lacks); Hugging Face `BertForPreTraining` eager (SDPA) and under
  `torch.compile` (torch AdamW, bf16 autocast), and `BertModel` for the forward pass.
- `--breakdown`: the step's forward, backward and optimizer timed apart, the step with attention
  dropout 0 (the fused attention path), and single layers forward and backward alone.
- `--profile_dir`: a JAX profiler trace of bert_tf's step and forward, its device ops summed by
  kind (cuBLAS and Triton matmuls, transposes, reductions, other fusions) and the longest ops.

Prints seq/s, model TFLOP/s (2 per multiply-add of every matmul, attention and the 20-position
vocabulary projection included; training counts 3x the forward), the fraction of `--peak_tflops`
(790, an H100's bf16 matmul rate) and each ratio to HF + torch.compile.
"""

import argparse
import functools
import os
import sys
import time

from common import (
    PREDICTIONS,
    REPO,
    SEQ,
    VOCAB,
    bert_config,
    encoder_matmul_flops,
    fit_step_timer,
    hf_bert_config,
    keras_hub_masked_lm,
    synthetic_batch,
)

sys.path.insert(0, REPO)  # bert_tf from the working tree: the GPU machine has it installed nowhere
BASE = dict(layers=12, hidden=768, heads=12, intermediate=3072, batch=256)
TINY = dict(layers=2, hidden=64, heads=2, intermediate=128, batch=4)


def model_flops(shape, training):
    """Model FLOPs per sequence: encoder matmuls (attention included), pooler, NSP, MLM head."""
    h = shape["hidden"]
    forward = encoder_matmul_flops(dict(shape, batch=1), last_layer_rows=SEQ) + 2 * h * h
    if training:
        forward += PREDICTIONS * 2 * (h * h + h * VOCAB) + 2 * 2 * h
    return forward * (3 if training else 1)


def timed(step, state, steps, warmup, block, profile=None):
    """Runs `state = step(state)` warmup + steps times; returns seconds per timed step.

    With `profile` (a folder), then traces `steps` more steps there with the JAX profiler and
    prints where the device's time went (`print_kernel_profile`).
    """
    for _ in range(warmup):
        state = step(state)
    block(state)
    start = time.perf_counter()
    for _ in range(steps):
        state = step(state)
    block(state)
    seconds = (time.perf_counter() - start) / steps
    if profile:
        import jax

        with jax.profiler.trace(profile):
            for _ in range(steps):
                state = step(state)
            block(state)
        print_kernel_profile(profile, steps)
    return seconds


# What a device op is, from its name (an XLA fusion's, or inside a CUDA graph the kernel's) and
# the profiler's stats (the HLO op and the JAX op path, where the op is not in a CUDA graph).
# First match wins.
OP_KINDS = (
    ("dropout's random bits (threefry)", ("threefry", "random_bits", "bernoulli")),
    ("attention: cuDNN", ("cudnn", "fmha", "flash")),
    ("matmul: XLA's Triton GEMM fusions", ("gemm_fusion", "triton_gemm")),
    ("matmul: cuBLAS", ("gemm", "nvjet", "cublas", "cutlass", "xmma")),
    ("layout transposes", ("transpose",)),
    ("reduction fusions (LayerNorm, softmax, norms)", ("reduce",)),
    ("other fusions (elementwise: GELU, dropout masks, casts)", ("fusion", "convert", "compare", "select")),
)


def op_kind(name, stats):
    """The kind (of `OP_KINDS`, else "other") of a device op, from its name and profiler stats."""
    text = " ".join([name, *stats.values()]).lower()
    return next((kind for kind, words in OP_KINDS if any(w in text for w in words)), "other")


def ns_by_kind(totals, steps):
    """[(kind, nanoseconds per step)], longest first, of `{op name: {"ns", "stats"}}` over `steps`."""
    kinds = {}
    for name, entry in totals.items():
        kind = op_kind(name, entry["stats"])
        kinds[kind] = kinds.get(kind, 0.0) + entry["ns"] / steps
    return sorted(kinds.items(), key=lambda kv: -kv[1])


def print_kernel_profile(folder, steps, top=25):
    """Sums the device ops of the newest trace in `folder` by kind and by op; prints ms per step.

    Also writes `ops.json` there: every op with its total time, count and the profiler's stats.
    Under XLA's CUDA graphs (its default) an op is named by its kernel only; run with
    `XLA_FLAGS=--xla_gpu_enable_command_buffer=` to see the HLO op and the JAX op path.
    """
    import glob
    import json

    from jax.profiler import ProfileData

    path = max(glob.glob(os.path.join(folder, "**", "*.xplane.pb"), recursive=True), key=os.path.getmtime)
    totals = {}
    for plane in ProfileData.from_file(path).planes:
        if not plane.name.startswith(("/device:GPU", "/device:TPU")):
            continue
        lines = [line for line in plane.lines if line.name == "XLA Ops"]
        lines = lines or [line for line in plane.lines if line.name.startswith("Stream")]
        for line in lines:
            for event in line.events:
                entry = totals.setdefault(event.name, {"ns": 0.0, "count": 0})
                entry["stats"] = {key: str(value)[:400] for key, value in event.stats}
                entry["ns"] += event.duration_ns
                entry["count"] += 1
    if not totals:
        print(f"  no device ops in the trace (a CPU run); it is in {folder}")
        return
    with open(os.path.join(folder, "ops.json"), "w") as f:
        json.dump(dict(sorted(totals.items(), key=lambda kv: -kv[1]["ns"])), f, indent=1)
    step_ns = sum(e["ns"] for e in totals.values()) / steps
    print(f"  device ops: {step_ns / 1e6:.2f} ms per step, by kind:")
    for kind, ns in ns_by_kind(totals, steps):
        print(f"    {kind:<56} {ns / 1e6:8.2f} ms  {ns / step_ns:6.1%}")
    print(f"  the {top} longest ops (ms per step, times per step):")
    for name, entry in sorted(totals.items(), key=lambda kv: -kv[1]["ns"])[:top]:
        print(f"    {name[:60]:<60} {entry['ns'] / steps / 1e6:8.3f} ms  x{entry['count'] // steps}")


def bert_tf_train(
    shape, steps, warmup, part="step", attention_dropout=0.1, profile=None, compiler_options=None
):
    """Sequences per second of the pretraining step, or of one part of it.

    Args:
      part: "step" (forward, backward, clipping and the optimizer), "gradients" (forward and
        backward only) or "forward" (the training forward and the losses).
      attention_dropout: The config's attention-probability dropout; 0 lets the self-attention
        use the backend's fused attention while training.
      profile: None, or a folder for a device trace of the step (see `timed`).
      compiler_options: None, or XLA options for the step's `jax.jit` (`CUBLAS_EPILOGUES`).
    """
    import jax
    from keras import ops

    from bert_tf.tasks.pretraining.task import PretrainingTask
    from bert_tf.training.optimization import AdamWeightDecay, WarmupPolynomialDecay, clip_by_global_norm

    config = bert_config(shape)
    config.attention_probs_dropout_prob = attention_dropout
    task = PretrainingTask(config, dtype="mixed_bfloat16")
    model = task.model
    optimizer = AdamWeightDecay(learning_rate=WarmupPolynomialDecay(1e-4, 10000, 100))
    optimizer.build(model.trainable_variables)
    batch = {k: jax.numpy.asarray(v) for k, v in synthetic_batch(shape["batch"]).items()}

    def loss_fn(trainable, non_trainable, batch):
        outputs, non_trainable = model.stateless_call(trainable, non_trainable, batch, training=True)
        numerators, metrics = task.loss_terms(outputs, batch)
        denominators = task.loss_denominators(batch)
        loss = sum(
            n / (d + eps) for n, d, eps in zip(numerators, denominators, task.loss_epsilons, strict=True)
        )
        return loss, (non_trainable, metrics)

    # The batch is an argument, not a constant XLA could fold into the step; the metric terms
    # (the accuracies' row maxima over the vocabulary) are returned, as the trainer sums them.
    @functools.partial(jax.jit, compiler_options=compiler_options)
    def train_step(variables, batch):
        trainable, non_trainable, optimizer_variables = variables
        if part == "forward":
            loss, (non_trainable, metrics) = loss_fn(trainable, non_trainable, batch)
            return trainable, non_trainable, optimizer_variables, (ops.cast(loss, "float32"), metrics)
        (loss, (non_trainable, metrics)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            trainable, non_trainable, batch
        )
        outputs = (ops.cast(loss, "float32"), metrics)
        if part == "gradients":
            return grads, non_trainable, optimizer_variables, outputs
        grads, norm = clip_by_global_norm(grads, 1.0)
        # As the trainer: a step whose loss or gradient norm is not finite changes nothing.
        trainable, optimizer_variables = ops.cond(
            ops.logical_and(ops.isfinite(loss), ops.isfinite(norm)),
            lambda: optimizer.stateless_apply(optimizer_variables, grads, trainable),
            lambda: (trainable, optimizer_variables),
        )
        return trainable, non_trainable, optimizer_variables, outputs

    def step(state):
        if part == "gradients":  # the next step starts from the same weights, not the gradients
            return (state[0], *train_step(state[:3], batch)[1:])
        return train_step(state[:3], batch)

    state = (
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables],
        [v.value for v in optimizer.variables],
        None,
    )
    seconds = timed(step, state, steps, warmup, lambda s: jax.block_until_ready(s[3]), profile)
    return shape["batch"] / seconds


def layer_seconds(layer, float_inputs, steps, warmup, **call_kwargs):
    """Seconds per forward and backward of one layer (gradients for its weights and for
    `float_inputs`), alone in a `jax.jit`; the backward starts from a gradient of ones."""
    import jax
    from keras import ops

    def loss(trainable, non_trainable, inputs):
        outputs, non_trainable = layer.stateless_call(trainable, non_trainable, *inputs, **call_kwargs)
        return ops.sum(ops.cast(outputs, "float32")), non_trainable

    @jax.jit
    def forward_backward(trainable, non_trainable, inputs):
        (_, non_trainable), gradients = jax.value_and_grad(loss, argnums=(0, 2), has_aux=True)(
            trainable, non_trainable, inputs
        )
        return non_trainable, gradients  # returned, or XLA drops the backward

    trainable = [v.value for v in layer.trainable_variables]
    state = ([v.value for v in layer.non_trainable_variables], None)
    return timed(
        lambda state: forward_backward(trainable, state[0], float_inputs),
        state,
        steps,
        warmup,
        lambda state: jax.block_until_ready(state[1]),
    )


def breakdown(shape, steps, warmup):
    """Where the training step's time goes: parts of the step timed alone.

    The whole step, its gradients only and its forward only (the differences are the backward and
    the clipping with the optimizer), the step with attention dropout 0 (the fused attention),
    and single layers forward and backward alone, times their count in the model.

    Returns:
      [(what, milliseconds per step)], the whole step first.
    """
    import jax
    import keras
    import numpy as np
    from keras import ops

    from bert_tf.modeling.attention import SelfAttention
    from bert_tf.modeling.heads import MaskedLMHead
    from bert_tf.modeling.layer_norm import LayerNorm
    from bert_tf.modeling.losses import sparse_softmax_cross_entropy
    from bert_tf.modeling.transformer_layer import TransformerLayer

    def milliseconds(rate):
        return 1000 * shape["batch"] / rate

    config = bert_config(shape)
    step = milliseconds(bert_tf_train(shape, steps, warmup))
    gradients = milliseconds(bert_tf_train(shape, steps, warmup, part="gradients"))
    forward = milliseconds(bert_tf_train(shape, steps, warmup, part="forward"))
    fused = milliseconds(bert_tf_train(shape, steps, warmup, attention_dropout=0.0))
    rows = [
        ("whole step", step),
        ("  forward and losses", forward),
        ("  backward", gradients - forward),
        ("  clipping and AdamWeightDecay", step - gradients),
        ("whole step, attention dropout 0 (fused attention)", fused),
    ]

    batch, layers, hidden = shape["batch"], shape["layers"], shape["hidden"]
    data = synthetic_batch(batch)
    rng = np.random.default_rng(0)
    tokens = jax.numpy.asarray(rng.normal(size=(batch * SEQ, hidden)), "bfloat16")
    mask = jax.numpy.asarray(data["input_mask"])
    policy = "mixed_bfloat16"

    transformer_layer = TransformerLayer(config, name="layer_0", dtype=policy)
    transformer_layer.build()
    per_layer = layer_seconds(transformer_layer, [tokens], steps, warmup, input_mask=mask, training=True)
    rows.append((f"transformer layer x {layers}", 1000 * layers * per_layer))
    attention = SelfAttention(config, dtype=policy)
    attention.build()
    per_layer = layer_seconds(attention, [tokens], steps, warmup, input_mask=mask, training=True)
    rows.append(
        (f"  self-attention (Q, K, V, softmax(QK^T) V, dropout) x {layers}", 1000 * layers * per_layer)
    )
    layer_norm = LayerNorm(hidden, dtype=policy)
    layer_norm.build()
    count = 2 * layers + 1
    rows.append(
        (
            f"  LayerNorm x {count} (two a layer, embeddings)",
            1000 * count * layer_seconds(layer_norm, [tokens], steps, warmup),
        )
    )

    class MaskedLM(keras.layers.Layer):
        """The masked-LM head and its loss: gather, transform, tied vocabulary projection."""

        def __init__(self):
            super().__init__(dtype=policy)
            self.head = MaskedLMHead(config, dtype=policy)
            self.head.build()
            self.built = True

        def call(self, sequence_output, word_embeddings):
            logits = self.head(sequence_output, positions, word_embeddings)
            return sparse_softmax_cross_entropy(logits, ops.reshape(labels, (-1,)))

    positions = jax.numpy.asarray(data["masked_lm_positions"])
    labels = jax.numpy.asarray(data["masked_lm_ids"])
    sequence_output = ops.reshape(tokens, (batch, SEQ, hidden))
    table = jax.numpy.asarray(rng.normal(size=(VOCAB, hidden)) * 0.02, "float32")
    rows.append(
        (
            f"masked-LM head and loss ({PREDICTIONS} positions, [{VOCAB}, {hidden}] projection)",
            1000 * layer_seconds(MaskedLM(), [sequence_output, table], steps, warmup),
        )
    )
    return rows


# XLA's Triton GEMM fusions off: each matmul is cuBLAS's, with its bias and GELU in the
# matmul's epilogue (RESULTS.md). `jax.jit` takes it per function, not for the whole process.
CUBLAS_EPILOGUES = {"xla_gpu_enable_triton_gemm": False}


def bert_tf_forward(shape, steps, warmup, profile=None, compiler_options=None):
    """Sequences per second of `BertModel`'s inference pass under `jax.jit`, compiled with
    `compiler_options` (None: XLA's defaults)."""
    import jax

    from bert_tf.modeling import BertModel

    model = BertModel(bert_config(shape), dtype="mixed_bfloat16")
    batch = synthetic_batch(shape["batch"])
    inputs = {k: jax.numpy.asarray(batch[k]) for k in ("input_ids", "input_mask", "segment_ids")}
    variables = (
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables],
    )

    @functools.partial(jax.jit, compiler_options=compiler_options)
    def forward(variables, inputs):  # the inputs an argument, not constants XLA could fold
        outputs, _ = model.stateless_call(*variables, inputs)
        return outputs["sequence_output"]

    def step(state):
        return state[0], forward(state[0], inputs)

    seconds = timed(step, (variables, None), steps, warmup, lambda s: jax.block_until_ready(s[1]), profile)
    return shape["batch"] / seconds


def keras_hub_train(shape, steps, warmup):
    import keras

    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    model, x, labels, weights = keras_hub_masked_lm(shape, synthetic_batch(shape["batch"]))
    keras.mixed_precision.set_global_policy("float32")

    def fit(repeats, callbacks=()):
        # Keras' own fit: keras-hub's feeds arrays through grain or tf.data, which the GPU
        # machine lacks; with preprocessor=None it does nothing else.
        keras.Model.fit(
            model,
            {k: v.repeat(repeats, 0) for k, v in x.items()},
            labels.repeat(repeats, 0),
            sample_weight=weights.repeat(repeats, 0),
            batch_size=shape["batch"],
            shuffle=False,
            verbose=0,
            callbacks=list(callbacks),
        )

    fit(warmup)
    timer = fit_step_timer(steps)
    fit(steps, [timer])
    return shape["batch"] * steps / timer.seconds


def hf_train(shape, steps, warmup, compiled):
    import torch
    import transformers

    device = "cuda" if torch.cuda.is_available() else "cpu"
    config = hf_bert_config(shape["layers"], shape["hidden"], shape["heads"], shape["intermediate"])
    model = transformers.BertForPreTraining(config).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch = {k: torch.tensor(v).to(device) for k, v in synthetic_batch(shape["batch"]).items()}
    labels = torch.full_like(batch["input_ids"], -100).long()
    labels.scatter_(1, batch["masked_lm_positions"].long(), batch["masked_lm_ids"].long())
    forward = torch.compile(model) if compiled else model

    def step(_):
        with torch.autocast(device, dtype=torch.bfloat16):
            out = forward(
                input_ids=batch["input_ids"].long(),
                attention_mask=batch["input_mask"].long(),
                token_type_ids=batch["segment_ids"].long(),
                labels=labels,
                next_sentence_label=batch["next_sentence_labels"][:, 0].long(),
            )
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return out.loss

    block = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    seconds = timed(step, None, steps, warmup, lambda _: block())
    return shape["batch"] / seconds


def hf_forward(shape, steps, warmup, compiled):
    import torch
    import transformers

    device = "cuda" if torch.cuda.is_available() else "cpu"
    config = hf_bert_config(shape["layers"], shape["hidden"], shape["heads"], shape["intermediate"])
    model = transformers.BertModel(config).to(device).eval()
    forward = torch.compile(model) if compiled else model
    batch = {k: torch.tensor(v).long().to(device) for k, v in synthetic_batch(shape["batch"]).items()}

    def step(_):
        with torch.inference_mode(), torch.autocast(device, dtype=torch.bfloat16):
            return forward(
                input_ids=batch["input_ids"],
                attention_mask=batch["input_mask"],
                token_type_ids=batch["segment_ids"],
            ).last_hidden_state

    block = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    seconds = timed(step, None, steps, warmup, lambda _: block())
    return shape["batch"] / seconds


def versions():
    """The versions of the packages the run may use, those installed (read off their metadata:
    importing keras_hub, torch and transformers to ask them would load TensorFlow and PyTorch
    into a run that may use neither)."""
    from importlib import metadata

    found = []
    for name in ("jax", "keras", "keras_hub", "torch", "transformers"):
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return ", ".join(found)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--tiny", action="store_true", help="a 2-layer model at batch 4 (CPU smoke run)")
    parser.add_argument("--peak_tflops", type=float, default=790.0, help="the GPU's bf16 matmul rate")
    parser.add_argument("--no_peers", action="store_true", help="bert_tf only")
    parser.add_argument(
        "--breakdown", action="store_true", help="also time the parts of bert_tf's training step"
    )
    parser.add_argument(
        "--profile_dir",
        help="trace bert_tf's step and forward there (XLA's CUDA graphs off) and print the ops by kind",
    )
    args = parser.parse_args()
    if args.profile_dir:
        # Outside XLA's CUDA graphs the trace names each op's HLO op and JAX op path (the timed
        # figures of such a run are taken without the graphs too).
        os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_gpu_enable_command_buffer="

    def profile(name):
        return args.profile_dir and os.path.join(args.profile_dir, name)

    import keras

    if keras.backend.backend() != "jax":
        raise SystemExit("run with KERAS_BACKEND=jax")
    import jax

    shape = TINY if args.tiny else BASE
    print(f"device: {jax.devices()[0]}; {shape}, seq {SEQ}, {PREDICTIONS} masked positions, bf16")
    print(f"versions: {versions()}; XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}")
    runs = {
        "train": [
            ("bert_tf", lambda: bert_tf_train(shape, args.steps, args.warmup, profile=profile("train"))),
            (
                "keras-hub BertMaskedLM fit (MLM only)",
                lambda: keras_hub_train(shape, args.steps, args.warmup),
            ),
            ("HF eager (SDPA)", lambda: hf_train(shape, args.steps, args.warmup, compiled=False)),
            ("HF + torch.compile", lambda: hf_train(shape, args.steps, args.warmup, compiled=True)),
        ],
        "forward": [
            ("bert_tf", lambda: bert_tf_forward(shape, args.steps, args.warmup, profile=profile("forward"))),
            (
                "bert_tf, Triton GEMM off",
                lambda: bert_tf_forward(shape, args.steps, args.warmup, compiler_options=CUBLAS_EPILOGUES),
            ),
            ("HF eager (SDPA)", lambda: hf_forward(shape, args.steps, args.warmup, compiled=False)),
            ("HF + torch.compile", lambda: hf_forward(shape, args.steps, args.warmup, compiled=True)),
        ],
    }
    for kind, systems in runs.items():
        if args.no_peers:
            systems = [(name, run) for name, run in systems if name.startswith("bert_tf")]
        flops = model_flops(shape, training=kind == "train")
        print(f"\n{kind} ({flops / 1e9:.2f} GFLOP per sequence):")
        rates = {}
        for name, run in systems:
            try:
                rates[name] = run()
            except ImportError as e:
                print(f"  {name:<40} skipped ({e.name} is not installed)")
                continue
            tflops = rates[name] * flops / 1e12
            print(
                f"  {name:<40} {rates[name]:10,.1f} seq/s  {tflops:8.2f} TFLOP/s  "
                f"{tflops / args.peak_tflops:6.1%} of {args.peak_tflops:.0f}"
            )
        for name in rates:
            if name.startswith("bert_tf") and "HF + torch.compile" in rates:
                print(f"  {name} / HF + torch.compile: {rates[name] / rates['HF + torch.compile']:.2f}x")

    if args.breakdown:
        rows = breakdown(shape, args.steps, args.warmup)
        step = rows[0][1]
        print("\nbert_tf training step, by part (each timed alone, ms per step):")
        for what, ms in rows:
            print(f"  {what:<72} {ms:9.2f} ms  {ms / step:6.1%}")


if __name__ == "__main__":
    main()
