"""The ``progress`` callback of an embed job: a tqdm bar over this rank's sentences, with tokens/s, and, when the
input is a file (not a stream), their total and an ETA (the job counts them up front: ``wants_total``/``set_total``).

Called after every batch, it is also where a stop request (SIGINT/SIGTERM) ends the job between batches.
"""

from __future__ import annotations

from tqdm import tqdm

from elmo.runtime.distributed import DistInfo
from elmo.runtime.interrupts import StopRequest


class EmbedProgress:
    """Use as ``with EmbedProgress(show, ranks, stop) as progress: job.run(..., progress=progress)``."""

    def __init__(self, show: bool, ranks: DistInfo, stop: StopRequest) -> None:
        name = f"rank {ranks.rank}" if ranks.world_size > 1 else "embed"
        self.bar = tqdm(unit=" sentences", disable=not show, position=ranks.local_rank, desc=name, smoothing=0.1)
        self.tokens = 0
        self.stop = stop

    @property
    def wants_total(self) -> bool:
        """Whether the job should count its sentences up front (only a bar that is shown needs them)."""
        return not self.bar.disable

    def set_total(self, total: int) -> None:
        """This rank's sentences to embed: the bar then shows done / total and an ETA."""
        self.bar.total = total
        self.bar.refresh()

    def __call__(self, sentences: int, tokens: int) -> None:
        self.stop.raise_if_requested()
        self.tokens += tokens
        self.bar.update(sentences)
        elapsed = self.bar.format_dict["elapsed"] or 1e-9
        self.bar.set_postfix_str(f"{self.tokens / elapsed:,.0f} tokens/s", refresh=False)

    def __enter__(self) -> EmbedProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.bar.close()
