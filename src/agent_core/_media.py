"""Images and PDFs a model reads (issue 34 item 4): type sniffing, size limits, downscaling, storing.

:func:`prepare_media` checks one file's bytes against the model's limits (``[model] image_max_edge_px``,
``image_max_bytes``, ``pdf_max_bytes``). The type comes from the bytes (PNG, JPEG, GIF, WebP, PDF), never
from a name. An image within the limits is kept byte for byte (its size is read from its header, no
dependency); a larger one is downscaled to the long edge and re-encoded (JPEG at falling quality until
it fits the byte limit) with Pillow, the ``images`` extra, imported only then. Without Pillow, or for a PDF
over its limit, :class:`MediaError` says which limit and which key. :func:`store_media` writes the bytes
as an artifact (never inline in the session database) and returns the :class:`ImageBlock` /
:class:`DocumentBlock` that references it.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent_core.types.content import DocumentBlock, ImageBlock

if TYPE_CHECKING:
    from agent_core._artifacts.manager import ArtifactManager
    from agent_core.config.model import ResolvedModelConfig

IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
PDF_TYPE = "application/pdf"
JPEG_QUALITIES = (85, 70, 55, 40)
EXTENSIONS = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/gif": "gif",
    "image/webp": "webp",
    PDF_TYPE: "pdf",
}


class MediaError(ValueError):
    """Bytes a model cannot be sent (unknown type, over a limit that cannot be met); one clear line."""


@dataclass(frozen=True, slots=True)
class MediaLimits:
    image_max_edge_px: int = 1568
    image_max_bytes: int = 5 * 1024 * 1024
    pdf_max_bytes: int = 32 * 1024 * 1024

    @classmethod
    def of(cls, config: ResolvedModelConfig) -> MediaLimits:
        return cls(config.image_max_edge_px, config.image_max_bytes, config.pdf_max_bytes)


@dataclass(frozen=True, slots=True)
class MediaPolicy:
    """What the run's model reads besides text (``[model] input_modalities``) and its size limits; tools
    (``code.read_file``, MCP tools) hand it images and PDFs only when it takes them."""

    modalities: tuple[str, ...] = ("text",)
    limits: MediaLimits = MediaLimits()

    @classmethod
    def of(cls, config: ResolvedModelConfig) -> MediaPolicy:
        return cls(tuple(config.input_modalities), MediaLimits.of(config))

    def takes(self, mime_type: str | None) -> bool:
        """Whether the model reads a file of this type (an image type or a PDF)."""
        if mime_type == PDF_TYPE:
            return "pdf" in self.modalities
        return mime_type in IMAGE_TYPES and "image" in self.modalities


@dataclass(frozen=True, slots=True)
class Prepared:
    data: bytes
    mime_type: str
    width: int | None = None
    height: int | None = None
    downscaled_from: tuple[int, int] | None = None

    @property
    def kind(self) -> str:
        """``image`` or ``pdf``."""
        return "pdf" if self.mime_type == PDF_TYPE else "image"

    def describe(self) -> str:
        size = f"{len(self.data):,} bytes"
        if self.kind == "pdf":
            return f"PDF document, {size}"
        dims = f"{self.width}x{self.height} " if self.width and self.height else ""
        note = ""
        if self.downscaled_from is not None:
            note = f", downscaled from {self.downscaled_from[0]}x{self.downscaled_from[1]}"
        return f"{self.mime_type} image {dims}({size}{note})"


def sniff(data: bytes) -> str | None:
    """The MIME type of an image or PDF from its first bytes, else ``None``."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data.lstrip()[:5] == b"%PDF-":
        return PDF_TYPE
    return None


