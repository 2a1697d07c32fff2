"""Request latency, recorded cheaply: a histogram of log-spaced bins (``Stats.latency``, bin -> count).

A reply adds one to one bin (a logarithm and a dict update): no list grows with the run, and histograms of
workers, Ray batches or a panel's judges add up bin by bin. A quantile read back is within half a bin
(about 4.4 %) of the exact one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

# bins per doubling of the latency: 2 ** (1 / 8) = 1.09 between bin edges
BINS_PER_DOUBLING = 8
_FLOOR_S = 1e-4  # below 0.1 ms: one bin (a loopback reply)


def latency_bin(seconds: float) -> int:
    """The bin of a latency of ``seconds``.

    Example:
        >>> latency_bin(1.0), latency_bin(2.0), latency_bin(0.0)
        (0, 8, -107)
    """
    return math.floor(math.log2(max(seconds, _FLOOR_S)) * BINS_PER_DOUBLING)


def latency_quantile(histogram: Mapping[int | str, int], q: float) -> float | None:
    """The ``q`` quantile (0-1) of the latencies of ``histogram`` in seconds (the geometric middle of its bin);
    None when it is empty. Keys may be strings (the histogram read back from JSON).

    Example:
        >>> h = {latency_bin(0.1): 50, latency_bin(1.0): 45, latency_bin(4.0): 5}
        >>> round(latency_quantile(h, 0.5), 3), round(latency_quantile(h, 0.95), 2)
        (0.101, 1.04)
    """
    counts = sorted((int(k), n) for k, n in histogram.items() if n > 0)
    total = sum(n for _, n in counts)
    if not total:
        return None
    rank, seen = q * total, 0
    for b, n in counts:
        seen += n
        if seen >= rank:
            return float(2 ** ((b + 0.5) / BINS_PER_DOUBLING))
    return float(2 ** ((counts[-1][0] + 0.5) / BINS_PER_DOUBLING))
