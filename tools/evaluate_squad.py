r"""Exact match and F1 of a SQuAD predictions file, by the official 1.1 or 2.0 rules.

  python tools/evaluate_squad.py dev-v1.1.json out/squad/predictions.json
  python tools/evaluate_squad.py dev-v2.0.json out/squad/predictions.json \
      --version_2_with_negative --na_prob_file=out/squad/null_odds.json

Prints the official scripts' JSON: `{"exact_match": ..., "f1": ...}` for SQuAD 1.1; `exact`,
`f1`, `total`, `HasAns_*`, `NoAns_*` and, given --na_prob_file, `best_f1_thresh` etc. for
2.0 (that threshold is what run_squad.py's --null_score_diff_threshold takes).
"""

from bert_tf import cli
from bert_tf.options import define_flags, options_from_flags
from bert_tf.tasks.squad.evaluation import EvaluateOptions, run_evaluate

define_flags(EvaluateOptions)


def main(argv):
    if len(argv) != 3:
        raise ValueError("usage: evaluate_squad.py DATA_FILE PREDICTION_FILE [--version_2_with_negative ...]")
    run_evaluate(options_from_flags(EvaluateOptions, data_file=argv[1], prediction_file=argv[2]))


if __name__ == "__main__":
    cli.run(main)
