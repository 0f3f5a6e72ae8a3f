"""`create_pretraining_data`: text corpus -> pretraining TFRecords, exact or sharded and parallel.

Exact mode (`num_workers=0`, the default) is the original's algorithm on one `random.Random`:
the same input, vocab, flags and seed give the same examples in the same order. It shows a
progress line at least every 10 s while it reads and tokenizes, makes the instances and
writes them.

Scale mode (`num_workers=N`) cuts the input into shards of about `shard_size_mb` at document
boundaries (`shards.py`). Each shard is the original's algorithm on its own documents with its
own `random.Random`, seeded from the seed and the shard index, and is written to its own file
`<output_file>-SSSSS-of-NNNNN`. Memory is bounded by a shard, workers run in parallel, and
reruns give the same files. The worker processes do not load TensorFlow: they return serialized
examples and this process frames them into TFRecords.

On Apache Beam (`runner=...`), `create_pretraining_data` hands the job to `beam_pipeline.py`:
the same shards are made by the same `ShardMaker.make_shard` on the runner's workers, and
Beam's sink writes them.
"""

import concurrent.futures
import contextlib
import ctypes
import ctypes.util
import itertools
import logging
import multiprocessing
import os
import random
import signal
import time

from bert_tf import files
from bert_tf.data.examples import RecordWriter
from bert_tf.data.shards import ShardMaker, Summary, plan_scale_mode, remove_stale_shards, shard_file_name
from bert_tf.progress import Progress

logger = logging.getLogger(__name__)


def _check_corpus(corpus, where):
    if corpus.num_documents == 0:
        raise ValueError(f"{where}: no text found (the input is empty or has only blank lines)")
    if corpus.num_documents == 1:
        logger.warning(
            "%s has a single document: its 'random next sentence' segments come from the same "
            "document (the original does the same after ten tries for another one)",
            where,
        )


def _write(records, output_files, on_record=None):
    """Writes `records` round-robin over `output_files` (`RecordWriter`).

    Args:
      records: Serialized examples.
      output_files: The TFRecord paths.
      on_record: None, or called with the number of records written after each (progress).
    """
    with RecordWriter(output_files) as writer:
        for count, record in enumerate(records, start=1):
            writer.write(record)
            if on_record is not None:
                on_record(count)


def create_exact(input_files, output_files, options):
    """The original's single-process algorithm, with progress lines while it reads, makes the
    instances and writes them. Returns a `Summary`."""
    start = time.monotonic()
    maker = ShardMaker(options)
    logger.info("Reading and tokenizing %d input files", len(input_files))
    reading = Progress("create_pretraining_data reading", rate_of="bytes")
    corpus = maker.read([(path, 0, None) for path in input_files], on_line=reading.update)
    reading.done()
    _check_corpus(corpus, ", ".join(input_files))
    making = Progress("create_pretraining_data making instances", rate_of="instances")
    making.update(documents=corpus.num_documents, tokens=corpus.num_tokens, instances=0)
    records, summary = maker.make_records(
        corpus,
        random.Random(options.random_seed),
        on_instance=lambda so_far: making.update(instances=so_far.instances),
    )
    making.done()
    writing = Progress(f"create_pretraining_data writing {len(records):,} instances", rate_of="written")
    _write(records, output_files, on_record=lambda count: writing.update(written=count))
    writing.done()
    summary.output_files = list(output_files)
    summary.seconds = time.monotonic() - start
    return summary


_WORKER = None


def _init_worker(options):
    global _WORKER
    _end_with_parent()
    _WORKER = ShardMaker(options, exact=False)


def _end_with_parent():
    """Has Linux kill this worker when the tool's process dies: a kill -9 of the tool would
    otherwise leave its workers running (and holding their memory) to the end of their shards."""
    parent = multiprocessing.parent_process()
    if parent is None:  # not a worker process (called in the tool's own)
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux
        return
    if os.getppid() != parent.pid:  # the tool died before the call
        os._exit(1)