def image_size(data: bytes, mime_type: str) -> tuple[int, int] | None:
    """``(width, height)`` from the image header (PNG, GIF, JPEG, WebP), else ``None``."""
    try:
        if mime_type == "image/png" and len(data) >= 24:
            width, height = struct.unpack(">II", data[16:24])
            return int(width), int(height)
        if mime_type == "image/gif" and len(data) >= 10:
            width, height = struct.unpack("<HH", data[6:10])
            return int(width), int(height)
        if mime_type == "image/jpeg":
            return _jpeg_size(data)
        if mime_type == "image/webp":
            return _webp_size(data)
    except struct.error:
        return None
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    index = 2
    while index + 9 < len(data):
        if data[index] != 0xFF:
            index += 1
            continue
        marker = data[index + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            index += 2
            continue
        (length,) = struct.unpack(">H", data[index + 2 : index + 4])
        if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
            height, width = struct.unpack(">HH", data[index + 5 : index + 9])
            return int(width), int(height)
        index += 2 + length
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        width = 1 + int.from_bytes(data[24:27], "little")
        height = 1 + int.from_bytes(data[27:30], "little")
        return width, height
    if chunk == b"VP8 " and len(data) >= 30:
        width, height = struct.unpack("<HH", data[26:30])
        return int(width) & 0x3FFF, int(height) & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    return None


def prepare_media(data: bytes, limits: MediaLimits, *, mime_hint: str = "", name: str = "") -> Prepared:
    """``data`` ready to send: its type checked, an image downscaled to the limits; or :class:`MediaError`."""
    mime = sniff(data)
    label = f"{name!r}" if name else "the file"
    if mime is None:
        hint = f" (said to be {mime_hint})" if mime_hint else ""
        raise MediaError(f"{label}{hint} is not an image (PNG, JPEG, GIF, WebP) or a PDF a model can read")
    if mime == PDF_TYPE:
        if len(data) > limits.pdf_max_bytes:
            raise MediaError(
                f"{label} is a {len(data):,}-byte PDF, over model.pdf_max_bytes = {limits.pdf_max_bytes:,}; "
                "send a smaller document or raise the limit if the model takes it"
            )
        return Prepared(data, mime)
    size = image_size(data, mime)
    if size is not None and max(size) <= limits.image_max_edge_px and len(data) <= limits.image_max_bytes:
        return Prepared(data, mime, size[0], size[1])
    return _downscale(data, mime, size, limits, label)


def _downscale(
    data: bytes, mime: str, size: tuple[int, int] | None, limits: MediaLimits, label: str
) -> Prepared:
    shown = f"{size[0]}x{size[1]}, " if size else ""
    try:
        from PIL import Image
    except ImportError:
        raise MediaError(
            f"{label} is a {shown}{len(data):,}-byte image, over model.image_max_edge_px = "
            f"{limits.image_max_edge_px} / model.image_max_bytes = {limits.image_max_bytes:,}; install the "
            "images extra (pip install 'soong-agent[images]', Pillow) to downscale it, or raise the limits"
        ) from None
    try:
        image: Any = Image.open(io.BytesIO(data))
        image.load()
    except Exception as exc:  # Pillow raises many types for a damaged file
        raise MediaError(f"{label} could not be decoded as {mime}: {exc}") from exc
    original = (int(image.width), int(image.height))
    scale = min(1.0, limits.image_max_edge_px / max(original))
    target = (max(1, round(original[0] * scale)), max(1, round(original[1] * scale)))
    if target != original:
        image = image.resize(target, Image.Resampling.LANCZOS)
    encoded, out_mime = _encode(image, mime)
    if len(encoded) > limits.image_max_bytes:
        for quality in JPEG_QUALITIES:
            encoded, out_mime = _encode(image, "image/jpeg", quality)
            if len(encoded) <= limits.image_max_bytes:
                break
    if len(encoded) > limits.image_max_bytes:
        raise MediaError(
            f"{label} is still {len(encoded):,} bytes at {target[0]}x{target[1]}, over model.image_max_bytes = "
            f"{limits.image_max_bytes:,}; lower model.image_max_edge_px or raise the byte limit"
        )
    return Prepared(encoded, out_mime, target[0], target[1], downscaled_from=original)


def _encode(image: Any, mime: str, quality: int = JPEG_QUALITIES[0]) -> tuple[bytes, str]:
    buffer = io.BytesIO()
    if mime == "image/jpeg":
        image.convert("RGB").save(buffer, format="JPEG", quality=quality, optimize=True)
        return buffer.getvalue(), mime
    if mime == "image/webp":
        image.save(buffer, format="WEBP", quality=quality)
        return buffer.getvalue(), mime
    frame = image if image.mode in ("RGB", "RGBA", "L", "LA", "P") else image.convert("RGBA")
    frame.save(buffer, format="PNG", optimize=True)  # PNG and GIF (its first frame) as PNG
    return buffer.getvalue(), "image/png"


async def store_media(
    artifacts: ArtifactManager,
    prepared: Prepared,
    *,
    filename: str,
    session_id: str,
    kind: str,
    agent_id: str | None = None,
    run_id: str | None = None,
    tool_call_id: str | None = None,
    detail: Any = None,
) -> ImageBlock | DocumentBlock:
    """Writes ``prepared`` as an artifact; the block that shows it to a model."""
    stem = filename.rsplit(".", 1)[0] if "." in filename else filename
    name = f"{stem or 'attachment'}.{EXTENSIONS.get(prepared.mime_type, 'bin')}"
    ref = await artifacts.create(
        prepared.data,
        filename=name,
        mime_type=prepared.mime_type,
        summary=f"{filename}: {prepared.describe()}",
        kind=kind,
        session_id=session_id,
        agent_id=agent_id,
        run_id=run_id,
        tool_call_id=tool_call_id,
        metadata={"width": prepared.width, "height": prepared.height} if prepared.kind == "image" else None,
    )
    if prepared.kind == "pdf":
        return DocumentBlock(artifact_id=ref.artifact_id, mime_type=prepared.mime_type)
    return ImageBlock(artifact_id=ref.artifact_id, mime_type=prepared.mime_type, detail=detail)
