"""Exact match and F1 of a SQuAD predictions file, by the official 1.1 or 2.0 rules.

  python tools/evaluate_squad.py dev-v1.1.json out/squad/predictions.json
  python tools/evaluate_squad.py dev-v2.0.json out/squad/predictions.json \
      --version_2_with_negative --na_prob_file=out/squad/null_odds.json

Prints the official scripts' JSON: `{"exact_match": ..., "f1": ...}` for SQuAD 1.1; `exact`,
`f1`, `total`, `HasAns_*`, `NoAns_*` and, given --na_prob_file, `best_f1_thresh` etc. for
2.0 (that threshold is what run_squad.py's --null_score_diff_threshold takes).
"""

import json

from absl import flags

from bert_tf import cli

flags.DEFINE_bool("version_2_with_negative", False, "SQuAD 2.0 rules (unanswerable questions).")
flags.DEFINE_string("na_prob_file", None, "SQuAD 2.0: no-answer scores per question (null_odds.json).")
flags.DEFINE_float("na_prob_thresh", 1.0, 'SQuAD 2.0: answer "" where the no-answer score exceeds this.')
flags.DEFINE_string("out_file", None, "Write the JSON here instead of printing it.")

FLAGS = flags.FLAGS


def main(argv):
    from bert_tf.files import atomic_output, check_output_path, open_file
    from bert_tf.tasks.squad_evaluation import evaluate_files

    if len(argv) != 3:
        raise ValueError("usage: evaluate_squad.py DATA_FILE PREDICTION_FILE [--version_2_with_negative ...]")
    if FLAGS.out_file:
        check_output_path(FLAGS.out_file, "--out_file")
    result = evaluate_files(
        argv[1], argv[2], FLAGS.version_2_with_negative, FLAGS.na_prob_file, FLAGS.na_prob_thresh
    )
    text = json.dumps(result, indent=2 if FLAGS.version_2_with_negative else None)
    if FLAGS.out_file:
        with atomic_output(FLAGS.out_file) as tmp, open_file(tmp, "w") as writer:
            writer.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    cli.run(main)
