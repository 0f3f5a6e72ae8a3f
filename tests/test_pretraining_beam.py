"""create_pretraining_data on Apache Beam: scale mode's examples, run by the DirectRunner.

The tests that run Beam are skipped (the reason is printed in pytest's summary) only when the
`beam` extra is not installed; `make test` installs it. A DirectRunner run as the tool sets it up
starts a Python process per worker; the tests of what the launcher does with the files, the
counters and errors run the workers as threads (`worker_threads`).
"""

import collections
import gzip
import importlib.util
import json
import logging
import os
import pathlib
import subprocess
import sys

import pytest

from bert_tf.data import PretrainingDataOptions, create_pretraining_data, make_pretraining_dataset
from tests import pretraining_fixtures as pf
from tests import tool_runs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(REPO, "tools", "create_pretraining_data.py")

needs_beam = pytest.mark.skipif(
    importlib.util.find_spec("apache_beam") is None,
    reason="Apache Beam is not installed: pip install -e '.[beam]' (make test installs it)",
)


def options(**overrides):
    return PretrainingDataOptions(**dict(pf.FIXTURE_ARGS, **overrides))


def instances(paths):
    """The multiset of the records in `paths`, each parsed into plain lists."""
    return collections.Counter(json.dumps(r, sort_keys=True) for path in paths for r in pf.read_records(path))


def scale_and_beam(input_file, directory, shard_size_mb, **overrides):
    """The same job in scale mode (2 processes) and on the DirectRunner (2 processes)."""
    kwargs = dict(num_workers=2, shard_size_mb=shard_size_mb)
    scale = create_pretraining_data(input_file, str(directory / "scale"), options(**overrides), **kwargs)
    beam = create_pretraining_data(
        input_file, str(directory / "beam"), options(**overrides), runner="DirectRunner", **kwargs
    )
    return scale, beam


SUMMARY_FIELDS = ("documents", "instances", "tokens", "masked", "random_next")


@pytest.fixture
def worker_threads(monkeypatch):
    """The DirectRunner's workers as threads of this process (Beam's `multi_threading` mode), not
    the Python processes of `multi_processing`, which the tool sets: the same pipeline, bundles
    and Fn API (the DoFn pickled and run by an SDK harness over gRPC, its counters reported as
    metrics), without a Python interpreter started per worker and run. For the tests of what
    the launcher makes of the written files, the counters and the errors; the worker processes
    users get run in `test_the_direct_runner_writes_scale_modes_instances` and the tool's runs."""
    from apache_beam.options.pipeline_options import DirectOptions

    from bert_tf.data import beam_pipeline

    make_pipeline = beam_pipeline.make_pipeline

    def with_worker_threads(*args, **kwargs):
        pipeline = make_pipeline(*args, **kwargs)
        pipeline.options.view_as(DirectOptions).direct_running_mode = "multi_threading"
        return pipeline

    monkeypatch.setattr(beam_pipeline, "make_pipeline", with_worker_threads)


@pytest.fixture(scope="module")
def scale_run(fixtures_dir, tmp_path_factory):
    """sample_text.txt 24 times (72 documents, ~105 KB) in scale mode: 5 shards of 0.02 MB."""
    directory = tmp_path_factory.mktemp("scale")
    text = pathlib.Path(pf.SAMPLE_TEXT).read_text(encoding="utf-8").rstrip("\n") + "\n\n"
    corpus = directory / "corpus.txt"
    corpus.write_text(text * 24)
    summary = create_pretraining_data(
        str(corpus), str(directory / "scale"), options(dupe_factor=2), num_workers=2, shard_size_mb=0.02
    )
    return str(corpus), summary


def on_beam(scale_run, output_file, **kwargs):
    corpus, _ = scale_run
    return create_pretraining_data(
        corpus,
        output_file,
        options(dupe_factor=2),
        num_workers=2,
        shard_size_mb=0.02,
        runner="DirectRunner",
        **kwargs,
    )


