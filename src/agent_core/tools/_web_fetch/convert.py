"""A fetched body as text for the model: HTML → Markdown (``markdownify``), other text as it is.

HTML: ``<script>``, ``<style>``, ``<noscript>``, ``<template>`` and ``<svg>`` are dropped, the ``<title>``
is returned apart, relative ``href``/``src`` values become absolute against the page URL, and the
``<body>`` (the whole document without one) is converted with ATX headings. The charset comes from the
``Content-Type`` header, else from the document (HTML ``<meta>``), else UTF-8 with replacement characters.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urljoin

TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/xml",
        "application/javascript",
        "application/x-javascript",
        "application/ld+json",
        "application/rss+xml",
        "application/atom+xml",
        "application/x-yaml",
        "application/yaml",
        "application/toml",
    }
)
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_DROPPED = ("script", "style", "noscript", "template", "svg")

Format = Literal["markdown", "text", "binary"]


@dataclass(frozen=True, slots=True)
class Converted:
    format: Format
    text: str
    title: str | None = None


def media_type(content_type: str) -> tuple[str, str | None]:
    """``("text/html", "utf-8")`` from ``text/html; charset=UTF-8`` (charset ``None`` when absent or unknown)."""
    kind, _, params = content_type.partition(";")
    charset: str | None = None
    for param in params.split(";"):
        name, _, value = param.strip().partition("=")
        if name.strip().lower() == "charset" and value.strip():
            candidate = value.strip().strip("\"'")
            try:
                charset = codecs.lookup(candidate).name
            except LookupError:
                charset = None
    return kind.strip().lower(), charset


def _looks_html(body: bytes) -> bool:
    head = body[:1024].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html"))


def classify(content_type: str, body: bytes) -> Format:
    """``markdown`` for HTML, ``text`` for other textual types, ``binary`` for the rest."""
    kind, _ = media_type(content_type)
    if kind in HTML_TYPES or (not kind and _looks_html(body)):
        return "markdown"
    if kind.startswith("text/") or kind in TEXT_TYPES or kind.endswith(("+json", "+xml")):
        return "text"
    if not kind and b"\x00" not in body[:4096]:
        return "text"
    return "binary"


def convert(body: bytes, content_type: str, url: str) -> Converted:
    """The body as Markdown or text (see the module docstring); ``binary`` carries no text."""
    kind = classify(content_type, body)
    _, charset = media_type(content_type)
    if kind == "binary":
        return Converted("binary", "")
    if kind == "text":
        return Converted("text", body.decode(charset or "utf-8", errors="replace"))
    return _html(body, charset, url)


def _html(body: bytes, charset: str | None, url: str) -> Converted:
    from bs4 import BeautifulSoup  # imported on the first HTML page (cold start)
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(body, "html.parser", from_encoding=charset)
    for tag in soup(list(_DROPPED)):
        tag.decompose()
    title_tag = soup.find("title")
    title = " ".join(title_tag.get_text().split()) if title_tag is not None else None
    for attribute, tag_names in (("href", ("a", "link")), ("src", ("img",))):
        for tag in soup.find_all(list(tag_names)):
            value = tag.get(attribute)
            if isinstance(value, str) and value and not value.startswith(("#", "data:", "javascript:")):
                tag[attribute] = urljoin(url, value)
    root = soup.body or soup
    if root is soup and title_tag is not None:
        title_tag.decompose()
    text = MarkdownConverter(heading_style="ATX", bullets="-").convert_soup(root)
    lines = [line.rstrip() for line in text.splitlines()]
    cleaned: list[str] = []
    for line in lines:  # at most one blank line in a row
        if line or (cleaned and cleaned[-1]):
            cleaned.append(line)
    return Converted("markdown", "\n".join(cleaned).strip() + "\n", title or None)
