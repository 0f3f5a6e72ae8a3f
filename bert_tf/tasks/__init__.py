"""What a loaded BERT is used for: feature extraction (and, as they land, fine-tuning tasks)."""
