"""Training throughput of run_pretraining.py's step against keras-hub's BertMaskedLM, same CPU, same run.

    python benchmarks/trainer_bench.py [--rounds=3] [--configs=tiny,base]

Shapes: BERT-tiny (L=2, H=128, A=2) at batch 32 and BERT-base (L=12, H=768, A=12) at batch 8,
sequence length 128, 20 masked positions, vocabulary 30,522, dropout 0.1, one synthetic batch
repeated (the input pipeline is left out of both).

- `bert_tf`: `bert_tf.training.step.TrainStep`, the step tools/run_pretraining.py runs (masked LM
  and next-sentence heads, the original's AdamWeightDecay, clipping), one `train(iterator, n)`
  call for the timed steps, as with --iterations_per_loop; `bert_tf + XLA` the same with
  --jit_compile.
- `keras-hub`: `keras_hub.models.BertMaskedLM` (masked LM head only: no next-sentence head, which
  counts against bert_tf) with `compile()`'s defaults, trained with `fit` on the same arrays,
  timed from its first step's start to its last step's end (what `fit` does around them is
  printed, not counted). Run only when keras-hub is installed (`make bench` installs the `bench`
  extra); it is not a dependency of bert_tf.
- `floor`: not a system but a bound, in examples/s: one step's matmul FLOPs at this machine's
  float32 peak (tf.matmul at 4096^3), plus the optimizer's update and dropout's random draws, each
  timed alone; everything else the step does counts as free. A step doing this work on
  TensorFlow's float32 kernels here is not expected to pass it (its matmuls would have to beat
  tf.matmul's best rate), so `floor / keras-hub` is about the most bert_tf's ratio to keras-hub
  can read on this machine.

Every figure is measured in its own process; the systems alternate within each round and the
median over rounds is reported, with each system's examples/s and the ratios to keras-hub.
"""

import argparse
import json
import os
import statistics
import sys
import time

from common import (
    PREDICTIONS,
    SEQ,
    VOCAB,
    bert_config,
    encoder_matmul_flops,
    fit_step_timer,
    keras_hub_masked_lm,
    run_in_fresh_process,
    synthetic_batch,
)

CONFIGS = {
    "tiny": dict(layers=2, hidden=128, heads=2, intermediate=512, batch=32, steps=40),
    "base": dict(layers=12, hidden=768, heads=12, intermediate=3072, batch=8, steps=8),
}
SYSTEMS = ("bert_tf", "bert_tf_xla", "keras_hub", "floor")
LABELS = {
    "bert_tf": "bert_tf",
    "bert_tf_xla": "bert_tf + XLA",
    "keras_hub": "keras-hub fit",
    "floor": "floor",
}
# The matmul whose rate stands for the machine's float32 peak in the floor.
PEAK_MATMUL = 4096


def step_matmul_flops(shape):
    """Matmul FLOPs of one training step (backward = twice the forward) of the pretraining task's
    model, whose last layer runs only at [CLS] and the masked positions, with both heads."""
    batch, hidden, masked = shape["batch"], shape["hidden"], shape["batch"] * PREDICTIONS
    heads = 2 * masked * hidden * (hidden + VOCAB) + 2 * batch * hidden * (hidden + 2)
    return 3 * (encoder_matmul_flops(shape, 1 + PREDICTIONS) + heads)


def step_dropout_shapes(shape):
    """The shapes of the random tensors one step's dropouts draw (the original's sites: the
    embeddings, and per layer the attention probabilities, the attention output and the layer
    output; the last layer at [CLS] and the masked positions only; none in the heads)."""
    batch, hidden, heads = shape["batch"], shape["hidden"], shape["heads"]

    def layer(rows):
        return [(batch, heads, rows, SEQ), (batch, rows, hidden), (batch, rows, hidden)]

    last_rows = 1 + PREDICTIONS
    return [(batch, SEQ, hidden)] + layer(SEQ) * (shape["layers"] - 1) + layer(last_rows)


