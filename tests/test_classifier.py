"""The classifier: the original's processors and features on hand-written files and
hand-checked token lists, the head's names, a fine-tuned checkpoint in the original's layout
against the float64 NumPy reference, and tools/run_classifier.py end to end on the bundled
keyword task (learning from the random google_tiny weights, its output files, the export).
"""

import csv
import json
import logging
import os
import re
import shutil
import sys

import numpy as np
import pytest
import sklearn.metrics
import tensorflow as tf

from bert_tf.checkpoints import reference
from bert_tf.config import BertConfig
from bert_tf.modeling import BertClassifier
from bert_tf.tasks.classifier import data as classifier_data
from bert_tf.tasks.classifier import run as classifier_run
from bert_tf.tasks.classifier.data import InputExample
from bert_tf.tasks.classifier.run import ClassifierOptions, run_classifier
from bert_tf.text.tokenization import FullTokenizer
from tests import finetuning_fixtures as ff
from tests import model_fixtures as mf
from tests import tool_runs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(REPO, "tools", "run_classifier.py")
DEMO = os.path.join(REPO, "tools", "demo_data", "mrpc_keyword")
VOCAB = os.path.join(mf.GOOGLE_TINY, "vocab.txt")


def _ids(tokens):
    """Token ids read off vocab.txt's line numbers (not through the tokenizer)."""
    with open(VOCAB, encoding="utf-8") as f:
        lines = f.read().splitlines()
    return [lines.index(token) for token in tokens]


def _write_tsv(path, rows):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join("\t".join(row) + "\n" for row in rows))


@pytest.fixture(scope="module")
def tokenizer(fixtures_dir):
    return FullTokenizer(VOCAB, do_lower_case=True)


# -- processors --------------------------------------------------------------------------------


def test_mrpc_reads_the_originals_columns_guids_and_labels(tmp_path):
    header = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
    _write_tsv(
        tmp_path / "train.tsv",
        [header, ["1", "11", "12", "He said.", "She said."], ["0", "3", "4", "a", "b"]],
    )
    _write_tsv(tmp_path / "test.tsv", [["index", *header[1:]], ["0", "5", "6", "x y", "z"]])
    processor = classifier_data.get_processor("MRPC")
    assert processor.get_labels() == ["0", "1"]
    assert processor.get_train_examples(str(tmp_path)) == [
        InputExample("train-1", "He said.", "She said.", "1"),
        InputExample("train-2", "a", "b", "0"),
    ]
    assert processor.get_test_examples(str(tmp_path)) == [InputExample("test-1", "x y", "z", None)]


def test_mnli_guid_from_column_0_texts_8_and_9_label_last_matched_dev(tmp_path):
    def row(index, label_columns):
        return [
            index,
            "p",
            "q",
            "genre",
            "bp1",
            "bp2",
            "pa1",
            "pa2",
            f"premise {index}",
            f"hypothesis {index}",
        ] + (label_columns)

    header = row("index", ["label1", "gold_label"])
    _write_tsv(tmp_path / "train.tsv", [header, row("7", ["neutral", "neutral"])])
    dev_header = row("index", ["label1", "label2", "label3", "label4", "label5", "gold_label"])
    _write_tsv(tmp_path / "dev_matched.tsv", [dev_header, row("9", ["x", "x", "x", "x", "x", "entailment"])])
    _write_tsv(tmp_path / "test_matched.tsv", [row("index", []), row("3", [])])
    processor = classifier_data.get_processor("mnli")
    assert processor.get_labels() == ["contradiction", "entailment", "neutral"]
    assert processor.get_train_examples(str(tmp_path)) == [
        InputExample("train-7", "premise 7", "hypothesis 7", "neutral")
    ]
    assert processor.get_dev_examples(str(tmp_path)) == [
        InputExample("dev_matched-9", "premise 9", "hypothesis 9", "entailment")
    ]
    assert processor.get_test_examples(str(tmp_path)) == [
        InputExample("test-3", "premise 3", "hypothesis 3", None)
    ]


def test_cola_train_has_no_header_test_has_one(tmp_path):
    _write_tsv(
        tmp_path / "train.tsv", [["gj04", "1", "", "Our friends won't buy it."], ["gj04", "0", "*", "Bad."]]
    )
    _write_tsv(tmp_path / "test.tsv", [["index", "sentence"], ["0", "A test."]])
    processor = classifier_data.get_processor("cola")
    assert processor.get_train_examples(str(tmp_path)) == [
        InputExample("train-0", "Our friends won't buy it.", None, "1"),
        InputExample("train-1", "Bad.", None, "0"),
    ]
    assert processor.get_test_examples(str(tmp_path)) == [InputExample("test-1", "A test.", None, None)]


def test_xnli_trains_on_multinli_zh_and_evaluates_the_zh_dev_rows(tmp_path):
    _write_tsv(
        tmp_path / "multinli" / "multinli.train.zh.tsv",
        [["premise", "hypo", "label"], ["前提", "假设", "contradictory"], ["a", "b", "neutral"]],
    )
    dev_header = [
        "language",
        "gold_label",
        "s1bp",
        "s2bp",
        "s1p",
        "s2p",
        "sentence1",
        "sentence2",
        "promptID",
    ]
    _write_tsv(
        tmp_path / "xnli.dev.tsv",
        [
            dev_header,
            ["en", "neutral", *"....", "en a", "en b", "1"],
            ["zh", "entailment", *"....", "甲", "乙", "2"],
        ],
    )
    processor = classifier_data.get_processor("XNLI")
    assert processor.get_train_examples(str(tmp_path)) == [
        InputExample("train-1", "前提", "假设", "contradiction"),
        InputExample("train-2", "a", "b", "neutral"),
    ]
    assert processor.get_dev_examples(str(tmp_path)) == [InputExample("dev-2", "甲", "乙", "entailment")]
    with pytest.raises(ValueError, match="no test set"):
        processor.get_test_examples(str(tmp_path))


