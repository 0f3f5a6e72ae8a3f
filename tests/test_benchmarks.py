"""The benchmarks run where their machine is not: the GPU benchmark on CPU JAX at a tiny size, the
step profile on BERT-tiny (smoke runs, no timing asserted).

The benchmarks import TensorFlow (or Keras on JAX) before they write anything or read a variable
that it reads as it loads: their runs are forked by `tests/tool_runs.py` from a process that has
imported it. The HF conversion's measures its own memory in a fresh process."""

import json
import os
import re
import subprocess
import sys

from tests import tool_runs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_benchmark_worker(script, *args):
    """Runs `benchmarks/<script> --worker <args>` as the benchmarks do and returns its result."""
    result = tool_runs.run(
        [sys.executable, os.path.join("benchmarks", script), "--worker", *args],
        cwd=REPO,
        timeout=600,
        server=tool_runs.TENSORFLOW,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.split("RESULT ", 1)[1])


def test_gpu_bench_runs_on_cpu_jax_at_a_tiny_size(tmp_path):
    # The XLA_FLAGS it sets before importing Keras are read when JAX's backend starts, later.
    result = tool_runs.run(
        [
            sys.executable,
            "benchmarks/gpu_bench.py",
            "--tiny",
            "--steps=2",
            "--warmup=1",
            "--no_peers",
            f"--profile_dir={tmp_path}",
        ],
        cwd=REPO,
        env=dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu"),
        timeout=600,
        server=tool_runs.JAX,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rates = re.findall(r"^  bert_tf\s+([\d,.]+) seq/s", result.stdout, re.MULTILINE)
    assert len(rates) == 2 and all(float(r.replace(",", "")) > 0 for r in rates), result.stdout
    # A CPU trace has no device ops to sum; it is written all the same.
    assert result.stdout.count("no device ops in the trace") == 2, result.stdout
    assert list(tmp_path.glob("train/**/*.xplane.pb")) and list(tmp_path.glob("forward/**/*.xplane.pb"))


def test_gpu_profile_kinds_of_ops_seen_in_an_h100_trace():
    """Op names as an H100 trace of the step named them (kernels inside XLA's CUDA graphs),
    and as XLA names them outside the graphs."""
    sys.path.insert(0, os.path.join(REPO, "benchmarks"))
    from gpu_bench import ns_by_kind, op_kind

    graph = {"hlo_op": "command_buffer_1", "tf_op": "XlaModule:"}
    assert op_kind("nvjet_sm90_tst_192x192_64x3_2x1_v_bz_coopB_splitK_NTN", graph) == "matmul: cuBLAS"
    assert op_kind("gemm_fusion_dot_general_402", graph) == "matmul: XLA's Triton GEMM fusions"
    assert op_kind("loop_transpose_fusion_47", graph) == "layout transposes"
    assert op_kind("input_multiply_reduce_fusion_1", graph).startswith("reduction fusions")
    assert op_kind("loop_add_compare_fusion_20", graph).startswith("other fusions")
    assert op_kind("Memset 0", graph) == "other"
    assert op_kind("cublas-gemm.3", {"tf_op": "jit(train_step)/dot_general"}) == "matmul: cuBLAS"
    assert op_kind("custom-call.7", {"hlo_op": "__cudnn$fmhaScaleBiasSoftmax"}) == "attention: cuDNN"
    dropout = {"tf_op": "jit(train_step)/dropout/random_bits/threefry2x32"}
    assert op_kind("loop_fusion.12", dropout) == "dropout's random bits (threefry)"

    totals = {
        "nvjet_a": {"ns": 60.0, "stats": graph},
        "nvjet_b": {"ns": 30.0, "stats": graph},
        "loop_transpose_fusion": {"ns": 30.0, "stats": graph},
    }
    assert ns_by_kind(totals, steps=3) == [("matmul: cuBLAS", 30.0), ("layout transposes", 10.0)]


def test_step_profile_counts_the_issues_flops_and_prints_the_step_by_op():
    sys.path.insert(0, os.path.join(REPO, "benchmarks"))
    from common import encoder_matmul_flops
    from trainer_bench import CONFIGS

    # BERT-base's forward at seq 128 is 22.35 GFLOP per sequence (the performance issue's count).
    one_sequence = dict(CONFIGS["base"], batch=1)
    assert abs(encoder_matmul_flops(one_sequence, 128) / 1e9 - 22.35) < 0.005

    result = tool_runs.run(
        [sys.executable, "benchmarks/step_profile.py", "--config=tiny", "--steps=1", "--top=5"],
        cwd=REPO,
        timeout=600,
        server=tool_runs.TENSORFLOW,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(r"matmul ops [\d.]+ ms: \d+ GFLOP/s", result.stdout), result.stdout
    assert re.search(r"^  \w*MatMul\w*\s+[\d.]+ ms$", result.stdout, re.MULTILINE), result.stdout


def test_trainer_bench_floor_draws_what_the_training_step_draws():
    """The floor's dropout draws are the model's own: one per dropout the training forward runs,
    of the same sizes and kind (int32s, read off the traced graph), and the floor worker runs at
    BERT-tiny."""
    import numpy as np
    import tensorflow as tf

    sys.path.insert(0, os.path.join(REPO, "benchmarks"))
    from common import bert_config, synthetic_batch
    from trainer_bench import CONFIGS, step_dropout_shapes

    from bert_tf.modeling.dropout import draws_shape
    from bert_tf.tasks.pretraining.task import PretrainingTask

    shape = CONFIGS["tiny"]
    task = PretrainingTask(bert_config(shape))
    batch = {k: tf.constant(v) for k, v in synthetic_batch(shape["batch"]).items()}
    graph = tf.function(lambda b: task.model(b, training=True)).get_concrete_function(batch).graph
    drawn = [
        op.outputs[0].shape.num_elements()
        for op in graph.get_operations()
        if op.type == "StatelessRandomUniformIntV2"
    ]
    assert sorted(drawn) == sorted(int(np.prod(draws_shape(s))) for s in step_dropout_shapes(shape))

    # The floor's peak matmul at 1024^3, not 4096^3: 64 times fewer FLOPs timed.
    rate, parts = run_benchmark_worker("trainer_bench.py", "floor", "--configs", "tiny", "--peak_matmul=1024")
    assert rate > 0 and set(parts) == {"matmuls", "update", "dropout draws", "peak_gflops"}
    assert all(value > 0 for value in parts.values()), parts


def test_cpu_bench_counts_the_dense_flops_of_the_encoders_kernels_and_times_a_matmul():
    """The CPU benchmark's dense FLOPs are 2 per token per weight of the encoder's dense
    kernels (read off a built BERT-base), its total the issue's 22.35 GFLOP per sequence, its
    TensorFlow matmul worker runs, and it reads the oneDNN release TensorFlow bundles."""
    import numpy as np

    sys.path.insert(0, os.path.join(REPO, "benchmarks"))
    from common import SEQ, bert_config
    from cpu_bench import (
        dense_flops_per_sequence,
        forward_flops_per_sequence,
        onednn_version,
        time_beside_matmuls,
    )
    from trainer_bench import CONFIGS

    from bert_tf import BertModel

    model = BertModel(bert_config(CONFIGS["base"]))
    model(
        {
            "input_ids": np.zeros((1, 8), "int32"),
            "input_mask": np.ones((1, 8), "int32"),
            "segment_ids": np.zeros((1, 8), "int32"),
        }
    )
    kernels = [v for v in model.weights if v.path.startswith("bert/encoder/") and v.path.endswith("/kernel")]
    assert len(kernels) == 12 * 6
    assert dense_flops_per_sequence() == 2 * SEQ * sum(int(np.prod(v.shape)) for v in kernels)
    assert abs(forward_flops_per_sequence() / 1e9 - 22.35) < 0.005
    assert time_beside_matmuls("bert_tf_bf16_xla", 10.0, 1000.0) is None

    # Each shape's matmul timed twice, not 20 times: the smoke run times the same calls.
    rate, notes = run_benchmark_worker("cpu_bench.py", "matmul_tf_float32", "--matmul_repeats=2")
    assert rate > 0 and notes == {}
    assert re.fullmatch(r"v\d+\.\d+(\.\d+)?", onednn_version("tf")), onednn_version("tf")


def test_hf_convert_bench_converts_a_tiny_model_and_measures_it():
    result = subprocess.run(
        [sys.executable, "benchmarks/hf_convert_bench.py", "--size=tiny"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads(result.stdout.split("RESULT ", 1)[1])
    assert figures["written"] and figures["seconds"] > 0 and figures["peak"] > figures["before"] > 0
