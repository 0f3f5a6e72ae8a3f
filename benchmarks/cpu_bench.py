"""BERT on this CPU: the machine's matmul rate, then bert_tf beside its peers, forward and training.

    python benchmarks/cpu_bench.py [--rounds=3] [--sections=machine,forward,train]

1. The machine: its CPU flags (AVX512_BF16, AMX), and tf.matmul's float32 and bfloat16 rates at
   BERT-base's shapes (1024 tokens x 768 -> 768, 3072 and back), combined as the rate of one
   encoder layer's dense matmuls (the roof a forward pass can approach); torch.matmul's at the
   same shapes beside them when torch is installed (the kernels HF transformers runs on), and
   the oneDNN release each library bundles (the same kernel runs faster in a later release).
2. Forward, BERT-base (L=12, H=768, A=12, vocab 30,522), batch 8, seq 128, random weights:
   bert_tf's `BertModel(config)` under a plain `tf.function` (the default a user gets), with
   XLA beside it; keras-hub's `BertBackbone` on TensorFlow; Hugging Face transformers' `BertModel`
   on CPU torch (SDPA attention). float32, and bfloat16 (bert_tf and keras-hub through Keras'
   `mixed_bfloat16` policy, HF through `torch.autocast`) with each one's relative L2 error of
   `sequence_output` against its own float32, on a machine with bfloat16 units. Model FLOPs are
   2 per multiply-add of every matmul, attention included (22.35 GFLOP per sequence at seq 128).
   Beside each system that runs its library's own kernels (not XLA): the milliseconds of a batch
   left once its dense matmuls are counted at its library's measured rate, i.e. what it spends
   on everything else (casts, LayerNorm, attention, GELU), so that a ratio between systems on
   different matmul kernels can be read as kernels and the rest.
3. Training: `benchmarks/trainer_bench.py`'s step against keras-hub's `BertMaskedLM.fit`.

Peers run only when installed (`make bench` installs the `bench` extra: keras-hub, torch,
transformers); none is a dependency of bert_tf. Every figure is measured in its own process,
systems alternate within each round, and the median over rounds is reported.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

from common import SEQ, VOCAB, bert_config, encoder_matmul_flops, hf_bert_config, run_in_fresh_process

BATCH = 8
LAYERS, HIDDEN, HEADS, INTERMEDIATE = 12, 768, 12, 3072
FORWARD_SYSTEMS = (
    "bert_tf",
    "bert_tf_xla",
    "keras_hub",
    "hf_torch",
    "bert_tf_bf16",
    "bert_tf_bf16_xla",
    "keras_hub_bf16",
    "hf_torch_bf16",
)
LABELS = {
    "bert_tf": "bert_tf (tf.function)",
    "bert_tf_xla": "bert_tf + XLA",
    "keras_hub": "keras-hub BertBackbone",
    "hf_torch": "HF transformers (torch)",
    "bert_tf_bf16": "bert_tf mixed_bfloat16",
    "bert_tf_bf16_xla": "bert_tf mixed_bfloat16 + XLA",
    "keras_hub_bf16": "keras-hub mixed_bfloat16",
    "hf_torch_bf16": "HF torch autocast bf16",
}
# (tokens, in, out, count per layer) of one encoder layer's dense matmuls.
LAYER_MATMULS = (
    (BATCH * SEQ, HIDDEN, HIDDEN, 4),
    (BATCH * SEQ, HIDDEN, INTERMEDIATE, 1),
    (BATCH * SEQ, INTERMEDIATE, HIDDEN, 1),
)


def dense_flops_per_sequence():
    """2 x multiply-adds of the encoder's dense matmuls (LAYER_MATMULS in every layer) for one sequence."""
    per_token = sum(count * 2 * n_in * n_out for _, n_in, n_out, count in LAYER_MATMULS)
    return LAYERS * SEQ * per_token