@needs_beam
def test_the_direct_runner_writes_scale_modes_instances(scale_run, tmp_path):
    _, scale = scale_run
    beam = on_beam(scale_run, str(tmp_path / "beam"))
    assert len(scale.output_files) >= 4  # one file per shard
    assert instances(beam.output_files) == instances(scale.output_files)
    assert sum(instances(beam.output_files).values()) == scale.instances > 500
    # The Beam counters count what was written, as scale mode's statistics do.
    for field in SUMMARY_FIELDS:
        assert getattr(beam, field) == getattr(scale, field), field
    assert beam.output_files == sorted(str(p) for p in tmp_path.glob("beam-*-of-*"))
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith("beam-0")] == []  # no temp

    # Every record parses with the trainer's reader, and the counters match the parsed records.
    dataset = make_pretraining_dataset(
        f"{tmp_path}/beam-*", 256, 128, 20, is_training=False, drop_remainder=False
    )
    batches = list(dataset)
    assert sum(len(b["input_ids"]) for b in batches) == beam.instances
    assert sum(int(b["input_mask"].numpy().sum()) for b in batches) == beam.tokens
    assert sum(int(b["masked_lm_weights"].numpy().sum()) for b in batches) == beam.masked
    assert sum(int(b["next_sentence_labels"].numpy().sum()) for b in batches) == beam.random_next


@needs_beam
def test_num_output_shards_sets_the_number_of_files(scale_run, tmp_path, worker_threads):
    _, scale = scale_run
    beam = on_beam(scale_run, str(tmp_path / "beam"), num_output_shards=3)
    assert beam.output_files == [str(tmp_path / f"beam-{i:05d}-of-00003") for i in range(3)]
    assert all(os.path.getsize(path) > 0 for path in beam.output_files)
    assert instances(beam.output_files) == instances(scale.output_files)
    # A rerun with another count removes the earlier run's files (as scale mode does).
    rerun = on_beam(scale_run, str(tmp_path / "beam"), num_output_shards=2)
    assert sorted(str(p) for p in tmp_path.iterdir()) == rerun.output_files
    assert instances(rerun.output_files) == instances(scale.output_files)


@needs_beam
def test_without_metrics_the_newest_shards_are_the_output(
    scale_run, tmp_path, monkeypatch, caplog, worker_threads
):
    from bert_tf.data import beam_pipeline

    _, scale = scale_run
    on_beam(scale_run, str(tmp_path / "beam"), num_output_shards=7)  # more files than shards
    # A runner that reports no metrics: the files are found by name and time, not counted.
    monkeypatch.setattr(beam_pipeline, "_read_counters", lambda result: {})
    rerun = on_beam(scale_run, str(tmp_path / "beam"))
    assert "reported no metrics" in caplog.text
    assert rerun.output_files and not rerun.output_files[0].endswith("-of-00007")
    assert sorted(str(p) for p in tmp_path.iterdir()) == rerun.output_files  # the 7 removed
    assert instances(rerun.output_files) == instances(scale.output_files)


@needs_beam
def test_a_long_document_and_an_empty_file_as_in_scale_mode(fixtures_dir, tmp_path, caplog, worker_threads):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    lines = [line for line in pathlib.Path(pf.SAMPLE_TEXT).read_text().splitlines() if line.strip()]
    (inputs / "a_long.txt").write_text("\n".join(lines * 10) + "\n")  # one document of ~40 KB
    (inputs / "b_empty.txt").write_text("")
    (inputs / "c_sample.txt").write_text(pathlib.Path(pf.SAMPLE_TEXT).read_text())
    with caplog.at_level(logging.WARNING):
        # Listed, not globbed: a glob's order is the filesystem's, and the long document, which
        # has no blank line after it, continues into the next file's first.
        listed = ",".join(str(inputs / name) for name in ("a_long.txt", "b_empty.txt", "c_sample.txt"))
        scale, beam = scale_and_beam(listed, tmp_path, 0.01, dupe_factor=1)
    assert caplog.text.count("b_empty.txt is empty; skipped") == 2  # by each run's planner
    assert scale.documents == beam.documents == 4
    assert len(scale.output_files) == 2  # the long document's shard, and the rest
    assert instances(beam.output_files) == instances(scale.output_files)


