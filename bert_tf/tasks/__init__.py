"""The jobs, one package each, in one shape: `data` (examples to features), `task` (the model,
loss and metrics: what runs on a replica) and `run` (the options, whose fields are the tool's
flags, and `run_<job>`), plus host-side modules where a job has them.

- `pretraining`: the original's `run_pretraining.py`.
- `classifier`: `run_classifier.py`.
- `squad`: `run_squad.py` (`predictions`: the n-best answers; `evaluation`: the official scores).
- `tagging`: bert_tf's token tagger (`metrics`: conlleval's entity scores).
- `features`: `extract_features.py`.

The training jobs train, evaluate, predict and export through
`bert_tf.training.runner.Runner`; feature extraction loads its model through
`bert_tf.checkpoints.pretrained` and runs it alone.
"""