def forward_flops_per_sequence():
    """2 x multiply-adds of every matmul of the encoder (dense and attention) for one sequence."""
    shape = dict(layers=LAYERS, hidden=HIDDEN, intermediate=INTERMEDIATE, batch=1)
    return encoder_matmul_flops(shape, last_layer_rows=SEQ)


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown"


ONEDNN_PROBES = {  # a bfloat16 product, which both libraries hand to oneDNN
    "tf": "import tensorflow as tf; x = tf.ones((64, 64), tf.bfloat16); tf.matmul(x, x)",
    "torch": "import torch; x = torch.ones(64, 64, dtype=torch.bfloat16); x @ x",
}


def onednn_version(library):
    """The oneDNN release a library's matmuls run on ("v3.7.3"), read from the banner oneDNN
    prints under `ONEDNN_VERBOSE=1` in a fresh process; None if the library is missing."""
    result = subprocess.run(
        [sys.executable, "-c", ONEDNN_PROBES[library]],
        capture_output=True,
        text=True,
        env=dict(os.environ, ONEDNN_VERBOSE="1", TF_CPP_MIN_LOG_LEVEL="3"),
    )
    match = re.search(r"oneDNN (v[0-9.]+)", result.stdout)
    return match.group(1) if match else None


def has_bf16_units(flags):
    return "avx512_bf16" in flags or "amx_bf16" in flags


# -- workers (each in its own process) -------------------------------------------------------


MATMUL_REPEATS = 20


def matmul_rate(library, dtype, repeats=MATMUL_REPEATS):
    """GFLOP/s of one library's matmul over one layer's dense shapes, as that layer would see it.

    Args:
      library: "tf" (tf.matmul, oneDNN's kernels as TensorFlow calls them: what bert_tf and
        keras-hub run on) or "torch" (torch.matmul: what HF transformers runs on).
      dtype: "float32" or "bfloat16".
      repeats: The timed calls of each shape (after one untimed).
    """
    if library == "tf":
        import tensorflow as tf

        def product_of(a, b):
            a, b = tf.constant(a, getattr(tf, dtype)), tf.constant(b, getattr(tf, dtype))
            product = tf.function(lambda: tf.matmul(a, b))
            return lambda: product().numpy()

    else:
        import torch

        def product_of(a, b):
            a, b = torch.tensor(a).to(getattr(torch, dtype)), torch.tensor(b).to(getattr(torch, dtype))

            def product():
                with torch.inference_mode():
                    return a @ b  # torch on CPU returns when the product is done

            return product

    import numpy as np

    rng = np.random.default_rng(0)
    seconds, flops = 0.0, 0
    for tokens, n_in, n_out, count in LAYER_MATMULS:
        a = rng.standard_normal((tokens, n_in), dtype=np.float32)
        b = rng.standard_normal((n_in, n_out), dtype=np.float32)
        product = product_of(a, b)
        product()
        start = time.perf_counter()
        for _ in range(repeats):
            product()
        per_call = (time.perf_counter() - start) / repeats
        seconds += count * per_call
        flops += count * 2 * tokens * n_in * n_out
    return flops / seconds / 1e9


