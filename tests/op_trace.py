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