def test_tsv_and_csv_name_their_columns_in_the_header(tmp_path):
    _write_tsv(
        tmp_path / "train.tsv", [["id", "label", "text"], ["1", "pos", 'a "quoted" text'], ["2", "neg", "b"]]
    )
    _write_tsv(tmp_path / "test.tsv", [["id", "text"], ["1", "c"]])
    processor = classifier_data.get_processor("tsv", str(tmp_path), text_a_column="text")
    assert processor.get_labels() == ["neg", "pos"]  # sorted
    assert processor.get_train_examples(str(tmp_path))[0] == InputExample(
        "train-1", 'a "quoted" text', None, "pos"
    )
    # A row to predict has no label (the original's placeholder id 0 is given at conversion).
    assert processor.get_test_examples(str(tmp_path)) == [InputExample("test-1", "c", None, None)]
    assert classifier_data.get_processor("tsv", str(tmp_path), labels="pos,neg").get_labels() == [
        "pos",
        "neg",
    ]

    with open(tmp_path / "train.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([["q", "a", "y"], ["Is it, maybe?", 'Yes, "it" is.', "1"]])
    processor = classifier_data.get_processor("CSV", str(tmp_path), "q", "a", "y")
    assert processor.get_train_examples(str(tmp_path)) == [
        InputExample("train-1", "Is it, maybe?", 'Yes, "it" is.', "1")
    ]
    with pytest.raises(ValueError, match=r"train\.csv: no column 'label' \(--label_column\)"):
        classifier_data.get_processor("csv", str(tmp_path), "q", "a").get_train_examples(str(tmp_path))


KNOWN_TASKS = "cola, sst2, mrpc, qqp, stsb, mnli, mnli-mm, qnli, rte, wnli, xnli, tsv, csv"


def test_unknown_task_name_lists_the_known_ones():
    with pytest.raises(ValueError, match=rf"unknown task 'sst9'; known tasks: {KNOWN_TASKS}$"):
        classifier_data.get_processor("sst9")
    with pytest.raises(
        ValueError, match=r"^--task_type: expected one of classification, regression, got 'x'$"
    ):
        classifier_data.get_processor("tsv", task_type="x")
    with pytest.raises(
        ValueError, match=r"^--task_type=regression is for tsv/csv; --task_name=cola has its own$"
    ):
        classifier_data.get_processor("cola", task_type="regression")
    with pytest.raises(
        ValueError, match=r"^--labels: a regression \(--task_type=regression\) has no labels$"
    ):
        classifier_data.get_processor("csv", labels="a,b", task_type="regression")


# GLUE's layouts (https://gluebenchmark.com/tasks, the files of its download): each task's
# train/dev header (dev as train), its test header, a labelled row and a test row.
GLUE_SAMPLES = {
    "sst2": (["sentence", "label"], ["index", "sentence"], ["a fine film ", "1"], ["0", "dull"]),
    "qqp": (
        ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
        ["id", "question1", "question2"],
        ["201359", "303345", "303346", "Why are people so obsessed?", "Why are so many obsessed?", "1"],
        ["0", 'Is it "hot"?', "Is it cold?"],
    ),
    "stsb": (
        [
            "index",
            "genre",
            "filename",
            "year",
            "old_index",
            "source1",
            "source2",
            "sentence1",
            "sentence2",
            "score",
        ],
        ["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1", "sentence2"],
        [
            "0",
            "main-captions",
            "MSRvid",
            "2012test",
            "0001",
            "none",
            "none",
            "A plane.",
            "An air plane.",
            "5.000",
        ],
        ["0", "main-news", "headlines", "2015", "0001", "none", "none", "Man dies.", "Woman lives."],
    ),
    "qnli": (
        ["index", "question", "sentence", "label"],
        ["index", "question", "sentence"],
        ["0", "When?", "In 1850.", "entailment"],
        ["0", "Who?", "Nobody knows."],
    ),
    "rte": (
        ["index", "sentence1", "sentence2", "label"],
        ["index", "sentence1", "sentence2"],
        ["0", "Dana Reeve died.", "Christopher Reeve had an accident.", "not_entailment"],
        ["0", "Mangla was dead.", "Mangla died."],
    ),
    "wnli": (
        ["index", "sentence1", "sentence2", "label"],
        ["index", "sentence1", "sentence2"],
        ["0", "I stuck a pin through a carrot.", "The carrot had a hole.", "1"],
        ["0", "The cat sat.", "It sat."],
    ),
}
GLUE_LABELS = {
    "sst2": (["0", "1"], "SST-2"),
    "qqp": (["0", "1"], "QQP"),
    "stsb": (None, "STS-B"),
    "qnli": (["entailment", "not_entailment"], "QNLI"),
    "rte": (["entailment", "not_entailment"], "RTE"),
    "wnli": (["0", "1"], "WNLI"),
}


@pytest.mark.parametrize("task", GLUE_SAMPLES)
def test_glue_tasks_read_glues_files_columns_and_labels(tmp_path, task):
    header, test_header, row, test_row = GLUE_SAMPLES[task]
    for name in ("train", "dev"):
        _write_tsv(tmp_path / f"{name}.tsv", [header, row])
    _write_tsv(tmp_path / "test.tsv", [test_header, test_row])
    processor = classifier_data.get_processor(task.upper())
    labels, submission_name = GLUE_LABELS[task]
    assert (processor.get_labels(), processor.submission_name) == (labels, submission_name)
    assert processor.is_regression == (labels is None)
    texts = [row[header.index(c)] for c in header if c.startswith(("sentence", "question"))]
    label = row[-1]
    expected = InputExample("train-1", texts[0], texts[1] if len(texts) > 1 else None, label)
    assert processor.get_train_examples(str(tmp_path)) == [expected]
    assert processor.get_dev_examples(str(tmp_path))[0].guid == "dev-1"
    test_texts = [
        test_row[test_header.index(c)] for c in test_header if c.startswith(("sentence", "question"))
    ]
    assert processor.get_test_examples(str(tmp_path)) == [
        InputExample("test-1", test_texts[0], test_texts[1] if len(test_texts) > 1 else None, None)
    ]


def test_qqp_rows_split_by_a_newline_are_skipped_with_a_warning(tmp_path, caplog):
    """GLUE's QQP train.tsv held a question with a newline: the row is cut into two short ones."""
    header, _, row, _ = GLUE_SAMPLES["qqp"]
    cut = ["5", "7", "8", "Was Muhammad"]
    _write_tsv(tmp_path / "train.tsv", [header, row, cut, ["a real figure?", "0"], row])
    with caplog.at_level(logging.WARNING):
        examples = classifier_data.get_processor("qqp").get_train_examples(str(tmp_path))
    assert [e.line_number for e in examples] == [2, 5]
    assert (
        f"{tmp_path / 'train.tsv'}: 2 rows skipped: not 6 columns as the header (the first ends on line 3)"
        in (caplog.text)
    )
    # Elsewhere such a row is still an error.
    _write_tsv(tmp_path / "dev.tsv", [["index", "sentence1", "sentence2", "label"], ["0", "a", "b"]])
    with pytest.raises(ValueError, match=r"dev\.tsv:2: 3 columns, expected 4 \(as the header\)"):
        classifier_data.get_processor("rte").get_dev_examples(str(tmp_path))


def test_mnli_mm_reads_the_mismatched_dev_and_test_sets(tmp_path):
    row = ["4", "p", "q", "genre", "bp1", "bp2", "pa1", "pa2", "premise", "hypothesis"]
    _write_tsv(
        tmp_path / "dev_mismatched.tsv", [row + ["x"] * 5 + ["gold_label"], row + ["x"] * 5 + ["neutral"]]
    )
    _write_tsv(tmp_path / "test_mismatched.tsv", [row, row])
    processor = classifier_data.get_processor("MNLI-MM")
    assert processor.get_labels() == ["contradiction", "entailment", "neutral"]
    assert processor.submission_name == "MNLI-mm"
    assert classifier_data.get_processor("mnli").submission_name == "MNLI-m"
    assert processor.get_dev_examples(str(tmp_path)) == [
        InputExample("dev_mismatched-4", "premise", "hypothesis", "neutral")
    ]
    assert processor.get_test_examples(str(tmp_path)) == [InputExample("test-4", "premise", "hypothesis")]


def test_a_regressions_scores_are_float_label_ids(tmp_path, tokenizer):
    _write_tsv(tmp_path / "train.tsv", [["text", "y"], ["dog", "0.25"], ["cat", "4"]])
    processor = classifier_data.get_processor("tsv", str(tmp_path), "text", None, "y", task_type="regression")
    assert processor.is_regression and processor.get_labels() is None
    examples = processor.get_train_examples(str(tmp_path)) + [InputExample("test-0", "fish")]
    path = str(tmp_path / "train.tf_record")
    classifier_data.file_based_convert_examples_to_features(examples, None, 6, tokenizer, path)
    spec = classifier_data.name_to_features(6, is_regression=True)
    rows = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(path)]
    assert [row["label_ids"].numpy() for row in rows] == [0.25, 4.0, 0.0]  # 0.0: to predict
    assert rows[0]["label_ids"].dtype == tf.float32
    assert list(rows[1]["input_ids"].numpy()) == _ids(["[CLS]", "cat", "[SEP]"]) + [0] * 3
    for bad in ("high", "nan"):
        with pytest.raises(
            ValueError, match=rf"^t\.tsv:3: label '{bad}' is not a number \(a regression's score\)$"
        ):
            classifier_data.check_label(InputExample("g", "a", None, bad, "t.tsv", 3), None)