def _make_shard(args):
    index, ranges = args
    return (index, *_WORKER.make_shard(index, ranges))


def _made_shards(jobs, num_workers, options):
    """Yields `_make_shard(job)` of every job as the shards are made, by `num_workers` spawned
    processes, with at most two shards a worker under way (a result holds a shard's records:
    memory stays bounded).

    When the consumer stops (an error, Ctrl-C), the shards not started are cancelled and those
    under way are let finish: `multiprocessing.Pool.terminate` killed workers in the middle of
    sending their records, holding the result queue's lock, and then waited on that lock for
    ever (seen once in the test suite).
    """
    executor = concurrent.futures.ProcessPoolExecutor(
        num_workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_worker,
        initargs=(options,),
    )
    waiting = iter(jobs)
    try:
        under_way = {executor.submit(_make_shard, job) for job in itertools.islice(waiting, 2 * num_workers)}
        while under_way:
            done, under_way = concurrent.futures.wait(
                under_way, return_when=concurrent.futures.FIRST_COMPLETED
            )
            under_way |= {executor.submit(_make_shard, job) for job in itertools.islice(waiting, len(done))}
            for future in done:
                yield future.result()
    finally:
        executor.shutdown(wait=True, cancel_futures=True)


def create_sharded(input_files, output_file, options, num_workers, shard_size_mb=8):
    """Scale mode: shards processed by `num_workers` processes, one output file each.

    Every shard is written under a temporary name and renamed into place once all are made, so
    an interrupted run leaves no finished-looking subset of the shards.

    Returns:
      A `Summary`; its `output_files` are in shard order.
    """
    start = time.monotonic()
    shards = plan_scale_mode(input_files, output_file, options, shard_size_mb)
    # A worker spawns a Python that imports the tokenizer (about a second): none without a shard.
    num_workers = max(1, min(num_workers, len(shards)))
    logger.info("Cut the input into %d shards for %d workers", len(shards), num_workers)
    summary = Summary()
    progress = Progress("create_pretraining_data", rate_of="instances")
    names = {}
    with (
        contextlib.ExitStack() as outputs,  # renames every shard at its end, or deletes them all
        contextlib.closing(_made_shards(list(enumerate(shards)), num_workers, options)) as made,
    ):
        for index, records, shard_summary in made:
            if records:
                name = shard_file_name(output_file, index, len(shards))
                _write(records, [outputs.enter_context(files.atomic_output(name))])
                names[index] = name
            summary.add(shard_summary)
            progress.update(shards=len(names), documents=summary.documents, instances=summary.instances)
        if summary.documents == 0:
            raise ValueError(f"{', '.join(input_files)}: no text found (the input has only blank lines)")
        summary.output_files = [names[i] for i in sorted(names)]
        remove_stale_shards(output_file, summary.output_files)  # then the renames, on leaving
    progress.done()
    summary.seconds = time.monotonic() - start
    return summary


