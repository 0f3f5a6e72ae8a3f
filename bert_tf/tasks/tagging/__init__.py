"""Token tagging (e.g. CoNLL-2003 named entities), bert_tf's."""