def test_submission_files_have_glues_columns_and_one_row_per_test_example(tmp_path):
    scores = np.array([4.12345, 0.0, 2.5], np.float32)
    classifier_run.write_submission(scores, str(tmp_path / "STS-B.tsv"))
    with open(tmp_path / "STS-B.tsv", newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    assert rows == [["index", "prediction"], ["0", "4.123"], ["1", "0.000"], ["2", "2.500"]]
    classifier_run.write_submission(["entailment", "not_entailment"], str(tmp_path / "RTE.tsv"))
    assert (tmp_path / "RTE.tsv").read_text() == "index\tprediction\n0\tentailment\n1\tnot_entailment\n"
    # A regression's test_results.tsv holds one score a row; test_predictions.tsv names them.
    classifier_run.write_test_results(scores, str(tmp_path / "test_results.tsv"))
    assert (tmp_path / "test_results.tsv").read_text().splitlines() == ["4.12345", "0.0", "2.5"]
    examples = [InputExample(f"test-{i}", "a") for i in range(3)]
    classifier_run.write_test_predictions(examples, scores, None, str(tmp_path / "test_predictions.tsv"))
    assert (tmp_path / "test_predictions.tsv").read_text().splitlines() == [
        "guid\tscore",
        "test-0\t4.12345",
        "test-1\t0.0",
        "test-2\t2.5",
    ]
    assert sorted(os.listdir(tmp_path)) == [
        "RTE.tsv",
        "STS-B.tsv",
        "test_predictions.tsv",
        "test_results.tsv",
    ]


def test_a_regression_with_windows_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError, match=r"^--doc_stride: --task_name=stsb is a regression"):
        run_classifier(_options(tmp_path, tmp_path, task_name="stsb", doc_stride=8))
    assert not (tmp_path / "out").exists()


def test_row_with_the_wrong_number_of_columns_names_file_and_line(tmp_path):
    header = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
    _write_tsv(tmp_path / "dev.tsv", [header, ["1", "1", "2", "a", "b"], ["0", "3", "a b", "c"]])
    with pytest.raises(ValueError, match=r"dev\.tsv:3: 4 columns, expected 5 \(as the header\)"):
        classifier_data.get_processor("mrpc").get_dev_examples(str(tmp_path))
    _write_tsv(tmp_path / "train.tsv", [["gj04", "1", "", "ok"], ["gj04", "1", "too\tmany", "x"]])
    with pytest.raises(ValueError, match=r"train\.tsv:2: 5 columns, expected 4$"):
        classifier_data.get_processor("cola").get_train_examples(str(tmp_path))


def test_rows_without_the_columns_a_processor_reads_name_file_and_line(tmp_path):
    # Every row as short as the header: the header's line is named, for every processor.
    _write_tsv(tmp_path / "train.tsv", [["Quality", "#1 ID", "#2 ID"], ["1", "11", "12"]])
    with pytest.raises(ValueError, match=r"train\.tsv:1: 3 columns, expected at least 5$"):
        classifier_data.get_processor("mrpc").get_train_examples(str(tmp_path))
    _write_tsv(tmp_path / "dev_matched.tsv", [[str(i) for i in range(10)]] * 2)  # no label column
    with pytest.raises(ValueError, match=r"dev_matched\.tsv:1: 10 columns, expected at least 11$"):
        classifier_data.get_processor("mnli").get_dev_examples(str(tmp_path))
    _write_tsv(tmp_path / "test.tsv", [["index"], ["0"]])
    with pytest.raises(ValueError, match=r"test\.tsv:1: 1 columns, expected at least 2$"):
        classifier_data.get_processor("cola").get_test_examples(str(tmp_path))
    _write_tsv(tmp_path / "multinli" / "multinli.train.zh.tsv", [["premise", "hypo"], ["a", "b"]])
    with pytest.raises(ValueError, match=r"multinli\.train\.zh\.tsv:1: 2 columns, expected at least 3$"):
        classifier_data.get_processor("xnli").get_train_examples(str(tmp_path))
    _write_tsv(tmp_path / "xnli.dev.tsv", [["language", "gold_label", *"abcde"]])
    with pytest.raises(ValueError, match=r"xnli\.dev\.tsv:1: 7 columns, expected at least 8$"):
        classifier_data.get_processor("xnli").get_dev_examples(str(tmp_path))


def test_examples_know_their_file_and_line_and_compare_without_them(tmp_path):
    header = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
    _write_tsv(tmp_path / "dev.tsv", [header, ["1", "1", "2", "a", "b"], ["0", "3", "4", "c", "d"]])
    examples = classifier_data.get_processor("mrpc").get_dev_examples(str(tmp_path))
    dev = str(tmp_path / "dev.tsv")
    assert [(e.input_file, e.line_number) for e in examples] == [(dev, 2), (dev, 3)]
    assert examples[1] == InputExample("dev-2", "c", "d", "0")
    # A quoted CSV field over two lines: the line where the row ends.
    with open(tmp_path / "train.csv", "w", newline="", encoding="utf-8") as f:
        f.write('sentence,label\n"two\nlines",pos\nthree,neg\n')
    examples = classifier_data.get_processor("csv", str(tmp_path)).get_train_examples(str(tmp_path))
    assert [(e.text_a, e.line_number) for e in examples] == [("two\nlines", 3), ("three", 4)]


def _options(tmp_path, data_dir, **changes):
    return ClassifierOptions(
        **dict(
            dict(
                task_name="mrpc",
                data_dir=str(data_dir),
                vocab_file=VOCAB,
                bert_config_file=mf.GOOGLE_TINY_CONFIG,
                init_checkpoint=mf.GOOGLE_TINY_CKPT,
                output_dir=str(tmp_path / "out"),
                max_seq_length=16,
                train_batch_size=1,
                do_train=True,
            ),
            **changes,
        )
    )


def test_the_training_flags_are_read_only_to_train(tmp_path, caplog):
    """As in the original, --num_train_epochs and --warmup_proportion are read only with
    --do_train; a warm-up longer than the training is allowed, as there, with a warning."""
    _options(
        tmp_path, DEMO, do_train=False, do_eval=True, num_train_epochs=0, warmup_proportion=-1
    ).validate()
    with pytest.raises(ValueError, match=r"^--num_train_epochs must be positive, got 0$"):
        _options(tmp_path, DEMO, num_train_epochs=0).validate()
    with pytest.raises(ValueError, match=r"^--warmup_proportion must be 0 or more, got -0.5$"):
        _options(tmp_path, DEMO, warmup_proportion=-0.5).validate()
    with caplog.at_level(logging.WARNING):
        _options(tmp_path, DEMO, warmup_proportion=1.5).validate()
    assert "--warmup_proportion=1.5: the warm-up outlasts the training" in caplog.text


