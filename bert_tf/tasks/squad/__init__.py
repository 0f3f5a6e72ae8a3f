"""SQuAD 1.1 and 2.0, the original's `run_squad.py`."""
