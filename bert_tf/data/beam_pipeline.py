"""Scale mode on Apache Beam: the same shards, seeds and examples, run by any Beam runner.

The launcher plans the shards as scale mode does (`shards.plan_scale_mode`: byte ranges cut at
document boundaries); the pipeline spreads them over the runner's workers, each of which makes a
shard's examples with scale mode's own `ShardMaker.make_shard` (the shard's own seeded
`random.Random`), and Beam's TFRecord sink writes them to `<output_file>-SSSSS-of-NNNNN`. For
the same input, vocab, flags, seed and shard size the examples are exactly scale mode's; only
the files they are in differ. The workers count documents, instances, tokens and masked tokens
in Beam metrics, which the launcher reads back into a `Summary` when the pipeline ends.

Runners: the DirectRunner (local processes), Dataflow, Flink and Spark (docs/pretraining.md, "Pretraining
data", gives their command lines). Importing this module needs Apache Beam (`bert_tf[beam]`).
`pipeline.create_pretraining_data` calls this module for `--runner`; it builds on `shards.py`
alone, never on `pipeline.py`.
"""

import glob
import logging
import os
import re
import time

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.tfrecordio import WriteToTFRecord
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions
from apache_beam.runners.runner import PipelineState

from bert_tf import files
from bert_tf.data.shards import ShardMaker, Summary, plan_scale_mode, remove_stale_shards, shard_file_name

logger = logging.getLogger(__name__)

NAMESPACE = "bert_tf"
# The counts of a shard's `Summary`, summed over the shards by the runner's metrics.
SUMMARY_COUNTERS = ("documents", "instances", "tokens", "masked", "random_next")
SHARD_SUFFIX = re.compile(r"-\d{5}-of-(\d{5})$")


def _one_line(error):
    return " ".join(str(error).split())


# Beam's names of its local batch runner. In Beam 2.77 the DirectRunner first tries Prism, a Go
# binary it downloads at run time, which would not run --num_workers processes (nor run offline):
# they all run the FnApiRunner, the DirectRunner's own batch engine, in multi_processing mode.
_LOCAL_RUNNERS = ("directrunner", "direct", "fnapirunner")


def make_pipeline(runner, pipeline_args=(), num_workers=0):
    """An empty `beam.Pipeline` on `runner`, its options checked before anything is read.

    Args:
      runner: A Beam runner name: "DirectRunner", "DataflowRunner", "FlinkRunner",
        "SparkRunner", "PortableRunner", ...
      pipeline_args: The command-line flags the tool does not define (`--project=...`).
      num_workers: With the DirectRunner, the number of local worker processes (0: one per
        core); it runs them in `multi_processing` mode. Other runners size their own workers.

    Returns:
      A `beam.Pipeline`.

    Raises:
      ValueError: An argument that is neither a flag of the tool nor a Beam pipeline option (a
        mistyped flag would otherwise be dropped with a warning and its default used), an
        unknown runner or one whose dependencies are missing, options the runner rejects, or
        `num_workers` with another runner than the DirectRunner.
    """
    options = PipelineOptions(list(pipeline_args), runner=runner)
    known = PipelineOptions([]).get_all_options()  # every option of every Beam runner
    unknown = set(options.get_all_options(retain_unknown_options=True)) - set(known)
    if unknown:
        names = ", ".join(f"--{name}" for name in sorted(unknown))
        raise ValueError(f"{names}: neither a flag of this tool nor a Beam pipeline option")
    if runner.lower() in _LOCAL_RUNNERS:
        # Beam's local runner logs some 60 lines of its own at INFO, and relays each of its
        # workers' log lines, which the workers print themselves too (their own INFO lines stay).
        # Dataflow's INFO lines, its job's address among them, are not touched.
        logging.getLogger("apache_beam").setLevel(logging.WARNING)
        options.view_as(StandardOptions).runner = "FnApiRunner"
        direct = options.view_as(DirectOptions)
        direct.direct_running_mode = "multi_processing"
        direct.direct_num_workers = num_workers
    elif num_workers:
        raise ValueError(
            f"--num_workers counts the DirectRunner's local processes; {runner} sizes its own "
            "workers (Dataflow: --max_num_workers)"
        )
    try:
        return beam.Pipeline(options=options)
    except (ImportError, ValueError) as e:  # an unknown runner, apache-beam[gcp] missing, ...
        raise ValueError(f"--runner={runner}: {_one_line(e)}") from None


class MakeShardFn(beam.DoFn):
    """A shard `(index, ranges)` -> its serialized examples, counted in Beam metrics.

    Args:
      options: `PretrainingDataOptions`.
    """

    def __init__(self, options):
        super().__init__()
        self._options = options
        self._counters = {name: Metrics.counter(NAMESPACE, name) for name in SUMMARY_COUNTERS}

    def setup(self):
        self._maker = ShardMaker(self._options, exact=False)  # once per worker: loads the vocab

    def process(self, shard):
        index, ranges = shard
        records, summary = self._maker.make_shard(index, ranges)
        for name, counter in self._counters.items():
            counter.inc(getattr(summary, name))
        yield from records


def _count_output_file(path):
    Metrics.counter(NAMESPACE, "output_files").inc()
    return path