def test_the_flag_checks_come_in_the_originals_order(tmp_path):
    """Case, then the --do_* flags, then the task, as the original's main: each alone was
    already an error, but with two of them the first message named the later one."""
    cased = str(tmp_path / "cased_L-12_H-768_A-12" / "bert_model.ckpt")
    with pytest.raises(ValueError, match=r"^--do_lower_case=True does not match"):
        run_classifier(
            _options(
                tmp_path, DEMO, init_checkpoint=cased, do_lower_case=True, do_train=False, task_name="nope"
            )
        )
    with pytest.raises(ValueError, match=r"^at least one of --do_train"):
        run_classifier(_options(tmp_path, DEMO, do_train=False, task_name="nope"))
    assert not (tmp_path / "out").exists()


def test_export_alone_needs_weights_to_export(tmp_path):
    options = _options(tmp_path, DEMO, do_train=False, init_checkpoint=None, export_dir=str(tmp_path / "e"))
    with pytest.raises(
        ValueError, match=r"^--export_dir alone exports a trained model: give --init_checkpoint"
    ):
        run_classifier(options)
    assert not (tmp_path / "e").exists() and not (tmp_path / "out").exists()


def test_an_unknown_label_names_its_file_and_line_before_anything_is_written(tmp_path, fixtures_dir):
    header = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
    rows = [["1", "1", "2", "a", "b"], ["0", "3", "4", "c", "d"], ["1", "5", "6", "e", "f"]]
    _write_tsv(tmp_path / "train.tsv", [header, *rows, ["2", "7", "8", "g", "h"]])
    with pytest.raises(
        ValueError, match=r"^.*/train\.tsv:5: label '2' is not one of the labels \['0', '1'\]$"
    ):
        run_classifier(_options(tmp_path, tmp_path))
    # In the dev set, after a good training file: still nothing written.
    _write_tsv(tmp_path / "train.tsv", [header, *rows])
    _write_tsv(tmp_path / "dev.tsv", [header, ["x", "1", "2", "a", "b"]])
    with pytest.raises(ValueError, match=r"^.*/dev\.tsv:2: label 'x' is not one of the labels \['0', '1'\]$"):
        run_classifier(_options(tmp_path, tmp_path, do_eval=True))
    # --task_name=tsv with --labels.
    _write_tsv(tmp_path / "train.tsv", [["sentence", "label"], ["a", "pos"], ["b", "neutral"]])
    with pytest.raises(
        ValueError, match=r"^.*/train\.tsv:3: label 'neutral' is not one of the labels \['pos', 'neg'\]$"
    ):
        run_classifier(_options(tmp_path, tmp_path, task_name="tsv", labels="pos,neg"))
    assert not (tmp_path / "out").exists()


def test_no_training_step_names_the_file_and_a_failed_run_leaves_no_output_dir(tmp_path, fixtures_dir):
    _write_tsv(tmp_path / "train.tsv", [])
    with pytest.raises(
        ValueError,
        match=r"^.*/train\.tsv: 0 training examples with --train_batch_size=8 and "
        r"--num_train_epochs=0\.1 give no training step$",
    ):
        run_classifier(_options(tmp_path, tmp_path, train_batch_size=8, num_train_epochs=0.1))
    with pytest.raises(ValueError, match=r"^/nope/train\.tsv: no such file$"):
        run_classifier(_options(tmp_path, "/nope"))
    _write_tsv(tmp_path / "dev.tsv", [])
    with pytest.raises(ValueError, match=rf"^--data_dir={tmp_path}: the dev set has no examples$"):
        run_classifier(_options(tmp_path, tmp_path, do_train=False, do_eval=True))
    assert not (tmp_path / "out").exists()


def test_a_finished_training_is_reported_in_terms_of_num_train_epochs(tmp_path, fixtures_dir, caplog):
    output_dir = tmp_path / "out"
    output_dir.mkdir()
    ff.write_original_finetuned_checkpoint(str(output_dir / "model.ckpt-18"), 2, 18, seed=3)
    (output_dir / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-18"\n')
    # 96 examples / 16 * 3 epochs = 18 steps: done.
    options = _options(tmp_path, DEMO, train_batch_size=16, num_train_epochs=3.0)
    with caplog.at_level(logging.INFO):
        assert run_classifier(options)["train"] == {"global_step": 18}
    messages = [r.getMessage() for r in caplog.records]
    assert (
        "Step 18 already reaches the 18 steps of --num_train_epochs=3.0 (96 examples, "
        "--train_batch_size=16): nothing to train"
    ) in messages
    assert not [m for m in messages if "--num_train_steps" in m]


# -- features --------------------------------------------------------------------------------


def test_pair_truncation_drops_from_the_longer_then_from_b(tokenizer):
    # 5 + 4 pieces for 10 - 3 = 7 slots: a (longer) loses "jumps", then b (as long) loses "dog".
    example = InputExample("g", "The quick brown fox jumps", "over the lazy dog", "1")
    feature = classifier_data.convert_single_example(0, example, ["0", "1"], 10, tokenizer)
    tokens = ["[CLS]", "the", "quick", "brown", "fox", "[SEP]", "over", "the", "lazy", "[SEP]"]
    assert feature.input_ids == _ids(tokens)
    assert feature.input_mask == [1] * 10
    assert feature.segment_ids == [0] * 6 + [1] * 4
    assert (feature.label_id, feature.is_real_example) == (1, True)


def test_unk_accents_cjk_and_single_sentence_truncation(tokenizer):
    # Uncased: accents stripped; CJK characters split one by one, 爱 is not in the vocabulary;
    # ☃ is neither a word nor a piece of the vocabulary.
    example = InputExample("g", "Café Müller ☃", "我爱北京", "0")
    feature = classifier_data.convert_single_example(0, example, ["0", "1"], 14, tokenizer)
    tokens = ["[CLS]", "cafe", "muller", "[UNK]", "[SEP]", "我", "[UNK]", "北", "京", "[SEP]"]
    assert feature.input_ids == _ids(tokens) + [0] * 4
    assert feature.input_mask == [1] * 10 + [0] * 4
    assert feature.segment_ids == [0] * 5 + [1] * 5 + [0] * 4

    single = InputExample("g", "the quick brown fox jumps", None, "0")
    feature = classifier_data.convert_single_example(0, single, ["0", "1"], 5, tokenizer)
    assert feature.input_ids == _ids(["[CLS]", "the", "quick", "brown", "[SEP]"])
    assert feature.segment_ids == [0] * 5


def test_text_b_without_tokens_is_a_single_sentence_and_bad_labels_fail(tokenizer):
    # A zero-width space (Cf) is dropped by the tokenizer: no tokens_b, so no second [SEP].
    feature = classifier_data.convert_single_example(
        0, InputExample("g", "dog", "\u200b", "0"), ["0", "1"], 5, tokenizer
    )
    assert feature.input_ids == _ids(["[CLS]", "dog", "[SEP]"]) + [0, 0]
    padding = classifier_data.convert_single_example(
        0, classifier_data.PaddingInputExample(), ["0", "1"], 4, tokenizer
    )
    assert (padding.input_ids, padding.input_mask, padding.label_id, padding.is_real_example) == (
        [0] * 4,
        [0] * 4,
        0,
        False,
    )
    with pytest.raises(ValueError, match=r"dev-3: label '2' is not one of the labels \['0', '1'\]"):
        classifier_data.convert_single_example(
            0, InputExample("dev-3", "a", None, "2"), ["0", "1"], 5, tokenizer
        )


def test_records_hold_the_originals_features_one_per_example(tmp_path, tokenizer):
    examples = [InputExample("a", "dog", None, "1"), InputExample("b", "cat", "dog", "0")]
    examples = classifier_run._pad_for_tpu(examples, 4)  # what --use_tpu adds
    path = str(tmp_path / "eval.tf_record")
    assert (
        classifier_data.file_based_convert_examples_to_features(examples, ["0", "1"], 6, tokenizer, path) == 4
    )
    records = [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(path)]
    features = [{k: list(v.int64_list.value) for k, v in r.features.feature.items()} for r in records]
    assert [sorted(f) for f in features] == [
        ["input_ids", "input_mask", "is_real_example", "label_ids", "segment_ids"]
    ] * 4
    assert [f["label_ids"] + f["is_real_example"] for f in features] == [[1, 1], [0, 1], [0, 0], [0, 0]]
    assert features[1]["input_ids"] == _ids(["[CLS]", "cat", "[SEP]", "dog", "[SEP]"]) + [0]
    assert features[3]["input_ids"] == [0] * 6


# -- model ---------------------------------------------------------------------------------------


def test_head_is_top_level_output_weights_and_bias_with_dropout_in_training(fixtures_dir):
    config = BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG)
    config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.0
    model = BertClassifier(config, 3)
    shapes = {w.path: tuple(w.shape) for w in model.weights}
    assert shapes["output_weights"] == (3, 128) and shapes["output_bias"] == (3,)
    assert [p for p in shapes if not p.startswith("bert/")] == ["output_weights", "output_bias"]
    ids = np.array([[101, 3899, 102, 0]], np.int32)
    inputs = {"input_ids": ids, "input_mask": np.array([[1, 1, 1, 0]], np.int32), "segment_ids": 0 * ids}
    assert model.dropout.rate == 0.1
    evaluation = model(inputs)["logits"].numpy()
    np.testing.assert_array_equal(model(inputs)["logits"].numpy(), evaluation)
    # With the encoder's dropout off, training changes the logits only through the head's dropout.
    assert not np.allclose(model(inputs, training=True)["logits"].numpy(), evaluation)


