"""Text: the original's tokenizer (Python and in-graph), input packing, vocabulary learning."""
