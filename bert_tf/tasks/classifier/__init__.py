"""Sentence (pair) classification, the original's `run_classifier.py`."""