def create_pretraining_data(
    input_file,
    output_file,
    options,
    num_workers=0,
    shard_size_mb=8,
    runner=None,
    num_output_shards=0,
    pipeline_args=(),
):
    """Runs the whole job.

    Args:
      input_file: Comma-separated glob patterns of text files.
      output_file: Comma-separated TFRecord paths (exact mode: examples go round-robin over
        them, as the original) or one prefix (scale mode and Beam).
      options: `PretrainingDataOptions` (or `CreatePretrainingDataOptions`, whose other flags
        are not read here).
      num_workers: 0 for the exact single-process mode; N >= 1 for scale mode. With
        `runner="DirectRunner"`: the number of local worker processes (0: one per core).
      shard_size_mb: Scale mode's (and Beam's) shard size.
      runner: None, or the Apache Beam runner that runs scale mode's shards
        ("DirectRunner", "DataflowRunner", "FlinkRunner", "SparkRunner", ...).
      num_output_shards: With a runner, the number of output files (0: the runner decides).
      pipeline_args: With a runner, Beam pipeline options (`["--project=...", ...]`).

    Returns:
      A `Summary`.

    Raises:
      ValueError: Bad flags or input, with a message naming the flag or file; a runner
        without Apache Beam installed. Flags that likely miss what was meant are warned about
        once every check has passed, before the work (`PretrainingDataOptions.log_warnings`).
    """
    options.validate()
    options = options.resolved()
    if num_workers < 0:
        raise ValueError(f"--num_workers must be at least 0 (0: exact mode), got {num_workers}")
    if (num_workers or runner) and shard_size_mb <= 0:
        raise ValueError(f"--shard_size_mb must be positive, got {shard_size_mb}")
    if num_output_shards < 0:
        raise ValueError(f"--num_output_shards must be at least 0, got {num_output_shards}")
    if not runner and (num_output_shards or pipeline_args):
        given = ["--num_output_shards"] * bool(num_output_shards) + list(pipeline_args)
        raise ValueError(f"{' '.join(given)}: options of the Beam pipeline, given without --runner")
    if runner:  # before anything is read: a missing Beam or a bad pipeline option fails first
        beam_pipeline = _import_beam_pipeline()
        pipeline = beam_pipeline.make_pipeline(runner, pipeline_args, num_workers)
    output_files = _output_files(output_file, sharded=bool(num_workers or runner))
    # In the order the original reads them: it decides the documents' order, so the examples.
    input_files = files.expand_input_patterns(input_file, sort=False)
    options.log_warnings()
    if runner:
        return beam_pipeline.create_with_beam(
            pipeline, input_files, output_files[0], options, shard_size_mb, num_output_shards
        )
    if num_workers:
        return create_sharded(input_files, output_files[0], options, num_workers, shard_size_mb)
    return create_exact(input_files, output_files, options)


def run_create_pretraining_data(options, pipeline_args=()):
    """The job of `tools/create_pretraining_data.py`: `create_pretraining_data` with its flags.

    Args:
      options: `CreatePretrainingDataOptions`.
      pipeline_args: With `--runner`, the command-line flags the tool does not define (Beam
        pipeline options).

    Returns:
      The `Summary` of what was written.
    """
    return create_pretraining_data(
        options.input_file,
        options.output_file,
        options,
        options.num_workers,
        options.shard_size_mb,
        runner=options.runner,
        num_output_shards=options.num_output_shards,
        pipeline_args=pipeline_args,
    )


def _output_files(output_file, sharded):
    """`--output_file`'s paths, checked before any work: at least one, none twice, each one a
    file that can be written (for scale mode and Beam, the prefix of the shards' names).

    Raises:
      ValueError: The message names the flag and the path.
    """
    output_files = [path.strip() for path in output_file.split(",") if path.strip()]
    if not output_files:
        raise ValueError("--output_file: no output file given")
    if sharded and len(output_files) > 1:
        raise ValueError("scale mode writes sharded files: give a single --output_file prefix")
    repeated = sorted({path for path in output_files if output_files.count(path) > 1})
    if repeated:
        raise ValueError(f"--output_file: {', '.join(repeated)} given more than once")
    for path in output_files:
        if sharded and path.endswith("/"):
            raise ValueError(f"--output_file: {path} is a directory; give the shards' name prefix in it")
        files.check_output_path(shard_file_name(path, 0, 1) if sharded else path, "--output_file")
    return output_files


def _import_beam_pipeline():
    """`bert_tf.data.beam_pipeline`, or a one-line error saying what to install."""
    beam_logger = logging.getLogger("apache_beam")
    level = beam_logger.level
    beam_logger.setLevel(logging.ERROR)  # its import notes that Google Cloud clients are absent
    try:
        import bert_tf.data.beam_pipeline as beam_pipeline
    except ImportError as e:
        if not (e.name or "").startswith("apache_beam"):
            raise
        raise ValueError(
            "--runner needs Apache Beam: pip install 'bert_tf[beam]' (apache-beam[tfrecord]==2.77.0)"
        ) from None
    finally:
        beam_logger.setLevel(level)
    return beam_pipeline