@needs_beam
def test_input_without_text_is_an_error_and_leaves_the_earlier_output(fixtures_dir, tmp_path, worker_threads):
    """A failed run leaves the files of an earlier run with the same --output_file as they
    were (Beam's sink replaced them before the run could fail) and none of its own."""
    output = tmp_path / "out" / "o"
    earlier = create_pretraining_data(
        pf.SAMPLE_TEXT, str(output), options(dupe_factor=1), runner="DirectRunner"
    )
    contents = {path: pathlib.Path(path).read_bytes() for path in earlier.output_files}
    blank = tmp_path / "blank.txt"
    blank.write_text("\n\n  \n")
    with pytest.raises(ValueError, match=r"blank\.txt: no text found \(the input has only blank lines\)"):
        create_pretraining_data(str(blank), str(output), options(), runner="DirectRunner")
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(ValueError, match=r"empty\.txt: no text found \(the input is empty\)"):
        create_pretraining_data(str(empty), str(output), options(), runner="DirectRunner")
    assert {str(p): p.read_bytes() for p in (tmp_path / "out").iterdir()} == contents
    compressed = tmp_path / "corpus.txt.gz"
    compressed.write_bytes(gzip.compress(pathlib.Path(pf.SAMPLE_TEXT).read_bytes()))
    with pytest.raises(ValueError, match=r"corpus\.txt\.gz: a gzip-compressed file"):  # before the pipeline
        create_pretraining_data(str(compressed), str(output), options(), runner="DirectRunner")


@needs_beam
@pytest.mark.parametrize(
    "arguments, message",
    [
        (
            {"options": options(vocab_file="nope.txt")},
            r"^nope\.txt: cannot read the vocab file",
        ),
        ({"output_file": "a,b"}, "give a single --output_file prefix"),
        (
            {"pipeline_args": ["--max_seq_lenght=3"]},
            r"^--max_seq_lenght: neither a flag of this tool nor a Beam pipeline option$",
        ),
        (
            {"runner": "DataflowRunner", "num_workers": 2},
            r"^--num_workers counts the DirectRunner's local processes; DataflowRunner .*--max_num_workers",
        ),
        ({"runner": "NoSuchRunner"}, r"^--runner=NoSuchRunner: Unexpected pipeline runner"),
        ({"num_output_shards": -1}, "--num_output_shards must be at least 0, got -1"),
    ],
)
def test_bad_input_is_an_error_before_the_pipeline_starts(fixtures_dir, tmp_path, arguments, message):
    kwargs = dict(
        input_file=pf.SAMPLE_TEXT,
        output_file=str(tmp_path / "o"),
        options=options(),
        runner="DirectRunner",
    )
    kwargs.update(arguments)
    with pytest.raises(ValueError, match=message):
        create_pretraining_data(**kwargs)
    assert list(tmp_path.iterdir()) == []


@needs_beam
def test_pipeline_options_reach_beam(fixtures_dir):
    from bert_tf.data.beam_pipeline import make_pipeline

    pipeline = make_pipeline("DirectRunner", ["--job_name=bert-tf-test", "--region", "europe-west4"], 3)
    given = pipeline.options.get_all_options()
    assert (given["job_name"], given["region"]) == ("bert-tf-test", "europe-west4")
    assert (given["runner"], given["direct_running_mode"], given["direct_num_workers"]) == (
        "FnApiRunner",
        "multi_processing",
        3,
    )


