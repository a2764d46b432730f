"""MCP elicitation forms answered as typed text, for surfaces that ask a person (``soong-agent chat``, chat
channels).

MCP restricts an elicitation's ``requested_schema`` to a flat object of string, number, integer, boolean
and enum fields. :func:`form_fields` lists the fields (``(name, spec, required)``), :func:`kind_of` names a
field's kind, :func:`convert` checks one typed value, :func:`parse_reply` reads a whole reply (one field:
the text is its value; several: one ``name: value`` line per field). Errors are ``ValueError`` naming the
field and what it expects.
"""

from agent_core._mcp.forms import convert, form_fields, kind_of, parse_reply

__all__ = ["convert", "form_fields", "kind_of", "parse_reply"]