def _written_shard_count(output_file, suffix):
    """The shard count `NNNNN` in the names of this run's `<output_file>-SSSSS-of-NNNNN<suffix>`
    (0 if there is none), where the runner reports no metrics to count its files by."""
    shards = [path[: -len(suffix)] for path in files.glob(f"{output_file}-*-of-*{suffix}")]
    counts = {int(match.group(1)) for path in shards if (match := SHARD_SUFFIX.search(path))}
    return max(counts, default=0)


def _beam_temporaries(output_file):
    """The directories where Beam's file sinks stage the files of `output_file`
    (`beam-temp-<name>-<uuid>` beside it), left behind by a run that failed or was killed."""
    directory, name = os.path.split(output_file)
    return set(files.glob(os.path.join(directory, f"beam-temp-{glob.escape(name)}-*")))


def _remove_own_files(output_file, suffix, staged_before):
    """Removes what this run leaves beside `output_file` when it ends, failed or not: its
    shards not renamed into place (`<shard><suffix>`) and Beam's staging directories made since
    `staged_before`; what cannot be removed (a worker still writing) is named in a warning."""
    leftovers = files.glob(f"{output_file}-*-of-*{suffix}") + sorted(
        _beam_temporaries(output_file) - staged_before
    )
    for path in leftovers:
        try:
            if files.isdir(path):
                files.remove_tree(path)
            else:
                files.remove(path)
        except OSError as e:
            logger.warning("%s: cannot remove it (%s); delete it", path, e)


def _read_counters(result):
    """The `bert_tf` counters of a finished pipeline, summed over its steps ({} if the runner
    reports no metrics)."""
    counts = {}
    for counter in result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]:
        name = counter.key.metric.name
        counts[name] = counts.get(name, 0) + counter.result
    return counts


def create_with_beam(pipeline, input_files, output_file, options, shard_size_mb=8, num_output_shards=0):
    """Scale mode's shards, made on `pipeline`'s runner and written by Beam's TFRecord sink.

    Args:
      pipeline: From `make_pipeline`.
      input_files: The expanded input paths.
      output_file: The output prefix: files `<output_file>-SSSSS-of-NNNNN`.
      options: `PretrainingDataOptions`.
      shard_size_mb: Scale mode's shard size.
      num_output_shards: The number of output files; 0 lets the runner write one per bundle
        without moving the examples between workers (a fixed number groups them first).

    Returns:
      A `Summary` of the counters; its `output_files` are in name order.

    Raises:
      ValueError: What scale mode rejects: a bad vocab, an input without text. A run that
        fails leaves the files of an earlier run as they were (and removes its own).
    """
    start = time.monotonic()
    shards = plan_scale_mode(input_files, output_file, options, shard_size_mb)
    logger.info("Cut the input into %d shards for Beam's %s", len(shards), type(pipeline.runner).__name__)
    for left in sorted(_beam_temporaries(output_file)):
        logger.warning("%s: Beam's staging files of a run that failed or was killed; delete it", left)
    # The shards are written as scale mode writes them, `<shard>.tmp-<pid>`, and renamed into
    # place once the run has succeeded: a run that fails leaves the earlier files as they were.
    suffix = files.temporary_path("")
    staged_before = _beam_temporaries(output_file)
    written = (
        pipeline
        # Create reshuffles its elements (reshuffle=True): the shards spread over the workers.
        | "Shards" >> beam.Create(list(enumerate(shards)))
        | "MakeExamples" >> beam.ParDo(MakeShardFn(options))
        | "Write"
        >> WriteToTFRecord(
            output_file,
            file_name_suffix=suffix,
            num_shards=num_output_shards,
            compression_type=CompressionTypes.UNCOMPRESSED,
        )
    )
    _ = written | "CountFiles" >> beam.Map(_count_output_file)
    result = None
    try:
        result = pipeline.run()
        result.wait_until_finish()
        counts = _read_counters(result)
        summary = Summary(**{name: counts.get(name, 0) for name in SUMMARY_COUNTERS})
        if "output_files" in counts:
            num_files = counts["output_files"]
        else:
            logger.warning("The runner reported no metrics: the statistics below are not counted")
            num_files = num_output_shards or _written_shard_count(output_file, suffix)
        if "output_files" in counts and summary.documents == 0:
            raise ValueError(f"{', '.join(input_files)}: no text found (the input has only blank lines)")
        summary.output_files = [shard_file_name(output_file, index, num_files) for index in range(num_files)]
        remove_stale_shards(output_file, summary.output_files)
        for path in summary.output_files:
            files.rename(path + suffix, path)
    finally:
        if _job_ended(result):
            _remove_own_files(output_file, suffix, staged_before)
        else:
            logger.warning(
                "The Beam job may still be running: its files beside %s are left as they are", output_file
            )
    summary.seconds = time.monotonic() - start
    return summary


def _job_ended(result):
    """Whether the job of `result` (None: the runner ran it within `run()`, as the local one does)
    no longer runs, once asked to stop: a launcher interrupted while a remote runner (Dataflow,
    Flink, Spark) works cancels its job, else that job would write into removed files."""
    if result is None or PipelineState.is_terminal(result.state):
        return True
    try:
        result.cancel()
    except Exception as e:  # a runner that cannot cancel: the job runs on
        logger.warning("Cannot cancel the Beam job (%s)", _one_line(e))
        return False
    return True
