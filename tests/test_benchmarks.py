"""The GPU benchmark runs where no GPU is: on CPU JAX at a tiny size (the benchmark's smoke run)."""

import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_gpu_bench_runs_on_cpu_jax_at_a_tiny_size():
    result = subprocess.run(
        [sys.executable, "benchmarks/gpu_bench.py", "--tiny", "--steps=2", "--warmup=1", "--no_peers"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu"),
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rates = re.findall(r"^  bert_tf\s+([\d,.]+) seq/s", result.stdout, re.MULTILINE)
    assert len(rates) == 2 and all(float(r.replace(",", "")) > 0 for r in rates), result.stdout