# -- a checkpoint of the original's run_classifier -----------------------------------------------


def test_predicting_from_a_checkpoint_without_the_head_warns_that_it_is_random(tmp_path, caplog):
    """A pretrained checkpoint as --init_checkpoint of a prediction: the classifier's head is
    not in it, so the predictions come from random weights (the original is silent)."""
    options = _options(tmp_path, DEMO, do_train=False, do_predict=True, max_seq_length=32)
    with caplog.at_level(logging.WARNING):
        run_classifier(options)
    assert f"{mf.GOOGLE_TINY_CKPT} has no output_weights, output_bias: they are random" in caplog.text, (
        caplog.text
    )
    assert os.path.exists(os.path.join(options.output_dir, "test_results.tsv"))


def test_a_checkpoint_in_the_originals_layout_predicts_and_evaluates(tmp_path):
    """From --init_checkpoint when --output_dir has no checkpoint (global_step 0, as the
    Estimator's initialisation), else from the latest there; both against float64 NumPy."""
    prefix = str(tmp_path / "original" / "model.ckpt-1234")
    weights = ff.write_original_finetuned_checkpoint(prefix, 2, 1234, seed=3)
    options = ClassifierOptions(
        task_name="mrpc",
        data_dir=DEMO,
        vocab_file=VOCAB,
        bert_config_file=mf.GOOGLE_TINY_CONFIG,
        output_dir=str(tmp_path / "from_init"),
        init_checkpoint=prefix,
        max_seq_length=32,
        do_eval=True,
        do_predict=True,
        eval_batch_size=6,  # 32 dev examples: 5 full batches and one of 2 real rows
        predict_batch_size=5,  # 16 test examples: the last batch has 1 real row
    )
    results = run_classifier(options)
    probabilities, _ = ff.reference_probabilities(
        weights, str(tmp_path / "from_init" / "predict.tf_record"), 32
    )
    np.testing.assert_allclose(results["predict"], probabilities, rtol=0, atol=2e-6)
    lines = (tmp_path / "from_init" / "test_results.tsv").read_text().splitlines()
    np.testing.assert_allclose(
        [[float(p) for p in line.split("\t")] for line in lines], probabilities, atol=2e-6
    )
    # The same with a header, each example's guid and the predicted label's name.
    header, *rows = [
        line.split("\t")
        for line in (tmp_path / "from_init" / "test_predictions.tsv").read_text().splitlines()
    ]
    assert header == ["guid", "label", "0", "1"]
    guids = [example.guid for example in classifier_data.get_processor("mrpc").get_test_examples(DEMO)]
    assert [row[0] for row in rows] == guids and len(guids) == 16
    assert [row[1] for row in rows] == [str(np.argmax(p)) for p in probabilities]
    np.testing.assert_allclose([[float(p) for p in row[2:]] for row in rows], probabilities, atol=2e-6)

    expected = ff.eval_reference(weights, str(tmp_path / "from_init" / "eval.tf_record"), 32, 6)
    got = dict(
        line.split(" = ") for line in (tmp_path / "from_init" / "eval_results.txt").read_text().splitlines()
    )
    assert list(got) == ["eval_accuracy", "eval_f1", "eval_loss", "global_step", "loss"]
    assert got["global_step"] == "0"
    for key, value in expected.items():
        assert float(got[key]) == pytest.approx(value, abs=1e-5), key
    # MRPC's F1 of class 1, against scikit-learn's on the reference's predictions.
    eval_probabilities, eval_labels = ff.reference_probabilities(
        weights, str(tmp_path / "from_init" / "eval.tf_record"), 32
    )
    f1 = sklearn.metrics.f1_score(eval_labels, eval_probabilities.argmax(-1))
    assert float(got["eval_f1"]) == pytest.approx(f1, abs=1e-6)
    # GLUE's submission file: a header, then each test example's index and label.
    submission = (tmp_path / "from_init" / "MRPC.tsv").read_text().splitlines()
    assert submission == ["index\tprediction"] + [f"{i}\t{np.argmax(p)}" for i, p in enumerate(probabilities)]
    # `loss` is the mean of the batch means (the last batch's mean over its 2 real rows).
    assert float(got["loss"]) != pytest.approx(float(got["eval_loss"]), abs=1e-4)

    # The same checkpoint as the latest in --output_dir wins over --init_checkpoint.
    output_dir = tmp_path / "in_output_dir"
    shutil.copytree(tmp_path / "original", output_dir)
    (output_dir / "checkpoint").write_text(
        'model_checkpoint_path: "model.ckpt-1234"\nall_model_checkpoint_paths: "model.ckpt-1234"\n'
    )
    options.output_dir, options.init_checkpoint = str(output_dir), mf.GOOGLE_TINY_CKPT
    results = run_classifier(options)
    np.testing.assert_allclose(results["predict"], probabilities, rtol=0, atol=2e-6)
    assert results["eval"]["global_step"] == 1234

    # --export_dir alone (no --do_*): the model of --output_dir exported, nothing else run.
    options.do_eval = options.do_predict = False
    options.export_dir = str(tmp_path / "export")
    results = run_classifier(options)
    assert results == {"train": None, "eval": None, "predict": None, "export": str(tmp_path / "export" / "1")}
    import tensorflow_text  # noqa: F401  (the text signatures' ops)

    with open(os.path.join(DEMO, "test.tsv"), encoding="utf-8") as f:
        tests = [line.rstrip("\n").split("\t") for line in f][1:]
    served = tf.saved_model.load(results["export"]).signatures["text_pair"](
        text_a=tf.constant([row[3] for row in tests]), text_b=tf.constant([row[4] for row in tests])
    )
    np.testing.assert_allclose(served["probabilities"].numpy(), probabilities, rtol=0, atol=1e-5)


