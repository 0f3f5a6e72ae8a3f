"""BERT pretraining step and forward pass on one GPU, on Keras' JAX backend, beside its peers.

    KERAS_BACKEND=jax python benchmarks/gpu_bench.py [--steps=30] [--warmup=5]
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
- bert_tf forward: `BertModel` under `jax.jit`.
- peers, when importable: keras-hub `BertMaskedLM` on JAX (`fit`, MLM head only); Hugging Face
  `BertForPreTraining` eager (SDPA) and under `torch.compile` (torch AdamW, bf16 autocast), and
  `BertModel` for the forward pass.

Prints seq/s, model TFLOP/s (2 per multiply-add of every matmul, attention and the 20-position
vocabulary projection included; training counts 3x the forward), the fraction of `--peak_tflops`
(790, an H100's bf16 matmul rate) and each ratio to HF + torch.compile.
"""

import argparse
import os
import sys
import time

from common import PREDICTIONS, SEQ, VOCAB, hf_bert_config, synthetic_batch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASE = dict(layers=12, hidden=768, heads=12, intermediate=3072, batch=256)
TINY = dict(layers=2, hidden=64, heads=2, intermediate=128, batch=4)


def model_flops(shape, training):
    """Model FLOPs per sequence: encoder matmuls (attention included), pooler, NSP, MLM head."""
    h, i, layers = shape["hidden"], shape["intermediate"], shape["layers"]
    per_token_layer = 2 * (4 * h * h + 2 * h * i) + 2 * 2 * SEQ * h
    forward = layers * SEQ * per_token_layer + 2 * h * h
    if training:
        forward += PREDICTIONS * 2 * (h * h + h * VOCAB) + 2 * 2 * h
    return forward * (3 if training else 1)


def bert_config(shape):
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


def timed(step, state, steps, warmup, block):
    """Runs `state = step(state)` warmup + steps times; returns seconds per timed step."""
    for _ in range(warmup):
        state = step(state)
    block(state)
    start = time.perf_counter()
    for _ in range(steps):
        state = step(state)
    block(state)
    return (time.perf_counter() - start) / steps


def bert_tf_train(shape, steps, warmup):
    import jax
    from keras import ops

    from bert_tf.training.optimization import AdamWeightDecay, WarmupPolynomialDecay, clip_by_global_norm
    from bert_tf.training.pretraining import PretrainingTask

    task = PretrainingTask(bert_config(shape), dtype="mixed_bfloat16")
    model = task.model
    optimizer = AdamWeightDecay(learning_rate=WarmupPolynomialDecay(1e-4, 10000, 100))
    optimizer.build(model.trainable_variables)
    batch = {k: jax.numpy.asarray(v) for k, v in synthetic_batch(shape["batch"]).items()}

    def loss_fn(trainable, non_trainable, batch):
        outputs, non_trainable = model.stateless_call(trainable, non_trainable, batch, training=True)
        numerators, _ = task.loss_terms(outputs, batch)
        denominators = task.loss_denominators(batch)
        loss = sum(
            n / (d + eps) for n, d, eps in zip(numerators, denominators, task.loss_epsilons, strict=True)
        )
        return loss, non_trainable

    @jax.jit
    def train_step(state):
        trainable, non_trainable, optimizer_variables, _ = state
        (loss, non_trainable), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            trainable, non_trainable, batch
        )
        grads, _ = clip_by_global_norm(grads, 1.0)
        trainable, optimizer_variables = optimizer.stateless_apply(optimizer_variables, grads, trainable)
        return trainable, non_trainable, optimizer_variables, ops.cast(loss, "float32")

    state = (
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables],
        [v.value for v in optimizer.variables],
        0.0,
    )
    seconds = timed(train_step, state, steps, warmup, lambda s: jax.block_until_ready(s[3]))
    return shape["batch"] / seconds


def bert_tf_forward(shape, steps, warmup):
    import jax

    from bert_tf.modeling import BertModel

    model = BertModel(bert_config(shape), dtype="mixed_bfloat16")
    batch = synthetic_batch(shape["batch"])
    inputs = {k: jax.numpy.asarray(batch[k]) for k in ("input_ids", "input_mask", "segment_ids")}
    variables = (
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables],
    )

    @jax.jit
    def forward(variables):
        outputs, _ = model.stateless_call(*variables, inputs)
        return outputs["sequence_output"]

    def step(state):
        return state[0], forward(state[0])

    seconds = timed(step, (variables, None), steps, warmup, lambda s: jax.block_until_ready(s[1]))
    return shape["batch"] / seconds


def keras_hub_train(shape, steps, warmup):
    import keras
    import keras_hub

    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB,
        num_layers=shape["layers"],
        num_heads=shape["heads"],
        hidden_dim=shape["hidden"],
        intermediate_dim=shape["intermediate"],
        max_sequence_length=512,
        num_segments=2,
    )
    model = keras_hub.models.BertMaskedLM(backbone=backbone, preprocessor=None)
    model.compile()
    batch = synthetic_batch(shape["batch"])
    x = {
        "token_ids": batch["input_ids"],
        "padding_mask": batch["input_mask"],
        "segment_ids": batch["segment_ids"],
        "mask_positions": batch["masked_lm_positions"],
    }
    y, weights = batch["masked_lm_ids"], batch["masked_lm_weights"]
    model.fit(x, y, sample_weight=weights, batch_size=shape["batch"], epochs=warmup, verbose=0)
    start = time.perf_counter()
    model.fit(x, y, sample_weight=weights, batch_size=shape["batch"], epochs=steps, verbose=0)
    keras.mixed_precision.set_global_policy("float32")
    return shape["batch"] * steps / (time.perf_counter() - start)


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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--tiny", action="store_true", help="a 2-layer model at batch 4 (CPU smoke run)")
    parser.add_argument("--peak_tflops", type=float, default=790.0, help="the GPU's bf16 matmul rate")
    parser.add_argument("--no_peers", action="store_true", help="bert_tf only")
    args = parser.parse_args()
    import keras

    if keras.backend.backend() != "jax":
        raise SystemExit("run with KERAS_BACKEND=jax")
    import jax

    shape = TINY if args.tiny else BASE
    print(f"device: {jax.devices()[0]}; {shape}, seq {SEQ}, {PREDICTIONS} masked positions, bf16")
    runs = {
        "train": [
            ("bert_tf", lambda: bert_tf_train(shape, args.steps, args.warmup)),
            (
                "keras-hub BertMaskedLM fit (MLM only)",
                lambda: keras_hub_train(shape, args.steps, args.warmup),
            ),
            ("HF eager (SDPA)", lambda: hf_train(shape, args.steps, args.warmup, compiled=False)),
            ("HF + torch.compile", lambda: hf_train(shape, args.steps, args.warmup, compiled=True)),
        ],
        "forward": [
            ("bert_tf", lambda: bert_tf_forward(shape, args.steps, args.warmup)),
            ("HF eager (SDPA)", lambda: hf_forward(shape, args.steps, args.warmup, compiled=False)),
            ("HF + torch.compile", lambda: hf_forward(shape, args.steps, args.warmup, compiled=True)),
        ],
    }
    for kind, systems in runs.items():
        if args.no_peers:
            systems = systems[:1]
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
        if "HF + torch.compile" in rates:
            print(f"  bert_tf / HF + torch.compile: {rates['bert_tf'] / rates['HF + torch.compile']:.2f}x")


if __name__ == "__main__":
    main()
