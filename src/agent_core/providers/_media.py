"""Encoding image and document bytes for a provider request (base64, data URLs)."""

from __future__ import annotations

import base64

from agent_core.types.content import DocumentBlock, ImageBlock


def b64(data: bytes) -> str:
    """Standard base64 of ``data`` (what every provider takes)."""
    return base64.b64encode(data).decode("ascii")


def data_url(mime_type: str, data: bytes) -> str:
    """``data:<mime>;base64,<data>`` (OpenAI ``image_url``/``file_data``/``input_image``)."""
    return f"data:{mime_type};base64,{b64(data)}"


def document_filename(block: DocumentBlock | ImageBlock) -> str:
    """A file name for a document part (OpenAI requires one): the artifact id with the type's extension."""
    extension = "pdf" if block.mime_type == "application/pdf" else block.mime_type.rsplit("/", 1)[-1]
    return f"{block.artifact_id}.{extension}"