def run_tool(tmp_path, *flags, prelude=None):
    """A run of the tool, forked by `tool_runs`; with a `prelude`, `-c` code that runs the tool
    after it (forked from the server of the tools, which has imported the tool's modules)."""
    flags = [
        f"--input_file={pf.SAMPLE_TEXT}",
        f"--output_file={tmp_path / 'out'}",
        f"--vocab_file={pf.VOCAB}",
        *flags,
    ]
    if prelude is None:
        return tool_runs.run([sys.executable, TOOL, *flags], cwd=REPO, timeout=300)
    return tool_runs.run(
        [sys.executable, "-c", prelude, TOOL, *flags], cwd=REPO, timeout=300, server=tool_runs.TOOLS
    )


@needs_beam
def test_the_tool_hands_unknown_flags_to_beam(fixtures_dir, tmp_path):
    # Beam options in both absl forms, with the tool's own flags after them: absl must neither
    # reject the first nor stop parsing at their values.
    result = run_tool(
        tmp_path,
        "--runner=DirectRunner",
        "--job_name",
        "bert-tf-test",
        "--experiments=beam_fn_api",
        "--num_workers=1",
        "--dupe_factor=1",
        "--num_output_shards=2",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    outputs = [str(tmp_path / f"out-0000{i}-of-00002") for i in range(2)]
    assert f"output: {', '.join(outputs)}" in result.stdout
    # The tool's defaults are the fixture's flags but dupe_factor 10: --dupe_factor=1 was read.
    scale = create_pretraining_data(
        pf.SAMPLE_TEXT, str(tmp_path / "scale"), options(dupe_factor=1), num_workers=1
    )
    assert f"Wrote {scale.instances} instances from 3 documents" in result.stdout
    assert instances(outputs) == instances(scale.output_files)
    # Without --runner, an unknown flag is still absl's error.
    result = run_tool(tmp_path, "--job_name=bert-tf-test")
    assert result.returncode == 1 and "Unknown command line flag 'job_name'" in result.stderr


def test_without_beam_a_runner_is_a_one_line_error(fixtures_dir, tmp_path):
    # Apache Beam made unimportable, as when the extra is not installed. No module of Beam's, nor
    # bert_tf's module that imports it, may be loaded already (by the tools' server).
    prelude = "import runpy, sys; "
    prelude += "assert not [m for m in sys.modules if m.startswith(('apache_beam', 'bert_tf.data.beam'))]; "
    prelude += "sys.modules['apache_beam'] = None; sys.argv = sys.argv[1:]; "
    prelude += "runpy.run_path(sys.argv[0], run_name='__main__')"
    result = run_tool(tmp_path, "--runner=DirectRunner", prelude=prelude)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "error: --runner needs Apache Beam: pip install 'bert_tf[beam]' (apache-beam[tfrecord]==2.77.0)"
    )
    assert list(tmp_path.iterdir()) == []


def test_beam_options_without_a_runner_are_an_error(fixtures_dir, tmp_path):
    with pytest.raises(ValueError, match="--num_output_shards: options of the Beam pipeline, given without"):
        create_pretraining_data(pf.SAMPLE_TEXT, str(tmp_path / "o"), options(), num_output_shards=4)


# What a Beam worker runs, in a fresh interpreter: the DoFn and Beam's TFRecord framing.
WORKER_CODE = """
import io, sys
from apache_beam.io.tfrecordio import _TFRecordUtil
from bert_tf import files
from bert_tf.data import PretrainingDataOptions, shards
from bert_tf.data.beam_pipeline import MakeShardFn

corpus, vocab = sys.argv[1:]
fn = MakeShardFn(PretrainingDataOptions(vocab_file=vocab, dupe_factor=1))
fn.setup()
out = io.BytesIO()
for shard in enumerate(shards.plan_shards(files.expand_input_patterns(corpus), 1000)):
    for record in fn.process(shard):
        _TFRecordUtil.write_record(out, record)
print(len(out.getvalue()) > 0, "tensorflow" in sys.modules)
"""


@needs_beam
def test_beam_workers_never_load_tensorflow(fixtures_dir):
    result = subprocess.run(
        [sys.executable, "-c", WORKER_CODE, pf.SAMPLE_TEXT, pf.VOCAB],
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.split() == ["True", "False"]
