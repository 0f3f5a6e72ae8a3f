"""Per-token activations, the original's `extract_features.py`."""
