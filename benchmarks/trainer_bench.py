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
    bert_config,
    fit_step_timer,
    keras_hub_masked_lm,
    run_in_fresh_process,
    synthetic_batch,
)

CONFIGS = {
    "tiny": dict(layers=2, hidden=128, heads=2, intermediate=512, batch=32, steps=40),
    "base": dict(layers=12, hidden=768, heads=12, intermediate=3072, batch=8, steps=8),
}
SYSTEMS = ("bert_tf", "bert_tf_xla", "keras_hub")
LABELS = {"bert_tf": "bert_tf", "bert_tf_xla": "bert_tf + XLA", "keras_hub": "keras-hub fit"}


def bert_tf_step(shape, jit_compile):
    """The tool's training step at `shape`, traced (and compiled) on two steps.

    Returns:
      (step, iterator): the `TrainStep` and an iterator over the synthetic batch, repeated.
    """
    import tensorflow as tf

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from bert_tf.training.optimization import create_optimizer
    from bert_tf.training.pretraining import PretrainingTask
    from bert_tf.training.step import TrainStep

    config = bert_config(shape)
    task = PretrainingTask(config)
    optimizer = create_optimizer("adamw", 1e-4, num_train_steps=10000, num_warmup_steps=100)
    step = TrainStep(task, optimizer, tf.distribute.get_strategy(), jit_compile=jit_compile)
    iterator = iter(tf.data.Dataset.from_tensors(synthetic_batch(shape["batch"])).repeat())
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
    args = parser.parse_args()
    if args.worker:
        shape = CONFIGS[args.configs]
        if args.worker == "keras_hub":
            rate, notes = run_keras_hub(shape)
        else:
            rate, notes = run_bert_tf(shape, jit_compile=args.worker == "bert_tf_xla")
        print("RESULT " + json.dumps([rate, notes]))
        return

    for config in args.configs.split(","):
        shape = CONFIGS[config]
        rates = {system: [] for system in SYSTEMS}
        notes, outside_steps = {}, []
        for _ in range(args.rounds):
            for system in SYSTEMS:
                result = measure(system, config)
                if result is not None:
                    rates[system].append(result[0])
                    notes.update(result[1])
                    if system == "keras_hub":
                        outside_steps.append(result[1]["outside_steps"])
        print(
            f"\n{config}: L={shape['layers']} H={shape['hidden']} A={shape['heads']}, "
            f"batch {shape['batch']}, seq {SEQ}, {PREDICTIONS} predictions; "
            f"median of {args.rounds} alternated rounds"
        )
        medians = {s: statistics.median(r) for s, r in rates.items() if r}
        for system, median in medians.items():
            spread = ", ".join(f"{r:.3g}" for r in rates[system])
            print(f"  {LABELS[system]:<16} {median:8.3g} examples/s  (rounds: {spread})")
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
            print("  (bert_tf trains the next-sentence head too; keras-hub's BertMaskedLM has none)")
        else:
            print("  keras-hub is not installed: no peer figure (pip install keras-hub, or make bench)")


if __name__ == "__main__":
    main()
