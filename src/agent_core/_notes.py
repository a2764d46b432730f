"""Text placed inside the runtime's own tagged notes (issue 31 item 15).

The runtime wraps model-, tool- and file-derived text in tags the model is told to trust as runtime
context (``<system_note>``, ``<child_result>``, ``<delegated_task>``, ``<conversation>``, ...). Such text
must not be able to close its note and write "runtime" instructions after it: :func:`escape_note_text`
turns every tag opener (``<`` followed by a name or ``/``) into ``&lt;``; everything else stays as it was,
so code and prose remain readable.
"""

from __future__ import annotations

import re

_TAG_OPENER = re.compile(r"<(?=\s*/|\s*[A-Za-z_!?])")


def escape_note_text(text: str) -> str:
    """``text`` with every tag opener escaped (``</system_note>`` -> ``&lt;/system_note>``)."""
    return _TAG_OPENER.sub("&lt;", text) if "<" in text else text
