"""The soak workload: a concurrency-16 worker process under mixed load (completions,
retries, pauses, dead jobs, a periodic job) with a prune every second keeps its memory
flat after warm-up.

Budget: about 20 s (a 16 s soak, one worker process).
"""

from __future__ import annotations

import pytest

from venturi.bench.soak import SOAK_CONCURRENCY, Soak
from venturi.bench.support import BenchSettings
from venturi.bench.workloads import VenturiBench

SOAK_SECONDS = 16.0
# A prune every second: sixteen in the run, so a prune that leaves a little memory behind
# each time adds up to more than the bound.
EVERY_SECOND = "completed=1s,cancelled=1s,dead=1s,every=1s"
# RSS at the end over RSS after the warm-up (a quarter of the run). A flat worker grows
# by 1-2% here while its table reaches its steady size.
GROWTH_BOUND = 1.08


@pytest.mark.slow
def test_a_worker_process_under_mixed_load_and_prunes_keeps_its_memory_flat(
    database_dsn: str,
) -> None:
    bench = VenturiBench(BenchSettings(database_dsn, soak_seconds=SOAK_SECONDS, timeout=120))
    try:
        soak = Soak(bench, EVERY_SECOND)
        figures = soak.round()
    finally:
        bench.close()
    samples = [(round(at), round(rss, 1), threads) for at, rss, threads in soak.samples]
    assert soak.report["pruned"] > 0 and soak.report["ticks"] > 0, soak.report
    assert figures["soak.growth"] < GROWTH_BOUND, samples
    # Threads neither pile up nor come and go: the prunes start none.
    threads = {threads for at, _, threads in samples if at >= SOAK_SECONDS / 4}
    assert len(threads) == 1 and threads.pop() > SOAK_CONCURRENCY, samples
