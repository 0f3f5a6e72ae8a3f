"""Text: the original's tokenizer (Python and in-graph), input packing, vocabulary learning, new
tokens for a pretrained vocabulary (`new_tokens`), words from a segmenter for Chinese whole-word
masking (`word_segmentation`)."""
