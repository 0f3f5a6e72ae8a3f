"""Where the time of the trainer benchmark's step goes, op by op, on this CPU.

    python benchmarks/step_profile.py [--config=base] [--steps=2] [--jit_compile] [--top=20]

Builds `trainer_bench.py`'s bert_tf step (the one tools/run_pretraining.py runs), traces `--steps`
steps with TensorFlow's profiler and reads the trace (`tensorflow.tsl.profiler.protobuf.xplane_pb2`).
Two ops often run at once on two cores, so each moment of wall time is shared equally among the
TensorFlow ops running at it (an XLA-compiled call counts as one op, "XLA executable"); the shares
add up to the traced window. Printed per step: the window, the model's matmul FLOPs and the
matmuls' rate, the shares by op type, and the busiest XLA fusions (thread time, summed over
threads).
"""

import argparse
import collections
import glob
import os
import sys
import tempfile
import time

from common import PREDICTIONS, SEQ
from trainer_bench import CONFIGS, bert_tf_step, run_steps, step_matmul_flops

XLA_EXECUTABLE = "CpuExecutable::ExecuteAsyncOnStream"
CONTROL_FLOW = ("StatefulPartitionedCall", "PartitionedCall", "While", "If")


def read_trace(logdir):
    """The trace's TensorFlow-op events, as (start_ps, end_ps, type), and XLA fusions' thread time."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    paths = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
    space = xplane_pb2.XSpace()
    with open(paths[0], "rb") as f:
        space.ParseFromString(f.read())
    plane = next(p for p in space.planes if p.name == "/host:CPU")
    ops, fusions = [], collections.Counter()
    for line in plane.lines:
        for event in line.events:
            name = plane.event_metadata[event.metadata_id].name
            start = line.timestamp_ns * 1000 + event.offset_ps
            if line.name.startswith("tf_Compute"):
                if name == XLA_EXECUTABLE:
                    ops.append((start, start + event.duration_ps, "XLA executable"))
                elif ":" in name and "::" not in name:
                    op_type = name.rsplit(":", 1)[1]
                    if op_type not in CONTROL_FLOW:
                        ops.append((start, start + event.duration_ps, op_type))
            elif "Eigen" in line.name and "::" not in name and not name.startswith("end:"):
                fusions[name] += event.duration_ps
    return ops, fusions


def wall_shares(ops):
    """Each op type's share of the wall time, splitting every moment among the ops running then."""
    starts = [(start, 1, i) for i, (start, _, _) in enumerate(ops)]
    ends = [(end, -1, i) for i, (_, end, _) in enumerate(ops)]
    edges = sorted(starts + ends)
    running, shares, last, idle = set(), collections.Counter(), edges[0][0], 0
    for moment, change, index in edges:
        if running:
            for j in running:
                shares[ops[j][2]] += (moment - last) / len(running)
        else:
            idle += moment - last
        last = moment
        (running.add if change == 1 else running.discard)(index)
    return shares, idle, edges[-1][0] - edges[0][0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=sorted(CONFIGS), default="base")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--jit_compile", action="store_true")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    import tensorflow as tf

    shape = CONFIGS[args.config]
    step, iterator = bert_tf_step(shape, args.jit_compile)
    start = time.perf_counter()
    run_steps(step, iterator, args.steps)
    untraced = (time.perf_counter() - start) / args.steps
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        run_steps(step, iterator, args.steps)
        tf.profiler.experimental.stop()
        ops, fusions = read_trace(logdir)

    per_step = 1e9 * args.steps  # picoseconds -> milliseconds per step
    shares, idle, window = wall_shares(ops)
    flops = step_matmul_flops(shape)
    matmul = sum(v for k, v in shares.items() if "MatMul" in k) / per_step
    print(
        f"{args.config}, batch {shape['batch']}, seq {SEQ}, {PREDICTIONS} predictions"
        f"{', --jit_compile' if args.jit_compile else ''}: {untraced * 1e3:.0f} ms per step untraced, "
        f"traced window {window / per_step:.0f} ms per step"
    )
    rate = f"{flops / matmul / 1e6:.0f} GFLOP/s" if matmul else "inside the XLA executable, not separable"
    print(f"matmul FLOPs per step {flops / 1e9:.0f} G; matmul ops {matmul:.0f} ms: {rate}")
    print("wall share per step, by op type:")
    for op_type, ps in shares.most_common(args.top):
        print(f"  {op_type:<32} {ps / per_step:8.1f} ms")
    print(f"  {'(no TensorFlow op running)':<32} {idle / per_step:8.1f} ms")
    print("XLA fusions, thread time per step (summed over threads):")
    for name, ps in fusions.most_common(min(args.top, 10)):
        print(f"  {name[:60]:<60} {ps / per_step:8.1f} ms")


if __name__ == "__main__":
    sys.exit(main())
