"""Scale mode's shards, made alike by its local worker processes and by Apache Beam's workers.

`plan_scale_mode` cuts the input into shards of byte ranges ending at document boundaries
(`plan_shards`); `ShardMaker.make_shard` turns a shard into its serialized examples with the
shard's own seeded `random.Random`; a shard's file is `shard_file_name`'s
`<output_file>-SSSSS-of-NNNNN`, and `remove_stale_shards` deletes those of an earlier run.
`ShardMaker` also makes exact mode's examples (`make_records` on the whole corpus). A `Summary`
counts what a run wrote.

`pipeline.py` (the local runners) and `beam_pipeline.py` (Beam's) both build on this module,
which imports neither.
"""

import dataclasses
import logging
import os
import random
import re

from bert_tf import files
from bert_tf.data.documents import CorpusBuilder, check_not_compressed, is_blank_line
from bert_tf.data.examples import ExampleEncoder
from bert_tf.data.instances import create_instances
from bert_tf.data.masking import Masker
from bert_tf.text.tokenization import FullTokenizer
from bert_tf.text.word_segmentation import load_word_segmenter

logger = logging.getLogger(__name__)


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


class ShardMaker:
    """Everything needed to turn a list of file ranges into serialized examples.

    Args:
      options: `PretrainingDataOptions`.
      exact: Draw exactly the original's random numbers (exact mode); False for scale mode's
        cheaper draws of the same distributions.

    Raises:
      ValueError: The vocab lacks `[CLS]`, `[SEP]` or `[MASK]`; with `do_whole_word_mask`, the
        `word_segmenter` cannot be loaded (`load_word_segmenter`). Without
        `do_whole_word_mask` the segmenter is not loaded: it would change nothing.
    """

    def __init__(self, options, exact=True):
        if options.do_lower_case is None:  # options not from `create_pretraining_data`
            options = options.resolved()
        self.options = options
        self.exact = exact
        self.tokenizer = FullTokenizer(options.vocab_file, options.do_lower_case)
        vocab = self.tokenizer.vocab
        missing = [t for t in ("[CLS]", "[SEP]", "[MASK]") if t not in vocab]
        if missing:
            raise ValueError(f"{options.vocab_file}: the vocab has no {', '.join(missing)}")
        self.segmenter = None
        if options.do_whole_word_mask:
            self.segmenter = load_word_segmenter(options.word_segmenter)
        self.masker = Masker(
            vocab,
            options.masked_lm_prob,
            options.max_predictions_per_seq,
            options.do_whole_word_mask,
            exact_stream=exact,
            marked_words=self.segmenter is not None,
        )
        self.encoder = ExampleEncoder(
            options.max_seq_length, options.max_predictions_per_seq, max(vocab.values())
        )

    def read(self, ranges, on_line=None):
        """The `Corpus` of `(path, start, end)` byte ranges (`end` None: to the end of the file).

        Args:
          ranges: The ranges, read in their order.
          on_line: None, or called after each line with the counts so far (progress), as
            `CorpusBuilder`'s.
        """
        builder = CorpusBuilder(self.tokenizer, on_line, self.segmenter)
        for path, start, end in ranges:
            builder.add_file(path, start, end)
        return builder.build()

    def make_records(self, corpus, rng, on_instance=None):
        """Serialized examples of `corpus` in the original's order, and their `Summary`.

        Args:
          corpus: A `Corpus`.
          rng: The run's (or the shard's) `random.Random`, not used before.
          on_instance: None, or called with the `Summary` so far after each instance (progress).
        """
        options, vocab = self.options, self.tokenizer.vocab
        summary = Summary(documents=corpus.num_documents)

        def encode(instance):
            summary.instances += 1
            summary.tokens += len(instance.input_ids)
            summary.masked += len(instance.masked_lm_positions)
            summary.random_next += instance.is_random_next
            record = self.encoder.encode(
                instance.input_ids,
                instance.num_segment_a,
                instance.masked_lm_positions,
                instance.masked_lm_ids,
                instance.is_random_next,
            )
            if on_instance is not None:
                on_instance(summary)
            return record

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


def plan_scale_mode(input_files, output_file, options, shard_size_mb):
    """What scale mode checks and plans before any shard is made (the Beam pipeline too).

    Returns:
      The shards of `plan_shards`.

    Raises:
      ValueError: A bad vocab, or an empty input.
    """
    ShardMaker(options)  # fail here, not in a worker, on a bad vocab
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
