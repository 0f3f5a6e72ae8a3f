"""Pretraining (the original's `run_pretraining.py`): `data` (the records, checked), `task` (the
masked-LM and next-sentence losses and metrics), `run` (`PretrainingOptions`, `run_pretraining`)."""
