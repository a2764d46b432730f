""":func:`gc_paused`: the cyclic garbage collector off while the runtime's modules are imported.

Importing the runtime creates tens of thousands of long-lived objects (classes, functions, pydantic
schemas) and almost no garbage; meanwhile the collector runs over and over (about 140 collections, one of
them over the whole heap, on the way to the first model request), which measured ~4 % of the
instructions and ~12 % of the CPU time of a cold start (issue 16). Reference counting still frees
everything it can; the previous state is restored afterwards, so nested or concurrent use is harmless.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disables the cyclic GC for the block; re-enables it after only if it was enabled before."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
