"""Training: the original's optimizer and schedule, the distributed step, checkpoints, the loop.

- `optimization`: `AdamWeightDecay` (the original's), `Lamb`, `WarmupPolynomialDecay` (keras.ops).
- `pretraining`: the original's pretraining losses and metrics, and `run_pretraining`.
- `step` (TensorFlow): N distributed train or eval steps per call, gradient reduction modes.
- `checkpointing` (TensorFlow): Google-layout training checkpoints with the input position.
- `loop` (TensorFlow): restore or initialise, run, log, save, evaluate.
- `distribution` (TensorFlow): the strategy from the flags.
"""
