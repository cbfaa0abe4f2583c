"""The cyclic garbage collector's thresholds for the operator's process.

The operator's heap is mostly long-lived: the node index, the drift watch's stores, queued
Events and PolicyReports. What passes through it is large and short-lived: a LIST page of 500
objects decodes into some hundred thousand dicts, lists and strings that live until the page
is applied, long enough for CPython's young collections (every 700 net allocations) to promote
them to the oldest generation. Promoted, they count towards CPython's trigger for a full
collection (ten middle-generation collections, once the objects promoted since the last full
one reach a quarter of the long-lived ones), and a full collection walks the whole heap.

At 15,000 GPU nodes and 30,000 DaskClusters a first drift pass (in process) made 32 to 35 full
collections of up to 240 ms each, 4.3 to 5.5 s of CPU, and a webhook call that arrives during
one waits for it (docs/performance.md, "The collector's thresholds"). The LIST pages hold no
reference cycles; they are freed by reference counting either way, so walking them finds
nothing. :data:`THRESHOLDS` keeps young collections a few milliseconds long (2,000 for 700)
and lets a full collection wait for ten times as many middle-generation ones: one full
collection in that pass. Cyclic garbage is still found, by the young collections when it dies
young and by a full collection at most every 100 middle-generation ones. Measured on CPython
3.11, the image's Python.
"""

from __future__ import annotations

import gc

__all__ = ["THRESHOLDS", "configure"]

THRESHOLDS = (2000, 10, 100)  # gc.set_threshold(young, middle, full); CPython's are (700, 10, 10)


def configure() -> None:
    """Set the process's collector thresholds (the operator calls this once, at start)."""
    gc.set_threshold(*THRESHOLDS)
