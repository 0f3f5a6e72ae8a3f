"""`create_pretraining_data`: text corpus -> pretraining TFRecords, exact or sharded and parallel.

Exact mode (`num_workers=0`, the default) is the original's algorithm on one `random.Random`:
the same input, vocab, flags and seed give the same examples in the same order.

Scale mode (`num_workers=N`) cuts the input into shards of about `shard_size_mb` at document
boundaries. Each shard is the original's algorithm on its own documents with its own
`random.Random`, seeded from the seed and the shard index, and is written to its own file
`<output_file>-SSSSS-of-NNNNN`. Memory is bounded by a shard, workers run in parallel, and
reruns give the same files. The worker processes do not load TensorFlow: they return serialized
examples and this process frames them into TFRecords.

On Apache Beam (`runner=...`, `beam_pipeline.py`), the same shards are made by the same
`_ShardMaker.make_shard` on the runner's workers, and Beam's sink writes them.
"""

import concurrent.futures
import contextlib
import ctypes
import ctypes.util
import dataclasses
import itertools
import logging
import multiprocessing
import os
import random
import re
import signal
import time

from bert_tf import files
from bert_tf.data.documents import CorpusBuilder, check_not_compressed, is_blank_line
from bert_tf.data.examples import ExampleEncoder, RecordWriter
from bert_tf.data.instances import create_instances
from bert_tf.data.masking import Masker
from bert_tf.progress import Progress
from bert_tf.text.tokenization import FullTokenizer

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class PretrainingDataOptions:
    """The original's flags (and defaults) that decide the examples."""

    vocab_file: str
    do_lower_case: bool = True
    do_whole_word_mask: bool = False
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    random_seed: int = 12345
    dupe_factor: int = 10
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1

    def validate(self):
        """Rejects what the original cannot run: below 5 tokens a pair does not fit beside
        `[CLS] [SEP] [SEP]`, and it fails on negative predictions (0 means no masked LM).

        Raises:
          ValueError: The message names the flag.
        """
        if self.max_seq_length < 5:
            raise ValueError(f"--max_seq_length must be at least 5, got {self.max_seq_length}")
        if self.max_predictions_per_seq < 0:
            raise ValueError(
                f"--max_predictions_per_seq must be at least 0, got {self.max_predictions_per_seq}"
            )
        if self.dupe_factor < 1:
            raise ValueError(f"--dupe_factor must be positive, got {self.dupe_factor}")
        for name in ("masked_lm_prob", "short_seq_prob"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"--{name} must be in [0, 1], got {getattr(self, name)}")


@dataclasses.dataclass
class Summary:
    """What a run wrote."""

    documents: int = 0
    instances: int = 0
    tokens: int = 0
    masked: int = 0
    random_next: int = 0
    output_files: list = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    def add(self, other):
        for field in ("documents", "instances", "tokens", "masked", "random_next"):
            setattr(self, field, getattr(self, field) + getattr(other, field))
        self.output_files.extend(other.output_files)

    def format(self):
        n = max(self.instances, 1)
        return "\n".join(
            [
                f"Wrote {self.instances:,} instances from {self.documents:,} documents "
                f"in {self.seconds:.1f} s ({self.instances / max(self.seconds, 1e-9):,.0f} instances/s).",
                f"  tokens: {self.tokens:,} (mean {self.tokens / n:.1f} per instance)",
                f"  masked: {self.masked:,} ({self.masked / max(self.tokens, 1):.2%} of tokens, "
                f"{self.masked / n:.1f} per instance)",
                f"  next sentence: {self.instances - self.random_next:,} real, "
                f"{self.random_next:,} random ({self.random_next / n:.1%} random)",
                "  output: " + ", ".join(self.output_files),
            ]
        )


