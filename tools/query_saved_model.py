r"""Runs one signature of a bert_tf SavedModel on one example and prints its outputs as JSON.

`saved_model_cli run` cannot run a bert_tf export (it does not load TensorFlow Text's ops); this
tool does:
  python tools/query_saved_model.py --export_dir=/models/bert --text="Who was Jim Henson?"
  python tools/query_saved_model.py --export_dir=/models/bert/1 --signature=text_pair \
      --text="Who was Jim Henson?" --text_b="Jim Henson was a puppeteer."
  python tools/query_saved_model.py --export_dir=/models/bert --input_ids=101,2040,2001,102

Prints one JSON object keyed by output name (`pooled_output`, `sequence_output`, ...), the names
sorted, the values those of the one example (no batch dimension). A fine-tuned classifier's or
tagger's `probabilities` are named by its labels: `{"label": "1", "probabilities": {"0": 0.1,
"1": 0.9}}`, a tagger's one such object per token.
"""

from bert_tf import cli
from bert_tf.export.query import QueryOptions, run_query
from bert_tf.options import define_flags, options_from_flags

define_flags(QueryOptions)


def main(argv):
    del argv
    run_query(options_from_flags(QueryOptions))


if __name__ == "__main__":
    cli.run(main)
