""":func:`gc_paused`: the cyclic garbage collector off while a block allocates many long-lived objects.

Importing the runtime creates tens of thousands of long-lived objects (classes, functions, pydantic
schemas) and almost no garbage; meanwhile the collector runs over and over (about 140 collections, one of
them over the whole heap, on the way to the first model request), which measured ~4 % of the
instructions and ~12 % of the CPU time of a cold start (issue 16). Reference counting still frees
everything it can; the previous state is restored afterwards, so nested or concurrent use is harmless.
With ``tenure=True`` the objects the block leaves young are then moved to the oldest generation without
a traversal (:func:`tenure_young`), instead of being walked by the first young collection after it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

TENURE_MIN_YOUNG = 20_000
"""Young objects left by a paused block from which :func:`tenure_young` tenures them at once."""


@contextmanager
def gc_paused(*, tenure: bool = False) -> Iterator[None]:
    """Disables the cyclic GC for the block; re-enables it after only if it was enabled before (then,
    with ``tenure``, first tenures the young objects: :func:`tenure_young`)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if tenure:
                tenure_young()
            gc.enable()


def tenure_young() -> None:
    """Moves the young objects to the oldest generation without a traversal (``gc.freeze()`` then
    ``gc.unfreeze()``) when there are at least :data:`TENURE_MIN_YOUNG` of them.

    Otherwise the first allocation after a paused block starts a young collection that walks every one of
    them only to promote them. Objects of others that were young at that moment are promoted too: a
    reference cycle among them is then freed by the next full collection instead of a young one. Skipped
    when the application froze objects itself (``gc.get_freeze_count()``), since ``gc.unfreeze()`` would
    release those as well.
    """
    if gc.get_count()[0] >= TENURE_MIN_YOUNG and not gc.get_freeze_count():
        gc.freeze()
        gc.unfreeze()
