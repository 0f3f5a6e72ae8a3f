"""Training, for every job: the original's optimizer and schedule, the distributed step,
checkpoints, the loop and the runner. No module here knows a job (`bert_tf.tasks` has them).

- `options`: the training tools' shared options (`TrainingOptions`, `FinetuningOptions`).
- `runner`: `Runner`, what every job trains, evaluates, predicts and exports through.
- `optimization`: `AdamWeightDecay` (the original's), `Lamb`, `WarmupPolynomialDecay` (keras.ops).
- `step` (TensorFlow): N distributed train or eval steps per call, gradient reduction modes.
- `loop` (TensorFlow): restore or initialise, run blocks of steps, log, save, evaluate.
- `checkpointing` (TensorFlow): Google-layout training checkpoints with the input position.
- `distribution` (TensorFlow): the strategy from the flags.
- `interruption`: SIGTERM and Ctrl-C end a run after the step in progress.
"""