def test_a_truncated_checkpoint_is_an_error_before_any_feature_is_written(tmp_path):
    """It was reported only when the weights were loaded, after train.tf_record was written."""
    directory = tmp_path / "truncated"
    shutil.copytree(mf.GOOGLE_TINY, directory)
    data = directory / "bert_model.ckpt.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    with pytest.raises(ValueError, match=r"bert_model\.ckpt: checkpoint is truncated: its data files hold"):
        run_classifier(_options(tmp_path, DEMO, init_checkpoint=str(directory / "bert_model.ckpt")))
    assert not (tmp_path / "out").exists()
    # Any path of the checkpoint names it: its prefix, directory, .index or .data file.
    for path in (directory, data, str(data).replace(".data-00000-of-00001", ".index")):
        with pytest.raises(ValueError, match="checkpoint is truncated"):
            run_classifier(_options(tmp_path, DEMO, init_checkpoint=str(path)))


def test_bytes_that_are_not_utf8_are_dropped_with_a_warning_naming_file_line_and_count(tmp_path, caplog):
    rows = [b"sentence\tlabel\n", b"good\tpos\n", b"caf\xe9\tneg\n", b"fine\tpos\n", b"bad \xff\xfe\tneg\n"]
    (tmp_path / "train.tsv").write_bytes(b"".join(rows))
    with caplog.at_level("WARNING"):
        examples = classifier_data.get_processor("tsv", str(tmp_path)).get_train_examples(str(tmp_path))
    assert [example.text_a for example in examples] == ["good", "caf", "fine", "bad "]
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    path = tmp_path / "train.tsv"
    assert warnings == [
        f"{path}: 2 lines are not UTF-8 (the first is line 3); their invalid bytes are dropped"
    ]


def test_an_example_to_predict_without_a_label_is_logged_without_one(tokenizer, caplog):
    example = InputExample("test-0", "the dog", None, None)  # a tsv/csv row without a label column
    with caplog.at_level("INFO"):
        feature = classifier_data.convert_single_example(0, example, ["negative", "positive"], 8, tokenizer)
    assert feature.label_id == 0  # the original's placeholder
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "label: none (an example to predict)" in logged and "negative" not in logged