def bert_tf_step(shape, jit_compile, warm_up=True):
    """The tool's training step at `shape`, traced (and compiled) on two steps.

    Args:
      shape: The model's shape and batch (`CONFIGS`).
      jit_compile: Whether the step is compiled by XLA.
      warm_up: Whether the two steps run; without them the step is built (its optimizer's
        slots included) but neither traced nor run.

    Returns:
      (step, iterator): the `TrainStep` and an iterator over the synthetic batch, repeated.
    """
    import tensorflow as tf

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from bert_tf.tasks.pretraining.task import PretrainingTask
    from bert_tf.training.optimization import create_optimizer
    from bert_tf.training.step import TrainStep

    config = bert_config(shape)
    task = PretrainingTask(config)
    optimizer = create_optimizer("adamw", 1e-4, num_train_steps=10000, num_warmup_steps=100)
    step = TrainStep(task, optimizer, tf.distribute.get_strategy(), jit_compile=jit_compile)
    iterator = iter(tf.data.Dataset.from_tensors(synthetic_batch(shape["batch"])).repeat())
    if warm_up:
        run_steps(step, iterator, 2)
    return step, iterator


def run_steps(step, iterator, count):
    """Runs `count` steps in one call (as --iterations_per_loop) and waits for them."""
    import tensorflow as tf

    step.train(iterator, tf.constant(count))
    step.optimizer.iterations.numpy()


def run_bert_tf(shape, jit_compile):
    step, iterator = bert_tf_step(shape, jit_compile)
    start = time.perf_counter()
    run_steps(step, iterator, shape["steps"])
    return shape["steps"] * shape["batch"] / (time.perf_counter() - start), {}


def call_seconds(fn, calls):
    """The wall times of `calls` calls of `fn()` (which waits for its result), after one more."""
    fn()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def run_floor(shape, peak_matmul=PEAK_MATMUL):
    """The fastest the bert_tf step could run here with TensorFlow's float32 kernels: its matmul
    FLOPs at the machine's peak matmul rate, plus two parts of the step timed alone, the
    optimizer's update (the step's compiled rule over every variable, with the clipping factor)
    and dropout's random draws. Everything else the step does (bias gradients, LayerNorm, GELU,
    softmax, the dropouts' masks, the loss) is left out: a real step is not expected to pass it
    unless its matmuls beat tf.matmul's rate at 4096^3.

    Args:
      shape: The model's shape and batch (`CONFIGS`).
      peak_matmul: The size of the square float32 matmul that measures the peak rate.

    Returns:
      (examples/s at the floor, {part: milliseconds, "peak_gflops": the matmul rate}).
    """
    import tensorflow as tf

    from bert_tf.modeling.dropout import DRAW_RANGE, draws_shape

    # The parts are timed alone: the step's variables and built optimizer are all they use.
    step, _ = bert_tf_step(shape, jit_compile=False, warm_up=False)
    a = tf.random.normal([peak_matmul, peak_matmul])
    matmul = tf.function(lambda: tf.reduce_sum(tf.matmul(a, a)))
    peak_flops = 2 * peak_matmul**3 / min(call_seconds(lambda: matmul().numpy(), 5))

    gradients = [tf.random.normal(v.shape, stddev=1e-3) for v in step.variables]
    learning_rate = step.optimizer.learning_rate

    @tf.function
    def update(gradients):
        scale = tf.constant(0.5)  # the clipping factor, as when the gradient norm is 2
        for gradient, variable in zip(gradients, step.variables, strict=True):
            step.optimizer.update_step(gradient, variable, learning_rate, gradient_scale=scale)
        return step.optimizer.iterations.assign_add(1)

    shapes = [draws_shape(s) for s in step_dropout_shapes(shape)]

    @tf.function
    def draws(seed):
        # Each draw its own seed, given as an argument: Grappler folds draws from a constant seed
        # and merges draws of one shape from one seed. The draws of bert_tf's `Dropout`: int32s.
        return tf.add_n(
            [
                tf.reduce_sum(tf.random.stateless_uniform(s, seed + [0, i], 0, DRAW_RANGE, tf.int32)[..., :1])
                for i, s in enumerate(shapes)
            ]
        )

    parts = {
        "matmuls": 1e3 * step_matmul_flops(shape) / peak_flops,
        "update": 1e3 * statistics.median(call_seconds(lambda: update(gradients).numpy(), 5)),
        "dropout draws": 1e3 * statistics.median(call_seconds(lambda: draws(tf.constant([1, 2])).numpy(), 5)),
    }
    return shape["batch"] / (sum(parts.values()) / 1e3), dict(parts, peak_gflops=peak_flops / 1e9)