class _ShardMaker:
    """Everything needed to turn a list of file ranges into serialized examples."""

    def __init__(self, options, exact=True):
        self.options = options
        self.exact = exact
        self.tokenizer = FullTokenizer(options.vocab_file, options.do_lower_case)
        vocab = self.tokenizer.vocab
        missing = [t for t in ("[CLS]", "[SEP]", "[MASK]") if t not in vocab]
        if missing:
            raise ValueError(f"{options.vocab_file}: the vocab has no {', '.join(missing)}")
        self.masker = Masker(
            vocab,
            options.masked_lm_prob,
            options.max_predictions_per_seq,
            options.do_whole_word_mask,
            exact_stream=exact,
        )
        self.encoder = ExampleEncoder(
            options.max_seq_length, options.max_predictions_per_seq, max(vocab.values())
        )

    def read(self, ranges):
        builder = CorpusBuilder(self.tokenizer)
        for path, start, end in ranges:
            builder.add_file(path, start, end)
        return builder.build()

    def make_records(self, corpus, rng, on_document=None):
        """Serialized examples of `corpus` in the original's order, and their `Summary`."""
        options, vocab = self.options, self.tokenizer.vocab
        summary = Summary(documents=corpus.num_documents)

        def encode(instance):
            summary.instances += 1
            summary.tokens += len(instance.input_ids)
            summary.masked += len(instance.masked_lm_positions)
            summary.random_next += instance.is_random_next
            return self.encoder.encode(
                instance.input_ids,
                instance.num_segment_a,
                instance.masked_lm_positions,
                instance.masked_lm_ids,
                instance.is_random_next,
            )

        records = create_instances(
            corpus,
            rng,
            options.dupe_factor,
            options.max_seq_length,
            options.short_seq_prob,
            self.masker,
            vocab["[CLS]"],
            vocab["[SEP]"],
            encode=encode,
            on_document=on_document,
            exact_stream=self.exact,
        )
        return records, summary

    def make_shard(self, index, ranges):
        """Serialized examples of one scale-mode shard and their `Summary`.

        Scale mode's worker processes and the Beam pipeline's workers both call this, so the
        same shard gives the same examples in either.

        Args:
          index: The shard's index in the plan; with `random_seed` it seeds the shard's
            `random.Random`.
          ranges: The shard's `(path, start, end)` byte ranges, as `plan_shards` cut them.

        Returns:
          A list of serialized examples and their `Summary` (empty for a shard of blank lines).
        """
        corpus = self.read(ranges)
        if corpus.num_documents == 0:
            return [], Summary()
        # A string seed is hashed with SHA-512: the same on every machine and Python process.
        seed = f"bert_tf/{self.options.random_seed}/shard/{index}"
        return self.make_records(corpus, random.Random(seed))


def _check_corpus(corpus, where):
    if corpus.num_documents == 0:
        raise ValueError(f"{where}: no text found (the input is empty or has only blank lines)")
    if corpus.num_documents == 1:
        logger.warning(
            "%s has a single document: its 'random next sentence' segments come from the same "
            "document (the original does the same after ten tries for another one)",
            where,
        )


def _write(records, output_files):
    with RecordWriter(output_files) as writer:
        for record in records:
            writer.write(record)


def create_exact(input_files, output_files, options):
    """The original's single-process algorithm. Returns a `Summary`."""
    start = time.monotonic()
    maker = _ShardMaker(options)
    progress = Progress("create_pretraining_data", rate_of="instances")
    logger.info("Reading and tokenizing %d input files", len(input_files))
    corpus = maker.read([(path, 0, None) for path in input_files])
    _check_corpus(corpus, ", ".join(input_files))
    progress.update(documents=corpus.num_documents, tokens=corpus.num_tokens, instances=0)
    records, summary = maker.make_records(
        corpus, random.Random(options.random_seed), on_document=lambda n: progress.update(instances=n)
    )
    _write(records, output_files)
    progress.done()
    summary.output_files = list(output_files)
    summary.seconds = time.monotonic() - start
    return summary


def plan_shards(input_files, shard_bytes):
    """Cuts the input into byte ranges of about `shard_bytes`, each ending after a blank line.

    A cut goes after the first blank line (`is_blank_line`: the original's document boundary,
    whatever the line endings or the whitespace on it) that starts at least `shard_bytes` into
    the shard, so a shard exceeds `shard_bytes` by less than one document.

    Returns:
      A list of shards, each a list of `(path, start, end)` ranges; small files are grouped
      into one shard.
    """
    shards, current, current_size = [], [], 0
    for path in input_files:
        size = files.size(path)
        if size == 0:
            logger.warning("%s is empty; skipped", path)
            continue
        start = 0
        with files.open_file(path, "rb") as reader:
            check_not_compressed(path, reader)
            while start < size:
                end = _document_boundary(reader, start + shard_bytes - current_size, size)
                current.append((path, start, end))
                current_size += end - start
                start = end
                if current_size >= shard_bytes:
                    shards.append(current)
                    current, current_size = [], 0
    if current:
        shards.append(current)
    return shards


