"""Documents: what an uploaded file's text is, how it is cut into passages, how it is shown.

* **Parsing** (:func:`parse_document`): text files (plain text, markdown, JSON, CSV, source
  code, configuration: Letta's list of types) are decoded as UTF-8; PDFs go through ``pypdf``
  (each page's text, pages separated by a blank line). Anything else is refused
  (:class:`UnsupportedFileError`, HTTP 415 as in Letta). A file that does not parse (a broken
  PDF, bytes that are not UTF-8) is an :class:`DocumentError`, recorded on the file.
* **Passages** (:func:`chunk_passages`): the text cut at paragraph, line and sentence
  boundaries into passages of at most ``chunk_size`` characters (Letta embeds 300-token
  chunks; 4 characters a token), each embedded and stored for ``semantic_search_files``.
* **Lines** (:func:`document_lines`): Letta's ``LineChunker``: what ``open_files`` shows and
  ``grep_files`` searches. Code keeps its indentation, markdown is cut into sentences, other
  text into stripped lines; empty lines are dropped; each shown line is numbered from 1.
"""

from __future__ import annotations

import io
import logging
import posixpath
import re

import pypdf
from pypdf.errors import PyPdfError

from ._errors import InvalidRequestError

__all__ = [
    "DocumentError",
    "UnsupportedFileError",
    "chunk_passages",
    "document_lines",
    "file_type",
    "parse_document",
    "window",
]

DEFAULT_CHUNK_SIZE = 1_200  # characters (Letta: 300 tokens)

_CODE_TYPES = "py js ts java cpp cxx c h cs php rb go rs swift kt scala r m html htm vue jsx tsx"
_SCRIPT_TYPES = "sh bash ps1 bat cmd dockerfile sql"
_DATA_TYPES = "json jsonl csv css scss sass less xml yaml yml toml ini cfg conf"
_CODE = frozenset("." + e for e in f"{_CODE_TYPES} {_SCRIPT_TYPES}".split(" "))
_DATA = frozenset("." + e for e in _DATA_TYPES.split(" "))
_DOCS = frozenset((".md", ".markdown"))
_TYPES: dict[str, str] = {
    ".pdf": "application/pdf",
    ".txt": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".json": "application/json",
    ".jsonl": "application/jsonl",
    ".csv": "text/csv",
    ".html": "text/html",
    ".htm": "text/html",
    ".xml": "application/xml",
    ".yaml": "text/x-yaml",
    ".yml": "text/x-yaml",
    ".toml": "application/toml",
}


class DocumentError(InvalidRequestError):
    """The file could not be parsed (names the file and why)."""


class UnsupportedFileError(InvalidRequestError):
    """A file type Kelpie does not parse (Letta answers 415)."""


def _extension(name: str) -> str:
    base = posixpath.basename(name).lower()
    if base == "dockerfile":
        return ".dockerfile"
    return posixpath.splitext(base)[1]


def file_type(name: str, declared: str | None = None) -> str:
    """The MIME type of a file, from its extension (else what the upload declared)."""
    ext = _extension(name)
    if ext in _TYPES:
        return _TYPES[ext]
    if ext in _CODE or ext in _DATA:
        return f"text/x-{ext[1:]}"
    return declared or "application/octet-stream"


def check_supported(name: str, declared: str | None = None) -> str:
    """``"pdf"`` or ``"text"`` for a file Kelpie parses; :class:`UnsupportedFileError` else."""
    ext = _extension(name)
    if ext == ".pdf" or (not ext and declared == "application/pdf"):
        return "pdf"
    text_type = (declared or "").startswith("text/")
    if ext in _TYPES or ext in _CODE or ext in _DATA or (not ext and text_type):
        return "text"
    raise UnsupportedFileError(
        f"{name}: unsupported file type {ext or declared or 'unknown'!r} (text, markdown, JSON, "
        "CSV, source code, configuration files and PDF are supported)"
    )


