"""Seconds and peak memory of converting a Hugging Face BERT to the original's checkpoint
(`convert_checkpoint.py --hf_model=DIR --output_dir=OUT`: read, write, load back and check
against the float64 reference).

  python benchmarks/hf_convert_bench.py [--size=large|base|tiny]

A BertForPreTraining of the size's shape with random weights is written with safetensors to a
temporary directory (with a vocab.txt of as many tokens); a fresh process converts it, so its
peak resident memory (`ru_maxrss`) is the conversion's alone, and reports the seconds and that
peak as a multiple of the weights' bytes, with the memory the process holds before any work
(TensorFlow's and Keras' libraries, after the imports) beside it. Linux only (/proc).
"""

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import REPO, VOCAB, memory_bytes, run_in_fresh_process  # noqa: E402

SHAPES = {
    "large": {"layers": 24, "hidden": 1024, "heads": 16, "intermediate": 4096, "vocab": VOCAB},
    "base": {"layers": 12, "hidden": 768, "heads": 12, "intermediate": 3072, "vocab": VOCAB},
    "tiny": {"layers": 2, "hidden": 128, "heads": 2, "intermediate": 512, "vocab": 1000},
}


def write_hf_model(directory, shape, seed=0):
    """A random BertForPreTraining of `shape` as `save_pretrained` lays it out; returns the
    weights' bytes."""
    import numpy as np
    import safetensors.numpy

    rng = np.random.default_rng(seed)
    h, i = shape["hidden"], shape["intermediate"]

    def normal(*dims):
        return rng.standard_normal(dims, dtype=np.float32) * 0.02

    tensors = {
        "bert.embeddings.word_embeddings.weight": normal(shape["vocab"], h),
        "bert.embeddings.position_embeddings.weight": normal(512, h),
        "bert.embeddings.token_type_embeddings.weight": normal(2, h),
    }

    def layer_norm(name):
        tensors[f"{name}.LayerNorm.weight"] = np.ones(h, np.float32)
        tensors[f"{name}.LayerNorm.bias"] = np.zeros(h, np.float32)

    def dense(name, n_in, n_out):
        tensors[f"{name}.weight"], tensors[f"{name}.bias"] = normal(n_out, n_in), normal(n_out)

    layer_norm("bert.embeddings")
    for n in range(shape["layers"]):
        layer = f"bert.encoder.layer.{n}"
        for part in ("query", "key", "value"):
            dense(f"{layer}.attention.self.{part}", h, h)
        dense(f"{layer}.attention.output.dense", h, h)
        layer_norm(f"{layer}.attention.output")
        dense(f"{layer}.intermediate.dense", h, i)
        dense(f"{layer}.output.dense", i, h)
        layer_norm(f"{layer}.output")
    dense("bert.pooler.dense", h, h)
    dense("cls.predictions.transform.dense", h, h)
    layer_norm("cls.predictions.transform")
    tensors["cls.predictions.bias"] = normal(shape["vocab"])
    dense("cls.seq_relationship", h, 2)
    safetensors.numpy.save_file(
        tensors, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"}
    )
    config = {
        "architectures": ["BertForPreTraining"],
        "model_type": "bert",
        "vocab_size": shape["vocab"],
        "hidden_size": h,
        "num_hidden_layers": shape["layers"],
        "num_attention_heads": shape["heads"],
        "intermediate_size": i,
        "hidden_act": "gelu",
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
        "layer_norm_eps": 1e-12,
    }
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f)
    with open(os.path.join(directory, "vocab.txt"), "w") as f:
        tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        f.write("".join(t + "\n" for t in tokens + [f"w{n}" for n in range(shape["vocab"] - len(tokens))]))
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": True, "tokenizer_class": "BertTokenizer"}, f)
    return sum(t.nbytes for t in tensors.values())


def worker(hf_model, output_dir):
    """Converts in this process and prints `RESULT {seconds, peak, before}`."""
    sys.path.insert(0, REPO)
    from bert_tf.checkpoints import converter

    converter.free_large_blocks_promptly()  # as tools/convert_checkpoint.py does
    before = memory_bytes("VmRSS")
    start = time.perf_counter()
    imported = converter.hf_to_google(hf_model, output_dir)
    seconds = time.perf_counter() - start
    result = {
        "seconds": seconds,
        "peak": memory_bytes("VmHWM"),
        "before": before,
        "written": imported.written,
        "max_abs_diff": imported.conversion.verification.max_abs_diff,
    }
    print("RESULT " + json.dumps(result))


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", choices=sorted(SHAPES), default="large")
    parser.add_argument("--worker", nargs=2, metavar=("HF_MODEL", "OUTPUT_DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    with tempfile.TemporaryDirectory() as tmp:
        hf_model, output_dir = os.path.join(tmp, "hf"), os.path.join(tmp, "google")
        os.makedirs(hf_model)
        start = time.perf_counter()
        weights = write_hf_model(hf_model, SHAPES[args.size])
        print(
            f"wrote a random {args.size} BertForPreTraining ({weights / 2**30:.2f} GiB of weights) in "
            f"{time.perf_counter() - start:.1f} s"
        )
        result = run_in_fresh_process(os.path.abspath(__file__), hf_model, output_dir)
    assert result["written"], result
    peak, before = result["peak"], result["before"]
    print(
        f"HF -> Google, {args.size}: {result['seconds']:.1f} s (read, write, load back, check against the "
        f"reference: largest difference {result['max_abs_diff']:.1e})"
    )
    print(
        f"peak RSS {peak / 2**30:.2f} GiB = {peak / weights:.2f}x the weights "
        f"({before / 2**30:.2f} GiB of it held after the imports, before any work: "
        f"{(peak - before) / weights:.2f}x the weights beyond that)"
    )
    print("RESULT " + json.dumps({**result, "weights": weights, "ratio": peak / weights}))


if __name__ == "__main__":
    main()