def synthetic_inputs():
    import numpy as np

    rng = np.random.RandomState(0)
    lengths = rng.randint(SEQ // 2, SEQ + 1, size=BATCH)
    mask = (np.arange(SEQ)[None] < lengths[:, None]).astype("int32")
    return {
        "input_ids": (rng.randint(1000, VOCAB, size=(BATCH, SEQ)) * mask).astype("int32"),
        "input_mask": mask,
        "segment_ids": ((np.arange(SEQ)[None] >= (lengths // 2)[:, None]) & (mask == 1)).astype("int32"),
    }


def time_calls(call, repeats=5):
    call()
    call()
    start = time.perf_counter()
    for _ in range(repeats):
        call()
    return BATCH * repeats / (time.perf_counter() - start)


def forward_bert_tf(dtype, jit_compile):
    import keras
    import numpy as np
    import tensorflow as tf

    config = bert_config(dict(layers=LAYERS, hidden=HIDDEN, heads=HEADS, intermediate=INTERMEDIATE))
    from bert_tf import BertModel

    keras.utils.set_random_seed(0)
    model = BertModel(config, dtype=dtype)
    inputs = {k: tf.constant(v) for k, v in synthetic_inputs().items()}
    forward = tf.function(lambda x: model(x)["sequence_output"], jit_compile=jit_compile)
    rate = time_calls(lambda: forward(inputs).numpy())
    notes = {}
    if dtype:  # the bf16 output against float32 on the same weights
        reference = BertModel(config)
        reference.set_weights(model.get_weights())
        want = np.asarray(reference(inputs)["sequence_output"], np.float64)
        got = np.asarray(tf.cast(forward(inputs), tf.float32), np.float64)
        notes["relative_l2"] = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    return rate, notes


def forward_keras_hub(dtype):
    import keras
    import keras_hub
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB,
        num_layers=LAYERS,
        num_heads=HEADS,
        hidden_dim=HIDDEN,
        intermediate_dim=INTERMEDIATE,
        max_sequence_length=512,
        num_segments=2,
        dtype=dtype,
    )
    x = synthetic_inputs()
    inputs = {
        "token_ids": tf.constant(x["input_ids"]),
        "padding_mask": tf.constant(x["input_mask"]),
        "segment_ids": tf.constant(x["segment_ids"]),
    }
    forward = tf.function(lambda x: backbone(x)["sequence_output"])
    return time_calls(lambda: forward(inputs).numpy()), {}


def forward_hf_torch(bf16):
    import numpy as np
    import torch
    import transformers

    torch.manual_seed(0)
    model = transformers.BertModel(hf_bert_config(LAYERS, HIDDEN, HEADS, INTERMEDIATE)).eval()
    x = {k: torch.tensor(v, dtype=torch.long) for k, v in synthetic_inputs().items()}
    inputs = dict(input_ids=x["input_ids"], attention_mask=x["input_mask"], token_type_ids=x["segment_ids"])

    def forward():
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            return model(**inputs).last_hidden_state

    rate = time_calls(forward)
    notes = {}
    if bf16:
        with torch.inference_mode():
            want = model(**inputs).last_hidden_state.double().numpy()
        got = forward().float().double().numpy()
        notes["relative_l2"] = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    return rate, notes


def run_worker(name, matmul_repeats=MATMUL_REPEATS):
    if name.startswith("matmul_"):
        _, library, dtype = name.split("_")
        return matmul_rate(library, dtype, matmul_repeats), {}
    dtype = "mixed_bfloat16" if "bf16" in name else None
    if name.startswith("bert_tf"):
        return forward_bert_tf(dtype, jit_compile=name.endswith("xla"))
    if name.startswith("keras_hub"):
        return forward_keras_hub(dtype)
    return forward_hf_torch(bf16=dtype is not None)


def measure(name):
    """Runs one worker in a fresh process: (rate, notes), or None if its library is missing."""
    return run_in_fresh_process(__file__, name)


def alternate(names, rounds):
    rates = {name: [] for name in names}
    notes = {name: {} for name in names}
    for _ in range(rounds):
        for name in names:
            result = measure(name)
            if result is not None:
                rates[name].append(result[0])
                notes[name].update(result[1])
    return {name: r for name, r in rates.items() if r}, notes


def own_matmul(name):
    """The library whose matmul kernels a forward system runs on: "torch" for HF, else "tf"."""
    return "torch" if name.startswith("hf_torch") else "tf"


def time_beside_matmuls(name, seq_per_second, own_matmul_rate):
    """Milliseconds of a batch not spent in the dense matmuls, were they run at the rate of the
    system's own library's matmul (`own_matmul_rate`, GFLOP/s) measured alone; None for an XLA
    system (XLA's CPU matmuls are not those kernels) or without the rate."""
    if name.endswith("xla") or not own_matmul_rate:
        return None
    batch_ms = 1e3 * BATCH / seq_per_second
    return batch_ms - 1e3 * BATCH * dense_flops_per_sequence() / 1e9 / own_matmul_rate


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sections", default="machine,forward,train")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--matmul_repeats", type=int, default=MATMUL_REPEATS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print("RESULT " + json.dumps(run_worker(args.worker, args.matmul_repeats)))
        return
    sections = args.sections.split(",")
    flags = cpu_flags()
    bf16 = has_bf16_units(flags)
    units = [f for f in ("avx512_bf16", "amx_bf16", "amx_tile", "avx512f") if f in flags]
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores, units: {', '.join(units) or 'none of avx512/amx'}")
    if not bf16:
        print("This CPU has no bfloat16 units (AVX512_BF16 or AMX): bfloat16 is emulated; float32 only.")

    precisions = ("float32", "bfloat16") if bf16 else ("float32",)
    rates, _ = alternate([f"matmul_{lib}_{p}" for p in precisions for lib in ("tf", "torch")], args.rounds)
    roof = {name: statistics.median(r) for name, r in rates.items()}
    versions = {library: onednn_version(library) for library in ONEDNN_PROBES}
    print("oneDNN: " + ", ".join(f"{library} {v}" for library, v in versions.items() if v))
    print("Matmuls at BERT-base's layer shapes (one encoder layer's dense matmuls), GFLOP/s:")
    for precision in precisions:
        tf_rate, torch_rate = roof.get(f"matmul_tf_{precision}"), roof.get(f"matmul_torch_{precision}")
        torch_part = (
            f", torch.matmul {torch_rate:,.0f} ({torch_rate / tf_rate:.2f}x tf)" if torch_rate else ""
        )
        print(f"  {precision}: tf.matmul {tf_rate:,.0f}{torch_part}")

    if "forward" in sections:
        systems = [s for s in FORWARD_SYSTEMS if bf16 or "bf16" not in s]
        rates, notes = alternate(systems, args.rounds)
        flops = forward_flops_per_sequence()
        print(
            f"\nForward, BERT-base, batch {BATCH}, seq {SEQ} ({flops / 1e9:.2f} GFLOP/sequence), "
            f"median of {args.rounds} alternated rounds:"
        )
        medians = {name: statistics.median(r) for name, r in rates.items()}
        for precision in ("float32", "bfloat16"):
            group = {n: m for n, m in medians.items() if ("bf16" in n) == (precision == "bfloat16")}
            if not group:
                continue
            peers = {n: m for n, m in group.items() if not n.startswith("bert_tf")}
            best = max(peers.items(), key=lambda item: item[1]) if peers else None
            matmul = roof.get(f"matmul_tf_{precision}")
            print(f"  {precision}:")
            for name, median in group.items():
                fraction = f"{median * flops / 1e9 / matmul:6.1%} of the matmul rate" if matmul else ""
                beside = time_beside_matmuls(name, median, roof.get(f"matmul_{own_matmul(name)}_{precision}"))
                fraction += (
                    f", {beside:5.0f} ms a batch beside its dense matmuls" if beside is not None else ""
                )
                error = notes[name].get("relative_l2")
                error = f", relative L2 vs float32 {error:.2e}" if error is not None else ""
                spread = ", ".join(f"{r:.2f}" for r in rates[name])
                print(f"    {LABELS[name]:<30} {median:7.2f} seq/s  {fraction}{error}  (rounds: {spread})")
            if best:
                for name in (n for n in group if n.startswith("bert_tf")):
                    print(f"    {LABELS[name]} / best peer ({LABELS[best[0]]}): {group[name] / best[1]:.2f}x")

    if "train" in sections:
        print("\nTraining (benchmarks/trainer_bench.py):", flush=True)
        trainer_bench = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trainer_bench.py")
        subprocess.run([sys.executable, trainer_bench, f"--rounds={args.rounds}"], check=True)


if __name__ == "__main__":
    main()