def parse_document(name: str, data: bytes, declared: str | None = None) -> str:
    """The text of an uploaded file."""
    if check_supported(name, declared) == "pdf":
        return _pdf(name, data)
    try:
        return data.decode("utf-8").replace("\r\n", "\n")
    except UnicodeDecodeError as error:
        raise DocumentError(f"{name}: not UTF-8 text (at byte {error.start})") from None


def _pdf(name: str, data: bytes) -> str:
    # pypdf reports damage it works around through ``logging``, whose records read the wall
    # clock; what matters here is the text or the error, so its logger is quiet meanwhile.
    log = logging.getLogger("pypdf")
    level = log.level
    log.setLevel(logging.CRITICAL + 1)
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise DocumentError(
            f"{name}: not a readable PDF ({type(error).__name__}: {error})"
        ) from None
    finally:
        log.setLevel(level)
    return "\n\n".join(p for p in pages if p)


_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def document_lines(name: str, text: str) -> list[str]:
    """The file's lines as Letta's LineChunker cuts them (without numbers)."""
    ext = _extension(name)
    if ext in _DOCS:
        sentences = _SENTENCE.split(text.strip())
        return [" ".join(s.split()) for s in sentences if s.strip()]
    if ext in _CODE:
        return [line.rstrip() for line in text.splitlines() if line.strip()]
    return [line.strip() for line in text.splitlines() if line.strip()]


def window(
    name: str, text: str, start: int | None = None, end: int | None = None
) -> tuple[str, int]:
    """The numbered lines ``start``..``end`` (0-based, end exclusive) with Letta's header, and
    the number of lines; a ``start`` past the end is an :class:`InvalidRequestError`."""
    lines = document_lines(name, text)
    total = len(lines)
    kind = "sentences" if _extension(name) in _DOCS else "lines"
    if start is not None and end is not None and start >= end:
        raise InvalidRequestError(f"Invalid range: start ({start}) must be less than end ({end})")
    if start is not None and start >= total:
        raise InvalidRequestError(
            f"File {name} has only {total} {kind}, but requested offset {start + 1} is out of range"
        )
    first = max(0, start or 0)
    last = min(end, total) if end is not None else total
    shown = [f"{i + 1}: {line}" for i, line in enumerate(lines[first:last], start=first)]
    if start is not None and end is not None:
        header = f"[Viewing {kind} {first + 1} to {last} (out of {total} {kind})]"
    elif start is not None:
        header = f"[Viewing {kind} {first + 1} to end (out of {total} {kind})]"
    else:
        header = f"[Viewing file start (out of {total} {kind})]"
    return "\n".join([header, *shown]), total


def chunk_passages(text: str, chunk_size: int = DEFAULT_CHUNK_SIZE) -> list[str]:
    """The text as passages of at most ``chunk_size`` characters, cut at paragraph, then
    line, then sentence, then word boundaries (a word longer than a chunk is cut)."""
    if chunk_size < 50:
        raise InvalidRequestError(f"chunk size must be at least 50 characters, got {chunk_size}")
    pieces: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text):
        pieces.extend(_split(paragraph.strip(), chunk_size))
    chunks: list[str] = []
    current = ""
    for piece in pieces:
        if not piece:
            continue
        joined = f"{current}\n\n{piece}" if current else piece
        if len(joined) <= chunk_size:
            current = joined
        else:
            if current:
                chunks.append(current)
            current = piece
    if current:
        chunks.append(current)
    return chunks


def _split(text: str, size: int) -> list[str]:
    if len(text) <= size:
        return [text]
    for pattern in (r"\n", r"(?<=[.!?])\s+", r"\s+"):
        parts = [p for p in re.split(pattern, text) if p]
        if len(parts) > 1:
            out: list[str] = []
            current = ""
            for part in parts:
                for small in _split(part, size):
                    joined = f"{current} {small}" if current else small
                    if len(joined) <= size:
                        current = joined
                    else:
                        if current:
                            out.append(current)
                        current = small
            if current:
                out.append(current)
            return out
    return [text[i : i + size] for i in range(0, len(text), size)]