def run_keras_hub(shape):
    import tensorflow as tf

    model, x, labels, weights = keras_hub_masked_lm(shape, synthetic_batch(shape["batch"]))
    data = tf.data.Dataset.from_tensors((x, labels, weights)).repeat()
    model.fit(data, steps_per_epoch=2, epochs=1, verbose=0)  # trace outside the timing
    timer = fit_step_timer(shape["steps"])
    start = time.perf_counter()
    model.fit(data, steps_per_epoch=shape["steps"], epochs=1, verbose=0, callbacks=[timer])
    outside_steps = time.perf_counter() - start - timer.seconds
    rate = shape["steps"] * shape["batch"] / timer.seconds
    return rate, {"jit_compile": str(model.jit_compile), "outside_steps": outside_steps}


def measure(system, config):
    """Runs one system in a fresh process; returns (examples/s, notes) or None if unavailable."""
    return run_in_fresh_process(__file__, system, "--configs", config, missing="No module named 'keras_hub'")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--configs", default="tiny,base")
    parser.add_argument("--worker", choices=SYSTEMS, help=argparse.SUPPRESS)
    # The floor's matmul size (the tests' smoke run takes a small one).
    parser.add_argument("--peak_matmul", type=int, default=PEAK_MATMUL, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        shape = CONFIGS[args.configs]
        if args.worker == "keras_hub":
            rate, notes = run_keras_hub(shape)
        elif args.worker == "floor":
            rate, notes = run_floor(shape, args.peak_matmul)
        else:
            rate, notes = run_bert_tf(shape, jit_compile=args.worker == "bert_tf_xla")
        print("RESULT " + json.dumps([rate, notes]))
        return

    for config in args.configs.split(","):
        shape = CONFIGS[config]
        rates = {system: [] for system in SYSTEMS}
        notes, outside_steps, floor_parts = {}, [], []
        for _ in range(args.rounds):
            for system in SYSTEMS:
                result = measure(system, config)
                if result is not None:
                    rates[system].append(result[0])
                    notes.update(result[1])
                    if system == "keras_hub":
                        outside_steps.append(result[1]["outside_steps"])
                    if system == "floor":
                        floor_parts.append(result[1])
        print(
            f"\n{config}: L={shape['layers']} H={shape['hidden']} A={shape['heads']}, "
            f"batch {shape['batch']}, seq {SEQ}, {PREDICTIONS} predictions; "
            f"median of {args.rounds} alternated rounds"
        )
        medians = {s: statistics.median(r) for s, r in rates.items() if r}
        for system, median in medians.items():
            spread = ", ".join(f"{r:.3g}" for r in rates[system])
            print(f"  {LABELS[system]:<16} {median:8.3g} examples/s  (rounds: {spread})")
        parts = {k: statistics.median(p[k] for p in floor_parts) for k in floor_parts[0]}
        peak = parts.pop("peak_gflops")
        print(
            f"  floor: {step_matmul_flops(shape) / 1e9:.0f} GFLOP of matmuls at {peak:.0f} GFLOP/s "
            f"(tf.matmul at {PEAK_MATMUL}^3, float32) "
            + ", ".join(f"{part} {ms:.0f} ms" for part, ms in parts.items())
            + f": {sum(parts.values()):.0f} ms a step, nothing else counted"
        )
        print(f"  bert_tf at {medians['bert_tf'] / medians['floor']:.0%} of the floor's examples/s")
        if "keras_hub" in medians:
            print(f"  keras-hub compile() defaults: jit_compile={notes.get('jit_compile')}")
            outside = ", ".join(f"{seconds:.2f}" for seconds in outside_steps)
            print(f"  keras-hub fit() outside its timed steps, not counted: {outside} s")
            for system in ("bert_tf", "bert_tf_xla"):
                # Each round's pair ran back to back, under the same load from the machine's
                # neighbours: the per-round ratios show how much the medians' ratio owes to it.
                pairs = zip(rates[system], rates["keras_hub"], strict=True)
                paired = ", ".join(f"{ours / theirs:.2f}" for ours, theirs in pairs)
                ratio = medians[system] / medians["keras_hub"]
                print(f"  {LABELS[system]} / keras-hub: {ratio:.2f}x  (per round: {paired})")
            ceiling = medians["floor"] / medians["keras_hub"]
            print(f"  floor / keras-hub: {ceiling:.2f}x  (about the most these float32 kernels allow)")
            print("  (bert_tf trains the next-sentence head too; keras-hub's BertMaskedLM has none)")
        else:
            print("  keras-hub is not installed: no peer figure (pip install keras-hub, or make bench)")


if __name__ == "__main__":
    main()