# -- the tool end to end ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained(tmp_path_factory, fixtures_dir):
    """tools/run_classifier.py on the bundled keyword task, its dev set replaced by the training
    set (accuracy on its own training data), from google_tiny's random weights.
    These settings reached accuracy 1.0 for each of 16 seeds (and 6 with XLA); at 1e-3 and 10
    epochs 2 seeds of 8 stayed at chance."""
    workdir = tmp_path_factory.mktemp("classifier")
    data_dir = workdir / "data"
    shutil.copytree(DEMO, data_dir)
    shutil.copy(data_dir / "train.tsv", data_dir / "dev.tsv")
    output_dir = workdir / "output"
    args = [
        TOOL,
        "--task_name=MRPC",
        f"--data_dir={data_dir}",
        f"--vocab_file={VOCAB}",
        f"--bert_config_file={mf.GOOGLE_TINY_CONFIG}",
        f"--init_checkpoint={mf.GOOGLE_TINY_CKPT}",
        f"--output_dir={output_dir}",
        f"--export_dir={workdir / 'export'}",
        "--do_train",
        "--do_eval",
        "--do_predict",
        "--max_seq_length=24",
        "--train_batch_size=16",
        "--learning_rate=3e-4",
        "--num_train_epochs=15",
        "--iterations_per_loop=30",
        "--seed=1",
    ]
    result = tool_runs.run([sys.executable, *args], cwd=REPO, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return workdir, output_dir, result.stderr


def test_learns_the_keyword_task_to_90_percent_on_its_training_set(trained):
    _, output_dir, _ = trained
    got = dict(line.split(" = ") for line in (output_dir / "eval_results.txt").read_text().splitlines())
    assert list(got) == ["eval_accuracy", "eval_f1", "eval_loss", "global_step", "loss"]
    assert got["global_step"] == str(int(96 / 16 * 15))  # the original's step arithmetic
    assert float(got["eval_accuracy"]) >= 0.9, got
    # The same results for TensorBoard in <output_dir>/eval, under the same names.
    events = [
        event
        for path in tf.io.gfile.glob(str(output_dir / "eval" / "events.out.tfevents.*"))
        for event in tf.compat.v1.train.summary_iterator(path)
    ]
    scalars = {value.tag: float(tf.make_ndarray(value.tensor)) for e in events for value in e.summary.value}
    assert scalars.keys() == {"eval_accuracy", "eval_f1", "eval_loss", "loss"}
    assert scalars["eval_accuracy"] == pytest.approx(float(got["eval_accuracy"]), rel=1e-6)
    assert {e.step for e in events if e.summary.value} == {int(got["global_step"])}


def test_writes_one_record_per_example_and_one_result_row_per_test_example(trained):
    _, output_dir, _ = trained
    for name, count in (("train", 96), ("eval", 96), ("predict", 16)):
        records = list(tf.data.TFRecordDataset(str(output_dir / f"{name}.tf_record")))
        assert len(records) == count, name
    rows = [line.split("\t") for line in (output_dir / "test_results.tsv").read_text().splitlines()]
    assert len(rows) == 16 and all(len(row) == 2 for row in rows)
    np.testing.assert_allclose([sum(map(float, row)) for row in rows], 1.0, atol=1e-6)
    names = tf.train.load_checkpoint(str(output_dir / "model.ckpt-90")).get_variable_to_shape_map()
    assert {
        "output_weights",
        "output_bias",
        "output_weights/adam_m",
        "output_bias/adam_v",
        "global_step",
    } <= set(names)


def test_exported_text_pair_signature_gives_the_tools_probabilities(trained):
    import tensorflow_text  # noqa: F401  (the text signatures' ops)

    workdir, output_dir, _ = trained
    loaded = tf.saved_model.load(str(workdir / "export" / "1"))
    with open(os.path.join(DEMO, "test.tsv"), encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    outputs = loaded.signatures["text_pair"](
        text_a=tf.constant([row[3] for row in rows]), text_b=tf.constant([row[4] for row in rows])
    )
    expected = [
        [float(p) for p in line.split("\t")]
        for line in (output_dir / "test_results.tsv").read_text().splitlines()
    ]
    np.testing.assert_allclose(outputs["probabilities"].numpy(), expected, rtol=0, atol=1e-6)
    # The name of the most probable class, of MRPC's labels "0" and "1".
    assert [label.decode() for label in outputs["label"].numpy()] == [str(np.argmax(row)) for row in expected]
    single = loaded.signatures["text"](text=tf.constant([rows[0][3]]))
    assert single["probabilities"].shape == (1, 2) and single["label"].shape == (1,)


def test_query_saved_model_answers_as_the_tool_did_naming_each_probability(trained, capsys):
    from bert_tf.export.query import QueryOptions, run_query

    workdir, output_dir, _ = trained
    with open(os.path.join(DEMO, "test.tsv"), encoding="utf-8") as f:
        row = [line.rstrip("\n").split("\t") for line in f][1]
    got = run_query(QueryOptions(export_dir=str(workdir / "export"), text=row[3], text_b=row[4]))
    expected = [float(p) for p in (output_dir / "test_results.tsv").read_text().splitlines()[0].split("\t")]
    # Printed as returned: the output names sorted, each probability under its label, in
    # MRPC's order of the original's labels, "0" then "1".
    printed = json.loads(capsys.readouterr().out)
    assert printed == got and list(printed) == ["label", "probabilities"]
    assert list(printed["probabilities"]) == list(got["probabilities"]) == ["0", "1"]
    np.testing.assert_allclose(list(got["probabilities"].values()), expected, rtol=0, atol=1e-6)
    assert got["label"] == str(np.argmax(expected))  # a string output of one example


def test_the_labels_travel_with_the_model_to_the_export_and_to_hugging_face(trained, tmp_path):
    """labels.txt (MRPC's labels of the original, in order) in --output_dir and in the export's
    assets.extra; convert_checkpoint.py --hf_output_dir from --output_dir finds it without
    --labels_file, so the HF model's id2label are the task's labels, not HF's LABEL_0, LABEL_1."""
    workdir, output_dir, _ = trained
    assert (output_dir / "labels.txt").read_text() == "0\n1\n"
    assert (workdir / "export" / "1" / "assets.extra" / "labels.txt").read_text() == "0\n1\n"
    args = [
        os.path.join(REPO, "tools", "convert_checkpoint.py"),
        f"--bert_config_file={mf.GOOGLE_TINY_CONFIG}",
        f"--init_checkpoint={output_dir}",
        f"--vocab_file={VOCAB}",
        "--do_lower_case=true",
        f"--hf_output_dir={tmp_path / 'hf'}",
    ]
    result = tool_runs.run([sys.executable, *args], cwd=REPO, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    with open(tmp_path / "hf" / "config.json", encoding="utf-8") as f:
        config = json.load(f)
    assert config["architectures"] == ["BertForSequenceClassification"]
    assert config["id2label"] == {"0": "0", "1": "1"} and config["label2id"] == {"0": 0, "1": 1}


def test_other_labels_than_those_trained_in_the_output_dir_are_an_error(trained):
    """The head's outputs are positions: MNLI's labels would rename MRPC's predictions."""
    _, output_dir, _ = trained
    options = ClassifierOptions(
        task_name="mnli",
        data_dir=DEMO,
        vocab_file=VOCAB,
        bert_config_file=mf.GOOGLE_TINY_CONFIG,
        output_dir=str(output_dir),
        max_seq_length=24,
        do_predict=True,
    )
    with pytest.raises(
        ValueError,
        match=r"^the labels \(contradiction,entailment,neutral\) are not those the model in --output_dir "
        r"was trained on, in their order \(0,1, from .*labels\.txt\)",
    ):
        run_classifier(options)


def test_a_rerun_with_another_batch_size_continues_with_the_input_afresh(trained, caplog):
    """The saved input position belongs to the records and batch it was saved with: a rerun
    with another batch size (whose iterator would not take it) starts its input afresh. The
    rerun continues the tool's training (`trained`: batch 16, saved at step 90) in its
    --output_dir, on the same records and seed, with batch 8; it keeps that run's checkpoint
    and results, which the tests above read."""
    workdir, output_dir, _ = trained
    assert tf.train.latest_checkpoint(str(output_dir)) == str(output_dir / "model.ckpt-90")
    rerun = ClassifierOptions(
        task_name="mrpc",
        data_dir=str(workdir / "data"),
        vocab_file=VOCAB,
        bert_config_file=mf.GOOGLE_TINY_CONFIG,
        init_checkpoint=mf.GOOGLE_TINY_CKPT,
        output_dir=str(output_dir),
        max_seq_length=24,
        train_batch_size=8,
        learning_rate=3e-4,
        num_train_epochs=8.0,
        seed=1,
        do_train=True,
    )
    with caplog.at_level(logging.INFO):
        assert run_classifier(rerun)["train"]["global_step"] == 96  # 96 examples / 8 * 8
    messages = [r.getMessage() for r in caplog.records]
    differs = [m for m in messages if m.startswith("The input differs from the one")]
    assert differs
    assert not any(m.startswith("Resumed the input") for m in messages)
    # The descriptions differ in the batch size alone: the records, shapes and seed are the same.
    saved, now = (json.loads(d) for d in re.search(r"\((\{.*\}), now (\{.*\})\)", differs[0]).groups())
    assert (saved.pop("batch_size"), now.pop("batch_size")) == (16, 8) and saved == now
    assert (output_dir / "model.ckpt-90.index").exists()


def test_tool_reports_an_unknown_task_in_one_line(tmp_path, fixtures_dir):
    common = [
        f"--vocab_file={VOCAB}",
        f"--bert_config_file={mf.GOOGLE_TINY_CONFIG}",
        f"--output_dir={tmp_path / 'o'}",
    ]
    result = tool_runs.run(
        [sys.executable, TOOL, "--task_name=QQQ", f"--data_dir={DEMO}", "--do_train", *common], cwd=REPO
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: --task_name: unknown task 'QQQ'; known tasks: {KNOWN_TASKS}"
    )


# -- long texts as windows (--doc_stride) -------------------------------------------------------

# 14 words of one WordPiece each: with --max_seq_length=8 (windows of 6) and --doc_stride=4, the
# windows start at 0, 4 and 8, the last one reaching the end.
LONG_TEXT = "the cat sat on a mat and ate fish with one dog near two"
LONG_WINDOWS = [(0, 6), (4, 6), (8, 6)]


def test_windows_of_a_text_and_of_a_pair_carry_its_label(tokenizer):
    words = LONG_TEXT.split()
    features = classifier_data.convert_example_to_windows(
        InputExample("g", LONG_TEXT, None, "1"), ["0", "1"], 8, 4, tokenizer
    )
    assert [f.input_ids for f in features] == [
        _ids(["[CLS]", *words[start : start + length], "[SEP]"]) for start, length in LONG_WINDOWS
    ]
    assert [(f.label_id, f.input_mask, f.segment_ids) for f in features] == [(1, [1] * 8, [0] * 8)] * 3
    # A pair: text_a whole in every window, text_b in windows of 8 - 2 - 3 = 3 pieces.
    features = classifier_data.convert_example_to_windows(
        InputExample("g", "dog cat", "a b c d e", "0"), ["0", "1"], 8, 2, tokenizer
    )
    assert [f.input_ids for f in features] == [
        _ids(["[CLS]", "dog", "cat", "[SEP]", *b, "[SEP]"]) for b in (["a", "b", "c"], ["c", "d", "e"])
    ]
    assert features[1].segment_ids == [0, 0, 0, 0, 1, 1, 1, 1]
    # A text that fits is today's one feature; an empty one is [CLS] [SEP].
    for text in ("dog cat", ""):
        today = classifier_data.convert_single_example(
            0, InputExample("g", text, None, "0"), ["0", "1"], 8, tokenizer
        )
        assert classifier_data.convert_example_to_windows(
            InputExample("g", text, None, "0"), ["0", "1"], 8, 4, tokenizer
        ) == [today]
    with pytest.raises(ValueError, match=r"^dev\.tsv:4: text_a has 5 WordPieces, which leave no room"):
        classifier_data.convert_example_to_windows(
            InputExample("g", "a b c d e", "f", "0", "dev.tsv", 4), ["0", "1"], 8, 2, tokenizer
        )


def _classifier_reference(weights, windows_ids):
    """Float64 probabilities of the original's classifier on single-text windows of 8."""
    input_ids = np.zeros((len(windows_ids), 8), np.int32)
    for row, ids in enumerate(windows_ids):
        input_ids[row, : len(ids)] = ids
    mask = (input_ids != 0).astype(np.int32)
    config = BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG)
    pooled = reference.reference_forward(weights, config, input_ids, mask, np.zeros_like(input_ids))[
        "pooled_output"
    ]
    logits = pooled @ weights["output_weights"].astype(np.float64).T + weights["output_bias"]
    return reference.softmax(logits)


def _window_options(tmp_path, data_dir, **changes):
    return ClassifierOptions(
        **dict(
            dict(
                task_name="tsv",
                data_dir=str(data_dir),
                labels="0,1",
                vocab_file=VOCAB,
                bert_config_file=mf.GOOGLE_TINY_CONFIG,
                output_dir=str(tmp_path / "out"),
                max_seq_length=8,
                doc_stride=4,
                eval_batch_size=2,
                predict_batch_size=2,
            ),
            **changes,
        )
    )


def test_long_texts_train_as_windows_and_pool_their_probabilities_per_text(tmp_path):
    """Training counts windows, each with its text's label; eval and predict pool the windows'
    probabilities per text (mean, then max), one row per text, against the float64 reference
    of the trained checkpoint on the windows cut and read by hand."""
    texts = [(LONG_TEXT, "1"), ("dog near trees", "0"), ("two fish", "1")]
    for name in ("train", "dev", "test"):
        _write_tsv(tmp_path / "data" / f"{name}.tsv", [["sentence", "label"], *texts])
    prefix = str(tmp_path / "original" / "model.ckpt-0")
    ff.write_original_finetuned_checkpoint(prefix, 2, 0, seed=5)
    options = _window_options(
        tmp_path,
        tmp_path / "data",
        init_checkpoint=prefix,
        do_train=True,
        do_eval=True,
        do_predict=True,
        train_batch_size=2,
        num_train_epochs=1.0,
        learning_rate=1e-4,
    )
    results = run_classifier(options)
    out = tmp_path / "out"
    # 3 + 1 + 1 windows: int(5 / 2 * 1) steps, one record per window.
    assert results["train"]["global_step"] == 2
    assert len(list(tf.data.TFRecordDataset(str(out / "train.tf_record")))) == 5

    weights = reference.load_checkpoint_weights(tf.train.latest_checkpoint(str(out)))
    words = LONG_TEXT.split()
    windows = [_ids(["[CLS]", *words[s : s + n], "[SEP]"]) for s, n in LONG_WINDOWS]
    short = [_ids(["[CLS]", *text.split(), "[SEP]"]) for text, _ in texts[1:]]
    probabilities = _classifier_reference(weights, windows + short)
    mean = np.array([probabilities[:3].mean(axis=0), probabilities[3], probabilities[4]])
    np.testing.assert_allclose(results["predict"], mean, atol=2e-6)
    rows = [line.split("\t") for line in (out / "test_results.tsv").read_text().splitlines()]
    np.testing.assert_allclose(np.array(rows, float), mean, atol=2e-6)
    header, *rows = [line.split("\t") for line in (out / "test_predictions.tsv").read_text().splitlines()]
    assert [row[:2] for row in rows] == [[f"test-{i}", str(np.argmax(p))] for i, p in enumerate(mean, 1)]

    # eval_accuracy and eval_loss over the 3 texts; loss (the batch losses' mean) over windows.
    labels = np.array([1, 0, 1])
    got = dict(line.split(" = ") for line in (out / "eval_results.txt").read_text().splitlines())
    assert list(got) == ["eval_accuracy", "eval_loss", "global_step", "loss"]
    assert float(got["eval_accuracy"]) == pytest.approx(np.mean(mean.argmax(-1) == labels), abs=1e-6)
    assert float(got["eval_loss"]) == pytest.approx(-np.log(mean[np.arange(3), labels]).mean(), abs=1e-5)
    nll = -np.log(probabilities[np.arange(5), [1, 1, 1, 0, 1]])
    assert float(got["loss"]) == pytest.approx(np.mean([nll[:2].mean(), nll[2:4].mean(), nll[4]]), abs=1e-5)

    # --window_pooling=max: each label's largest probability over the windows.
    options = _window_options(tmp_path, tmp_path / "data", do_predict=True, window_pooling="max")
    biggest = np.array([probabilities[:3].max(axis=0), probabilities[3], probabilities[4]])
    np.testing.assert_allclose(run_classifier(options)["predict"], biggest, atol=2e-6)


def test_texts_that_fit_in_one_window_give_todays_results(tmp_path):
    """The keyword task's pairs fit in 48 tokens: with --doc_stride each is one window, and the
    probabilities, test_results.tsv and eval_results.txt are those without it."""
    prefix = str(tmp_path / "original" / "model.ckpt-7")
    ff.write_original_finetuned_checkpoint(prefix, 2, 7, seed=4)
    written = []
    for doc_stride in (None, 3):
        output_dir = tmp_path / f"out_{doc_stride}"
        options = ClassifierOptions(
            task_name="mrpc",
            data_dir=DEMO,
            vocab_file=VOCAB,
            bert_config_file=mf.GOOGLE_TINY_CONFIG,
            init_checkpoint=prefix,
            output_dir=str(output_dir),
            max_seq_length=48,
            do_eval=True,
            do_predict=True,
            doc_stride=doc_stride,
        )
        results = run_classifier(options)
        test_results = [
            [float(p) for p in line.split("\t")]
            for line in (output_dir / "test_results.tsv").read_text().splitlines()
        ]
        eval_results = dict(
            line.split(" = ") for line in (output_dir / "eval_results.txt").read_text().splitlines()
        )
        assert len(list(tf.data.TFRecordDataset(str(output_dir / "predict.tf_record")))) == 16  # none split
        written.append((results["predict"], test_results, eval_results))
    # The same examples batched otherwise (the windows' batches): the same numbers to float32's
    # rounding, not to the bit on every CPU's kernels (Eigen's AVX-512 and AVX2 matmuls differ).
    (predict, test_results, eval_results), (windowed, windowed_results, windowed_eval) = written
    np.testing.assert_allclose(windowed, predict, rtol=0, atol=1e-5)
    np.testing.assert_allclose(windowed_results, test_results, rtol=0, atol=1e-5)
    assert (
        list(windowed_eval)
        == list(eval_results)
        == ["eval_accuracy", "eval_f1", "eval_loss", "global_step", "loss"]
    )
    assert windowed_eval["global_step"] == eval_results["global_step"]
    for name in ("eval_accuracy", "eval_f1", "eval_loss", "loss"):
        assert float(windowed_eval[name]) == pytest.approx(float(eval_results[name]), abs=1e-5), name


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(doc_stride=0), "--doc_stride must be at least 1, got 0"),
        (dict(window_pooling="sum"), "--window_pooling: expected one of mean, max, got 'sum'"),
    ],
)
def test_bad_window_flags_are_one_line_errors_before_anything_is_written(tmp_path, changes, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        run_classifier(
            _window_options(tmp_path, DEMO, task_name="mrpc", labels=None, do_predict=True, **changes)
        )
    assert not (tmp_path / "out").exists()