def _document_boundary(reader, position, size):
    """The offset just after the first blank line that starts at or after `position` (or `size`)."""
    if position >= size:
        return size
    if position > 0:
        reader.seek(position - 1)
        reader.readline()  # the rest of the line holding `position - 1`
    else:
        reader.seek(0)
    for line in iter(reader.readline, b""):
        if is_blank_line(line):
            return reader.tell()
    return size


_WORKER = None


def _init_worker(options):
    global _WORKER
    _end_with_parent()
    _WORKER = _ShardMaker(options, exact=False)


def _end_with_parent():
    """Has Linux kill this worker when the tool's process dies: a kill -9 of the tool would
    otherwise leave its workers running to the end of their shards (about 700 MB each)."""
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


def plan_scale_mode(input_files, output_file, options, shard_size_mb):
    """What scale mode checks and plans before any shard is made (the Beam pipeline too).

    Returns:
      The shards of `plan_shards`.

    Raises:
      ValueError: A bad vocab, or an empty input.
    """
    _ShardMaker(options)  # fail here, not in a worker, on a bad vocab
    shards = plan_shards(input_files, int(shard_size_mb * (1 << 20)))
    if not shards:
        raise ValueError(f"{', '.join(input_files)}: no text found (the input is empty)")
    return shards


def shard_file_name(output_file, index, num_shards):
    return f"{output_file}-{index:05d}-of-{num_shards:05d}"


def remove_stale_shards(output_file, written):
    """Deletes the shards of `output_file` (`<output_file>-SSSSS-of-NNNNN`) that this run did
    not write: those of an earlier run with another shard count, or of a shard empty this time.
    A glob of the prefix would otherwise train on them beside this run's. The temporaries of
    shards that a killed run left go too (`files.remove_abandoned`). Call it once every shard of
    this run is written: scale mode calls it before renaming them into place, so a run killed
    in between leaves no earlier run's shards beside some of its own.

    Args:
      output_file: The prefix.
      written: The paths of this run's shards.

    Returns:
      The shards removed.
    """
    directory, prefix = os.path.split(output_file)
    # A shard's name, and a temporary's: `<shard>.tmp-<pid>`, or `<shard>.tmp-<pid>.tmp-<pid>`
    # while its records are written (`RecordWriter`'s own temporary inside this run's).
    shard_name = re.compile(re.escape(prefix) + r"(-\d{5}-of-\d{5})((?:\.tmp-\d+)+)?")
    kept = {os.path.basename(path) for path in written}
    names = [match for name in files.listdir(directory or ".") if (match := shard_name.fullmatch(name))]
    stale = [os.path.join(directory, m.string) for m in names if not m.group(2) and m.string not in kept]
    for path in stale:
        logger.warning("Removing %s: a shard of an earlier run with this --output_file", path)
        files.remove(path)
    for shard in sorted({m.group(1) for m in names if m.group(2)}):
        files.remove_abandoned(output_file + shard)
    return stale


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
      options: `PretrainingDataOptions`.
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
        without Apache Beam installed.
    """
    options.validate()
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
    if runner:
        return beam_pipeline.create_with_beam(
            pipeline, input_files, output_files[0], options, shard_size_mb, num_output_shards
        )
    if num_workers:
        return create_sharded(input_files, output_files[0], options, num_workers, shard_size_mb)
    return create_exact(input_files, output_files, options)


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
        from bert_tf.data import beam_pipeline
    except ImportError as e:
        if not (e.name or "").startswith("apache_beam"):
            raise
        raise ValueError(
            "--runner needs Apache Beam: pip install 'bert_tf[beam]' (apache-beam[tfrecord]==2.77.0)"
        ) from None
    finally:
        beam_logger.setLevel(level)
    return beam_pipeline
