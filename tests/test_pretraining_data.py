"""create_pretraining_data: the original's output, bad input, scale mode's statistics, progress,
warnings and the tool's flags."""

import dataclasses
import gzip
import io
import json
import logging
import os
import pathlib
import re
import subprocess
import sys

import pytest

from bert_tf import progress
from bert_tf.data import (
    CreatePretrainingDataOptions,
    PretrainingDataOptions,
    create_pretraining_data,
    pipeline,
    shards,
)
from bert_tf.data.examples import ExampleEncoder, RecordWriter
from bert_tf.text.tokenization import FullTokenizer
from tests import pretraining_fixtures as pf
from tests import tool_runs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORIGINAL_WWM = os.path.join(REPO, "tests", "data", "original_wwm_s7.tfrecord")


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def options(**overrides):
    return PretrainingDataOptions(**dict(pf.FIXTURE_ARGS, **overrides))


def test_tool_reproduces_the_original_output(fixtures_dir, tmp_path):
    output = tmp_path / "out.tfrecord"
    flags = [f"--{k}={v}" for k, v in pf.FIXTURE_ARGS.items()]
    result = tool_runs.run(
        [
            sys.executable,
            os.path.join(REPO, "tools", "create_pretraining_data.py"),
            f"--input_file={pf.SAMPLE_TEXT}",
            f"--output_file={output}",
            *flags,
        ],
        cwd=REPO,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Wrote 60 instances from 3 documents" in result.stdout
    assert "32 random (53.3% random)" in result.stdout
    assert pf.read_records(str(output)) == pf.fixture_records()
    # The original under the pure-Python protobuf backend (see the fixture's README): same bytes.
    assert read_bytes(output) == read_bytes(os.path.join(pf.DATA_DIR, "sample_s12345.tfrecord"))
    assert os.listdir(tmp_path) == ["out.tfrecord"]  # no temporary file left behind


def test_a_document_continues_across_input_files(fixtures_dir, tmp_path):
    """The original reads every file into one list of documents, where only a blank line starts
    a new one: the fixture's text cut after its fifth line (inside a document) into two files
    gives the fixture's examples."""
    lines = pathlib.Path(pf.SAMPLE_TEXT).read_bytes().splitlines(keepends=True)
    assert lines[4].strip() and lines[5].strip()  # the cut is inside a document
    (tmp_path / "part1.txt").write_bytes(b"".join(lines[:5]))
    (tmp_path / "part2.txt").write_bytes(b"".join(lines[5:]))
    output = tmp_path / "out.tfrecord"
    inputs = f"{tmp_path / 'part1.txt'},{tmp_path / 'part2.txt'}"
    summary = create_pretraining_data(inputs, str(output), options())
    assert summary.documents == 3
    assert read_bytes(output) == read_bytes(os.path.join(pf.DATA_DIR, "sample_s12345.tfrecord"))


def test_whole_word_masking_reproduces_the_original_output(tmp_path):
    # tests/data/README.md gives the original's command; the input and vocab are the demo's.
    output = str(tmp_path / "wwm.tfrecord")
    demo = os.path.join(REPO, "tools", "demo_data")
    summary = create_pretraining_data(
        os.path.join(demo, "sample_text.txt"),
        output,
        PretrainingDataOptions(
            vocab_file=os.path.join(demo, "vocab.txt"),
            do_lower_case=True,
            do_whole_word_mask=True,
            max_seq_length=64,
            max_predictions_per_seq=10,
            masked_lm_prob=0.15,
            random_seed=7,
            dupe_factor=2,
            short_seq_prob=0.1,
        ),
    )
    assert summary.instances == 38
    assert read_bytes(output) == read_bytes(ORIGINAL_WWM)


@pytest.mark.parametrize(
    "name, max_seq_length, max_predictions_per_seq",
    [("original_chars_s3", 128, 20), ("original_chars_p0_s3", 16, 0)],
)
def test_a_character_vocabulary_reproduces_the_original_output(
    tmp_path, name, max_seq_length, max_predictions_per_seq
):
    # tests/data/README.md gives the original's commands: a 78-entry vocab, and no masked LM.
    output = str(tmp_path / "chars.tfrecord")
    create_pretraining_data(
        os.path.join(REPO, "tools", "demo_data", "sample_text.txt"),
        output,
        PretrainingDataOptions(
            vocab_file=os.path.join(REPO, "tests", "data", "char_vocab.txt"),
            max_seq_length=max_seq_length,
            max_predictions_per_seq=max_predictions_per_seq,
            random_seed=3,
            dupe_factor=1,
        ),
    )
    original = os.path.join(REPO, "tests", "data", f"{name}.tfrecord")
    assert pf.read_records(output) == pf.read_records(original)
    assert read_bytes(output) == read_bytes(original)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"max_seq_length": 4}, "--max_seq_length must be at least 5, got 4"),
        ({"max_predictions_per_seq": -1}, "--max_predictions_per_seq must be at least 0, got -1"),
        ({"vocab_file": None}, "--vocab_file is required"),
    ],
)
def test_what_the_original_cannot_run_is_an_error(fixtures_dir, tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        create_pretraining_data(pf.SAMPLE_TEXT, str(tmp_path / "o"), options(**overrides))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"num_workers": -1}, r"--num_workers must be at least 0 \(0: exact mode\), got -1"),
        ({"num_workers": 2, "shard_size_mb": 0}, "--shard_size_mb must be positive, got 0"),
    ],
)
def test_bad_scale_mode_flags_are_errors(fixtures_dir, tmp_path, arguments, message):
    with pytest.raises(ValueError, match=message):
        create_pretraining_data(pf.SAMPLE_TEXT, str(tmp_path / "o"), options(), **arguments)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "output_file, workers, message",
    [
        (",", 0, r"^--output_file: no output file given$"),
        (",", 2, r"^--output_file: no output file given$"),
        ("{tmp}/a,{tmp}/a", 0, r"^--output_file: .*/a given more than once$"),
        ("{tmp}/directory", 0, r"^--output_file: .*/directory is a directory, not a file to write$"),
        ("{tmp}/file/o", 0, r"^--output_file: cannot write .*/file/o: .*/file is a file, not a directory$"),
        ("{tmp}/file/o", 2, r"^--output_file: cannot write .*/file/o-00000-of-00001: .*/file is a file"),
        (
            "{tmp}/directory/",
            2,
            r"^--output_file: .*/directory/ is a directory; give the shards' name prefix",
        ),
        ("/sys/o", 0, r"^--output_file: cannot write in /sys \("),
    ],
)
def test_an_output_that_cannot_be_written_is_an_error_before_the_work(
    fixtures_dir, tmp_path, output_file, workers, message
):
    (tmp_path / "directory").mkdir()
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match=message):
        create_pretraining_data(
            pf.SAMPLE_TEXT, output_file.format(tmp=tmp_path), options(), num_workers=workers
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["directory", "file"]
    assert not list((tmp_path / "directory").iterdir())


def test_an_interrupted_scale_mode_run_leaves_no_shard(fixtures_dir, corpus_dir, tmp_path, monkeypatch):
    """Shards are renamed into place only once all are made: a run stopped after two of them
    leaves neither finished-looking shards nor temporary files."""
    written = []

    def write_then_stop(records, paths):
        if len(written) == 2:
            raise KeyboardInterrupt
        write_records(records, paths)
        written.extend(paths)

    write_records = pipeline._write
    monkeypatch.setattr(pipeline, "_write", write_then_stop)
    corpus = str(corpus_dir / "corpus.txt")
    with pytest.raises(KeyboardInterrupt):
        create_pretraining_data(
            corpus, str(tmp_path / "out" / "train"), options(), num_workers=2, shard_size_mb=0.02
        )
    assert len(written) == 2 and all(".tmp-" in path for path in written)
    assert list((tmp_path / "out").iterdir()) == []


def test_outputs_are_written_round_robin(fixtures_dir, tmp_path):
    a, b = str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")
    summary = create_pretraining_data(pf.SAMPLE_TEXT, f"{a},{b}", options())
    assert summary.output_files == [a, b]
    want = pf.fixture_records()
    assert pf.read_records(a) == want[0::2] and pf.read_records(b) == want[1::2]


def test_whole_word_masking_masks_whole_words(fixtures_dir, tmp_path):
    output = str(tmp_path / "wwm.tfrecord")
    create_pretraining_data(pf.SAMPLE_TEXT, output, options(do_whole_word_mask=True))
    vocab = FullTokenizer(pf.VOCAB).inv_vocab
    records = pf.read_records(output)
    assert len(records) > 40
    words_split = 0
    for r in records:
        masked = {p for p, w in zip(r["masked_lm_positions"], r["masked_lm_weights"], strict=True) if w}
        labels = dict(zip(r["masked_lm_positions"], r["masked_lm_ids"], strict=True))
        n = sum(r["input_mask"])
        original = [labels.get(i, r["input_ids"][i]) for i in range(n)]
        for i in range(1, n):
            continuation = vocab[original[i]].startswith("##")
            if continuation and (i in masked) != (i - 1 in masked):
                words_split += 1
        assert 1 <= len(masked) <= 20
    assert words_split == 0


def test_missing_vocab_and_unmatched_glob(fixtures_dir, tmp_path):
    with pytest.raises(ValueError, match=r"nope\.txt: cannot read the vocab file"):
        create_pretraining_data(
            pf.SAMPLE_TEXT, str(tmp_path / "o"), options(vocab_file=str(tmp_path / "nope.txt"))
        )
    with pytest.raises(ValueError, match=r"--input_file: '.*\*\.missing' matches no file"):
        create_pretraining_data(str(tmp_path / "*.missing"), str(tmp_path / "o"), options())
    assert not os.path.exists(tmp_path / "o")


@pytest.mark.parametrize("workers", [0, 2])
def test_empty_input_is_an_error(fixtures_dir, tmp_path, workers):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n  \n")
    with pytest.raises(ValueError, match=r"empty\.txt: no text found"):
        create_pretraining_data(str(empty), str(tmp_path / "o"), options(), num_workers=workers)
    assert [p.name for p in tmp_path.iterdir()] == ["empty.txt"]


def test_invalid_utf8_bytes_are_dropped_with_a_warning_naming_the_line(fixtures_dir, tmp_path, caplog):
    text = pathlib.Path(pf.SAMPLE_TEXT).read_bytes()
    dirty = tmp_path / "dirty.txt"
    dirty.write_bytes(text.replace(b"The ", b"The \xff\xfe", 5))
    first = text[: text.index(b"The ")].count(b"\n") + 1
    with caplog.at_level(logging.WARNING):
        create_pretraining_data(str(dirty), str(tmp_path / "dirty.tfrecord"), options())
    assert pf.read_records(str(tmp_path / "dirty.tfrecord")) == pf.fixture_records()
    assert f"dirty.txt: line {first} is not UTF-8; its invalid bytes are dropped" in caplog.text
    broken = sum(b"\xff" in line for line in dirty.read_bytes().split(b"\n"))
    assert f"dirty.txt: {broken} lines are not UTF-8" in caplog.text and broken > 1


def test_a_gzip_compressed_corpus_is_an_error_naming_it(fixtures_dir, tmp_path):
    compressed = tmp_path / "corpus.txt.gz"
    compressed.write_bytes(gzip.compress(pathlib.Path(pf.SAMPLE_TEXT).read_bytes()))
    with pytest.raises(
        ValueError, match=r"corpus\.txt\.gz: a gzip-compressed file; the corpus must be plain"
    ):
        create_pretraining_data(str(compressed), str(tmp_path / "o.tfrecord"), options())


def test_long_lines_and_a_single_document(fixtures_dir, tmp_path, caplog):
    words = pathlib.Path(pf.SAMPLE_TEXT).read_text(encoding="utf-8").split()
    single = tmp_path / "single.txt"
    single.write_text(" ".join(words) + "\n" + " ".join(words[:50]) + "\n")  # ~1000-token line
    with caplog.at_level(logging.WARNING):
        summary = create_pretraining_data(str(single), str(tmp_path / "s.tfrecord"), options(dupe_factor=3))
    assert "single document" in caplog.text
    records = pf.read_records(str(tmp_path / "s.tfrecord"))
    assert summary.instances == len(records) > 0
    assert all(sum(r["input_mask"]) <= 128 for r in records)


def test_an_interrupted_run_leaves_no_output(fixtures_dir, tmp_path, monkeypatch):
    def fail(self, *args):
        raise RuntimeError("disk full")

    output = tmp_path / "out.tfrecord"
    original_write = pipeline.RecordWriter.write
    calls = {"n": 0}

    def write_then_fail(self, record):
        calls["n"] += 1
        if calls["n"] > 10:
            fail(self)
        original_write(self, record)

    monkeypatch.setattr(pipeline.RecordWriter, "write", write_then_fail)
    with pytest.raises(RuntimeError, match="disk full"):
        create_pretraining_data(pf.SAMPLE_TEXT, str(output), options())
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    """sample_text.txt 24 times: 72 documents, ~105 KB."""
    directory = tmp_path_factory.mktemp("corpus")
    text = pathlib.Path(pf.SAMPLE_TEXT).read_text(encoding="utf-8").rstrip("\n") + "\n\n"
    (directory / "corpus.txt").write_text(text * 24)
    return directory


def test_scale_mode_statistics_match_exact_mode(fixtures_dir, corpus_dir, tmp_path):
    corpus = str(corpus_dir / "corpus.txt")
    exact = create_pretraining_data(corpus, str(tmp_path / "exact.tfrecord"), options(dupe_factor=2))
    scaled = create_pretraining_data(
        corpus, str(tmp_path / "scaled"), options(dupe_factor=2), num_workers=2, shard_size_mb=0.02
    )
    assert len(scaled.output_files) >= 4  # several shards, written in shard order
    assert scaled.output_files == sorted(scaled.output_files)
    want = pf.statistics(pf.read_records(str(tmp_path / "exact.tfrecord")))
    records = [r for path in scaled.output_files for r in pf.read_records(path)]
    got = pf.statistics(records)
    assert abs(len(records) - exact.instances) <= 0.05 * exact.instances
    # The original is not 50/50: a chunk of one segment always takes a random B (61% random
    # here, 53% in the fixture). Scale mode must have the same bias, not a different one.
    assert want["random_next"] > 0.5
    assert abs(got["random_next"] - want["random_next"]) < 0.05
    assert abs(got["mask_rate"] - want["mask_rate"]) < 0.005
    assert abs(got["as_mask"] - 0.8) < 0.03
    assert abs(got["kept"] - 0.1) < 0.03  # plus the rare random word equal to the original
    assert abs(got["mean_length"] - want["mean_length"]) < 0.05 * want["mean_length"]
    assert abs(got["short_fraction"] - want["short_fraction"]) < 0.06  # ~3 sigma at n=600


def test_scale_mode_is_reproducible(fixtures_dir, corpus_dir, tmp_path):
    corpus = str(corpus_dir / "corpus.txt")
    runs = []
    for name in ("one", "two"):
        summary = create_pretraining_data(
            corpus, str(tmp_path / name), options(dupe_factor=1), num_workers=2, shard_size_mb=0.03
        )
        runs.append([pathlib.Path(path).read_bytes() for path in summary.output_files])
    assert runs[0] == runs[1]
    with pytest.raises(ValueError, match="single --output_file prefix"):
        create_pretraining_data(corpus, "a,b", options(), num_workers=2)


def test_no_more_worker_processes_than_shards(tmp_path, caplog):
    # Each spawned worker starts a Python that loads the tokenizer: 16 of them for one shard
    # cost many times what one does.
    with caplog.at_level(logging.INFO, logger="bert_tf.data.pipeline"):
        summary = create_pretraining_data(
            pf.SAMPLE_TEXT, str(tmp_path / "out"), options(dupe_factor=1), num_workers=8
        )
    assert len(summary.output_files) == 1
    assert "Cut the input into 1 shards for 1 workers" in caplog.text


def test_a_rerun_with_another_shard_count_removes_the_earlier_shards(
    fixtures_dir, corpus_dir, tmp_path, caplog
):
    """Scale mode's files are `<prefix>-SSSSS-of-NNNNN`: a rerun with fewer shards deletes the
    earlier run's (a glob of the prefix would mix the two), and the temporaries of a killed run's
    shards, and nothing else in the directory."""
    corpus = str(corpus_dir / "corpus.txt")
    prefix = tmp_path / "train"
    others = ["train-extra", "train-00001-of-00002.txt", "trainx-00000-of-00001", "val-00000-of-00003"]
    for name in others:
        (tmp_path / name).write_text("not a shard of this run")
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()  # a killed run's temporaries name a process that has ended
    for name in (
        f"train-00000-of-00009.tmp-{process.pid}",
        f"train-00007-of-00009.tmp-{process.pid}",
        f"train-00003-of-00009.tmp-{process.pid}.tmp-{process.pid}",  # killed inside its RecordWriter
    ):
        (tmp_path / name).write_text("partial")

    def run(shard_size_mb):
        summary = create_pretraining_data(
            corpus, str(prefix), options(dupe_factor=1), num_workers=2, shard_size_mb=shard_size_mb
        )
        return [os.path.basename(path) for path in summary.output_files]

    first = run(0.02)
    with caplog.at_level(logging.WARNING):
        second = run(0.05)
    assert len(first) > len(second) > 1
    assert first[0].endswith(f"-of-{len(first):05d}") and second[0].endswith(f"-of-{len(second):05d}")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(second + others)
    removed = [r.getMessage() for r in caplog.records if "a shard of an earlier run" in r.getMessage()]
    assert len(removed) == len(first) and all(str(prefix) in message for message in removed)
    assert len([r for r in caplog.records if "left by a run that was killed" in r.getMessage()]) == 3


def test_shards_end_at_document_boundaries(tmp_path):
    path = tmp_path / "c.txt"
    path.write_bytes(b"a b\nc d\n\n" * 100)
    plan = shards.plan_shards([str(path)], 100)
    ranges = [r for shard in plan for r in shard]
    assert ranges[0][1] == 0 and ranges[-1][2] == 900
    assert all(end % 9 == 0 for _, _, end in ranges)  # every cut is after a blank line
    assert all(a[2] == b[1] for a, b in zip(ranges, ranges[1:], strict=False))


# Line endings and blank lines of every kind: the original ends a document at any line that is
# empty after `strip()`, which also removes "\r", spaces, tabs and Unicode whitespace.
BLANK_LINE_STYLES = {
    "lf": (b"\n", b""),
    "crlf": (b"\r\n", b""),
    "spaces and tabs": (b"\n", b" \t  "),
    "unicode whitespace": (b"\n", "\u00a0\u3000\u2003".encode()),
    "crlf, spaces": (b"\r\n", b"   "),
}


def restyle(text, style):
    """`text` (LF, empty blank lines) with the style's line ending and blank-line content."""
    newline, blank = BLANK_LINE_STYLES[style]
    lines = text.split(b"\n")
    return newline.join(line if line.strip() else blank for line in lines)


@pytest.mark.parametrize("style", BLANK_LINE_STYLES)
def test_exact_mode_reads_any_blank_lines_as_the_original(fixtures_dir, tmp_path, style):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(restyle(pathlib.Path(pf.SAMPLE_TEXT).read_bytes(), style))
    create_pretraining_data(str(corpus), str(tmp_path / "out.tfrecord"), options())
    assert pf.read_records(str(tmp_path / "out.tfrecord")) == pf.fixture_records()


def test_exact_mode_reads_a_carriage_return_inside_a_line_as_the_original(fixtures_dir, tmp_path):
    """The original reads its corpus with `tf.gfile`, whose line reader drops every "\\r" of a
    line (not only that of "\\r\\n"): words split by one are one word to it."""
    text = pathlib.Path(pf.SAMPLE_TEXT).read_bytes()
    with_returns = text.replace(b" the ", b" th\re ").replace(b" of ", b" \rof\r ")
    assert with_returns.count(b"\r") > 10
    (tmp_path / "corpus.txt").write_bytes(with_returns)
    create_pretraining_data(str(tmp_path / "corpus.txt"), str(tmp_path / "out.tfrecord"), options())
    assert pf.read_records(str(tmp_path / "out.tfrecord")) == pf.fixture_records()


def uniform_corpus():
    """Twelve documents of the same eight lines of the sample, each rotated differently: the
    same byte size for every document, different text."""
    lines = [line for line in pathlib.Path(pf.SAMPLE_TEXT).read_bytes().split(b"\n") if line.strip()][3:11]
    documents = [b"\n".join(lines[i:] + lines[:i]) for i in range(8)] + [b"\n".join(lines[::-1])] * 4
    return b"\n\n".join(documents) + b"\n"


@pytest.mark.parametrize("style", BLANK_LINE_STYLES)
def test_shards_are_cut_at_any_blank_line(fixtures_dir, tmp_path, style):
    lf_document_bytes = len(uniform_corpus()) // 12
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(restyle(uniform_corpus(), style))
    document_bytes = len(corpus.read_bytes()) / 12
    shard_bytes = int(2.5 * lf_document_bytes)  # 2.5 documents of any style: cuts after 3
    plan = shards.plan_shards([str(corpus)], shard_bytes)
    maker = shards.ShardMaker(options())
    assert [maker.read(ranges).num_documents for ranges in plan] == [3, 3, 3, 3]
    for ranges in plan:  # the memory bound: a shard exceeds its size by less than a document
        assert sum(end - start for _, start, end in ranges) <= shard_bytes + document_bytes


@pytest.fixture(scope="module")
def lf_scale_records(tmp_path_factory):
    return scale_mode_records(tmp_path_factory.mktemp("lf"), "lf")


def scale_mode_records(directory, style):
    corpus = directory / "corpus.txt"
    corpus.write_bytes(restyle(uniform_corpus(), style))
    shard_size_mb = 2.5 * (len(uniform_corpus()) // 12) / (1 << 20)
    summary = create_pretraining_data(
        str(corpus),
        str(directory / "out"),
        options(dupe_factor=1),
        num_workers=1,
        shard_size_mb=shard_size_mb,
    )
    return [pf.read_records(path) for path in summary.output_files]


@pytest.mark.parametrize("style", [s for s in BLANK_LINE_STYLES if s != "lf"])
def test_scale_mode_gives_the_same_shards_for_any_blank_lines(
    fixtures_dir, tmp_path, lf_scale_records, style
):
    records = scale_mode_records(tmp_path, style)
    assert len(records) == len(lf_scale_records) == 4
    assert records == lf_scale_records  # the same documents in each shard give the same examples


# --- Progress, warnings and the tool's flags ------------------------------------------------------


class FakeClock:
    """`bert_tf.progress`'s `time`: a clock that moves only when the test moves it."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now


def test_exact_mode_shows_progress_at_least_every_30_s_while_it_reads_makes_and_writes(
    fixtures_dir, tmp_path, monkeypatch
):
    """Each line tokenized, instance encoded and record written takes a second of a fake clock:
    a progress line comes at least every 30 of its seconds from start to end. The corpus is one
    document of 186 lines (a corpus without blank lines), so its instances are all made in one
    document's turn, and the reading, the instances and the writing each take over 30 s."""
    clock = FakeClock()
    monkeypatch.setattr(progress, "time", clock)

    def taking_a_second(method):
        def slow(*args):
            clock.now += 1
            return method(*args)

        return slow

    monkeypatch.setattr(FullTokenizer, "tokenize", taking_a_second(FullTokenizer.tokenize))
    monkeypatch.setattr(ExampleEncoder, "encode", taking_a_second(ExampleEncoder.encode))
    monkeypatch.setattr(RecordWriter, "write", taking_a_second(RecordWriter.write))
    shown = []  # (time, line) of each progress line

    class Stderr(io.StringIO):
        def write(self, text):
            shown.extend((clock.now, line) for line in text.splitlines() if line)
            return len(text)

    monkeypatch.setattr(sys, "stderr", Stderr())
    lines = [line for line in pathlib.Path(pf.SAMPLE_TEXT).read_text(encoding="utf-8").splitlines() if line]
    corpus = tmp_path / "one_document.txt"
    corpus.write_text("\n".join(lines * 6) + "\n", encoding="utf-8")
    start = clock.now
    summary = create_pretraining_data(str(corpus), str(tmp_path / "out"), options(dupe_factor=1))
    phases = {"reading": 186, "making instances": summary.instances, "writing": summary.instances}
    assert clock.now - start == sum(phases.values()) and min(phases.values()) > 30
    times = [start, *(time for time, line in shown if line.startswith("create_pretraining_data")), clock.now]
    assert max(b - a for a, b in zip(times, times[1:], strict=False)) <= 30, shown
    read = [line for _, line in shown if line.startswith("create_pretraining_data reading: ")]
    assert read[-1].startswith(
        f"create_pretraining_data reading: 186 lines | {corpus.stat().st_size:,} bytes"
    )


WARNED_FLAGS = re.compile(r"^(--\w+)=")


@pytest.mark.parametrize(
    "max_seq_length, max_predictions_per_seq, masked_lm_prob, warned",
    [
        (128, 20, 0.15, []),  # the defaults: 20 of 19.2
        (512, 76, 0.15, []),  # the original README's 76 for 512 (76.8)
        (512, 70, 0.15, []),  # the rule: at least 0.9 x 76.8 = 69.1
        (512, 69, 0.15, ["--max_predictions_per_seq"]),
        (513, 77, 0.15, ["--max_seq_length"]),
        (1024, 20, 0.15, ["--max_seq_length", "--max_predictions_per_seq"]),
        (128, 10, 0.15, ["--max_predictions_per_seq"]),
        (128, 20, 0.3, ["--max_predictions_per_seq"]),
        (128, 0, 0.15, []),  # no masked LM: meant
        (128, 20, 0.0, []),
    ],
)
def test_the_flags_warned_about(caplog, max_seq_length, max_predictions_per_seq, masked_lm_prob, warned):
    flags = options(
        max_seq_length=max_seq_length,
        max_predictions_per_seq=max_predictions_per_seq,
        masked_lm_prob=masked_lm_prob,
    )
    with caplog.at_level(logging.WARNING):
        flags.log_warnings()
    assert [WARNED_FLAGS.match(record.getMessage()).group(1) for record in caplog.records] == warned


@pytest.mark.parametrize("workers", [0, 1], ids=["exact", "scale"])
def test_a_long_max_seq_length_and_a_low_masking_cap_are_warned_about_once_before_the_work(
    fixtures_dir, tmp_path, caplog, workers
):
    with caplog.at_level(logging.INFO, logger="bert_tf.data"):
        summary = create_pretraining_data(
            pf.SAMPLE_TEXT, str(tmp_path / "out"), options(max_seq_length=1024, dupe_factor=1), workers
        )
    messages = [record.getMessage() for record in caplog.records]
    warned = [message for message in messages if message.startswith("--")]
    assert warned == [
        "--max_seq_length=1024: Google's released BERT checkpoints have 512 positions "
        "(max_position_embeddings in bert_config.json) and cannot train on these examples; "
        "pretrain a model whose max_position_embeddings is at least 1024",
        "--max_predictions_per_seq=20 masks at most 20 of the 1024 tokens of an instance (2.0%), "
        "not the 15% of --masked_lm_prob=0.15: set --max_predictions_per_seq=154 (about "
        "max_seq_length x masked_lm_prob), and give run_pretraining.py the same value",
    ]
    first_work = "Reading and tokenizing" if workers == 0 else "Cut the input into"
    assert messages.index(warned[-1]) < min(i for i, m in enumerate(messages) if m.startswith(first_work))
    # What the warning is about: the original's cap leaves far fewer than 15% of the tokens masked.
    assert summary.masked <= 20 * summary.instances and summary.masked / summary.tokens < 0.1


def test_the_defaults_are_not_warned_about(fixtures_dir, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="bert_tf.data"):
        create_pretraining_data(pf.SAMPLE_TEXT, str(tmp_path / "out"), PretrainingDataOptions(pf.VOCAB))
    assert caplog.records == []


# Loads the tool as a module (its main does not run) and prints the flags it defines.
TOOL_FLAGS = """
import importlib.util, json, sys
from absl import flags
spec = importlib.util.spec_from_file_location("create_pretraining_data", sys.argv[1])
module = sys.modules["create_pretraining_data"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
own = flags.FLAGS.get_key_flags_for_module("create_pretraining_data")
print(json.dumps({flag.name: [flag.default, flag.help] for flag in own}))
"""


def test_the_tools_flags_are_the_options_fields_declared_once():
    tool = os.path.join(REPO, "tools", "create_pretraining_data.py")
    # The tool's first import is bert_tf.cli: forked from tool_runs' server of the tools.
    listed = tool_runs.run(
        [sys.executable, "-c", TOOL_FLAGS, tool], cwd=REPO, timeout=300, server=tool_runs.TOOLS
    )
    assert listed.returncode == 0, listed.stderr[-2000:]
    fields = {field.name: field for field in dataclasses.fields(CreatePretrainingDataOptions)}
    flags = json.loads(listed.stdout.strip().splitlines()[-1])
    assert {name: default for name, (default, _) in flags.items()} == {
        name: field.default for name, field in fields.items()
    }
    assert all(flags[name][1].startswith(field.metadata["help"]) for name, field in fields.items())
    required = [name for name, field in fields.items() if field.metadata["required"]]
    assert required == ["vocab_file", "input_file", "output_file"]
    missing = tool_runs.run([sys.executable, tool, f"--vocab_file={pf.VOCAB}"], cwd=REPO, timeout=300)
    assert missing.returncode == 1
    assert (
        "--input_file must have a value" in missing.stderr
        and "--output_file must have a value" in missing.stderr
    )
