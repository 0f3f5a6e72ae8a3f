"""The TensorFlow ops a call runs, after Grappler's rewrites, read from a profiler trace."""

import collections
import os
import sys
import tempfile

import tensorflow as tf

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def op_types_run(function):
    """How many ops of each TensorFlow op type one call of `function` runs (after a first call
    has traced it), read by the step profiler's reader."""
    sys.path.insert(0, os.path.join(REPO, "benchmarks"))
    from step_profile import read_trace

    function()
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        function()
        tf.profiler.experimental.stop()
        ops, _ = read_trace(logdir)
    return collections.Counter(op_type for _, _, op_type in ops)


def onednn_rewrites(dtype="float32"):
    """Whether TensorFlow's oneDNN graph rewrite takes ops of `dtype` on this machine.

    TensorFlow turns oneDNN on by default only on CPUs with AVX-512 or AMX
    (`TF_ENABLE_ONEDNN_OPTS=1` turns it on elsewhere too); it then rewrites bfloat16 ops only
    with AVX-512 (natively with AVX512_BF16 or AMX, else emulated). Elsewhere the ops stay
    TensorFlow's own, which is what the tests then check.
    """
    from bert_tf import onednn

    if not onednn.onednn_enabled():
        return False
    if dtype != "bfloat16":
        return True
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        return any(line.startswith("flags") and "avx512f" in line.split() for line in f)
