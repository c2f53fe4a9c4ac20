"""Folders and files: Letta's document memory, stored; uploads parsed and embedded in the
background.

A folder holds files; agents attach folders. An upload is stored at once (its bytes and a
record with ``processing_status="pending"``), acknowledged, and then processed: parsed
(``_documents``), its text stored, cut into passages, embedded and stored, and only then marked
``completed``. Processing is idempotent (every key it writes is derived from the file id, and
every write re-reads the file record in its transaction, so a deleted file is never brought
back), so it is simply run again after a crash: a job marker stays until the file is
completed or failed. A file is never ``completed`` with missing passages.

==========================================  =================================================
``folder/<id>``                              :class:`Folder`
``foldername/<name>``                        the folder id (names are unique)
``folderfile/<folder>/<file>``               :class:`FileRecord`
``fileid/<file>``                            the folder id (files are addressed by id alone)
``fileraw/<file>/<n:08x>``                   the uploaded bytes, in chunks
``filetext/<file>/<n:08x>``                  the parsed text, in chunks
``fchunk/<file>/<n:08x>``                    :class:`FilePassage`: a passage and its vector
``filejob/<file>``                           processing to do (a crash leaves it for later)
``folderagent/<folder>/<agent>``             agents attached to the folder (the agents write it)
==========================================  =================================================
"""

from __future__ import annotations

import posixpath
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from kelpie_agent.embeddings import Embedder
from kelpie_agent.ports import Ports
from kelpie_agent.storage import KV, Transaction

from ._codec import pack, register, unpack
from ._documents import (
    DEFAULT_CHUNK_SIZE,
    DocumentError,
    check_supported,
    chunk_passages,
    file_type,
    parse_document,
)
from ._errors import InvalidRequestError, ResourceNotFoundError
from ._models import check_id
from ._retry import Reader

__all__ = [
    "FilePassage",
    "FileRecord",
    "Folder",
    "FolderStore",
    "file_text",
    "folder_files",
    "load_file",
    "load_folder",
]

_BLOB = 256 * 1024
_EMBED_BATCH = 16
_ATTEMPTS = 8
_BACKOFF = 0.05
STATUSES = ("pending", "parsing", "embedding", "completed", "error")
DUPLICATES = ("skip", "error", "suffix", "replace")


def _mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return dict(value or {})


@attrs.frozen
class Folder:
    id: str
    name: str
    description: str | None = None
    instructions: str | None = None
    metadata: Mapping[str, Any] = attrs.field(factory=dict, converter=_mapping, hash=False)
    embedding: str | None = None
    chunk_size: int = DEFAULT_CHUNK_SIZE
    created_at: float = 0.0
    updated_at: float = 0.0


@attrs.frozen
class FileRecord:
    """A file's metadata and processing state (Letta's FileMetadata)."""

    id: str
    folder_id: str
    file_name: str
    original_file_name: str
    file_type: str
    file_size: int
    processing_status: str = "pending"
    error_message: str | None = None
    total_chunks: int | None = None
    chunks_embedded: int | None = None
    text_chunks: int = 0
    text_size: int = 0
    raw_chunks: int = 0
    created_at: float = 0.0
    updated_at: float = 0.0

    @property
    def done(self) -> bool:
        return self.processing_status in ("completed", "error")


@attrs.frozen
class FilePassage:
    id: str
    file_id: str
    folder_id: str
    n: int
    text: str
    vector: bytes = attrs.field(repr=False)
    embedder: str = ""


for _tag, _cls in (("folder", Folder), ("file", FileRecord), ("file_passage", FilePassage)):
    register(_tag, _cls)


def folder_key(folder_id: str) -> bytes:
    return f"folder/{check_id(folder_id, 'folder id')}".encode()


def name_key(name: str) -> bytes:
    return b"foldername/" + name.encode()


def file_key(folder_id: str, file_id: str) -> bytes:
    return f"folderfile/{folder_id}/{check_id(file_id, 'file id')}".encode()


def file_id_key(file_id: str) -> bytes:
    return f"fileid/{check_id(file_id, 'file id')}".encode()


def blob_key(kind: str, file_id: str, n: int) -> bytes:
    return f"{kind}/{file_id}/{n:08x}".encode()


def passage_key(file_id: str, n: int) -> bytes:
    return f"fchunk/{file_id}/{n:08x}".encode()


def job_key(file_id: str) -> bytes:
    return f"filejob/{file_id}".encode()


def link_key(folder_id: str, agent_id: str) -> bytes:
    return f"folderagent/{folder_id}/{agent_id}".encode()


FOLDERS = b"folder/"
JOBS = b"filejob/"


def _end(prefix: bytes) -> bytes:
    return prefix[:-1] + bytes([prefix[-1] + 1])


async def load_folder(kv: KV | Transaction, folder_id: str) -> Folder | None:
    data = await kv.get(folder_key(folder_id))
    return unpack(data) if data is not None else None


async def load_file(kv: KV | Transaction, file_id: str) -> FileRecord | None:
    folder = await kv.get(file_id_key(file_id))
    if folder is None:
        return None
    data = await kv.get(file_key(unpack(folder), file_id))
    return unpack(data) if data is not None else None


async def folder_files(kv: KV | Transaction, folder_id: str) -> list[FileRecord]:
    """The folder's files, oldest first."""
    rows = await kv.scan_prefix(f"folderfile/{folder_id}/".encode())
    files: list[FileRecord] = [unpack(v) for _, v in rows]
    return sorted(files, key=lambda f: (f.created_at, f.id))


async def _blob(kv: KV | Transaction, kind: str, file_id: str, chunks: int) -> bytes:
    parts = []
    for n in range(chunks):
        part = await kv.get(blob_key(kind, file_id, n))
        if part is None:
            raise InvalidRequestError(f"file {file_id}: stored {kind} chunk {n} is missing")
        parts.append(part)
    return b"".join(parts)


async def file_text(kv: KV | Transaction, record: FileRecord) -> str:
    """The parsed text of a processed file ("" before it is parsed)."""
    if record.text_chunks == 0:
        return ""
    return (await _blob(kv, "filetext", record.id, record.text_chunks)).decode("utf-8")


def _blobs(kind: str, file_id: str, data: bytes) -> list[tuple[bytes, bytes]]:
    return [
        (blob_key(kind, file_id, n), data[i : i + _BLOB])
        for n, i in enumerate(range(0, max(len(data), 1), _BLOB))
    ]


def unique_name(name: str, taken: set[str]) -> str:
    """Letta's ``suffix`` duplicate handling: ``notes.txt`` -> ``notes_(1).txt``."""
    if name not in taken:
        return name
    stem, ext = posixpath.splitext(name)
    n = 1
    while f"{stem}_({n}){ext}" in taken:
        n += 1
    return f"{stem}_({n}){ext}"


class FolderStore:
    """Folders and files outside any actor (their writes are plain serializable transactions)."""

    def __init__(self, kv: KV, ports: Ports) -> None:
        self.kv = kv
        self.ports = ports
        self.read = Reader(kv, ports.rng, _ATTEMPTS, _BACKOFF)

    # -- folders -------------------------------------------------------------------------------
    async def create(self, name: str, **fields: Any) -> Folder:
        now = self.ports.clock.now()
        folder = Folder(
            self.ports.ids.new("source"), name, created_at=now, updated_at=now, **fields
        )

        async def build(txn: Transaction) -> Folder:
            taken = await txn.get(name_key(name))
            if taken is not None and unpack(taken) == folder.id:
                return folder  # an ambiguous commit landed: the name is ours (Reader.transact)
            if taken is not None:
                raise InvalidRequestError(
                    f"a folder named {name!r} already exists ({unpack(taken)})"
                )
            await txn.set(folder_key(folder.id), pack(folder))
            await txn.set(name_key(name), pack(folder.id))
            return folder

        created: Folder = await self.read.transact(build, f"folder {name}")
        return created

    async def get(self, folder_id: str) -> Folder:
        folder = await self.read(lambda: load_folder(self.kv, folder_id), f"folder {folder_id}")
        if folder is None:
            raise ResourceNotFoundError("folder", folder_id)
        assert isinstance(folder, Folder)
        return folder

    async def all(self) -> list[Folder]:
        rows = await self.read(lambda: self.kv.scan_prefix(FOLDERS), "folders")
        folders: list[Folder] = [unpack(v) for _, v in rows]
        return sorted(folders, key=lambda f: (f.created_at, f.id))

    async def update(self, folder_id: str, **changes: Any) -> Folder:
        async def build(txn: Transaction) -> Folder:
            folder = await load_folder(txn, folder_id)
            if folder is None:
                raise ResourceNotFoundError("folder", folder_id)
            new = attrs.evolve(folder, **changes, updated_at=self.ports.clock.now())
            if new.name != folder.name:
                taken = await txn.get(name_key(new.name))
                if taken is not None:
                    raise InvalidRequestError(f"a folder named {new.name!r} already exists")
                await txn.delete(name_key(folder.name))
                await txn.set(name_key(new.name), pack(new.id))
            await txn.set(folder_key(folder_id), pack(new))
            return new

        updated: Folder = await self.read.transact(build, f"folder {folder_id}")
        return updated

    async def agents(self, folder_id: str) -> list[str]:
        """Ids of the agents the folder is attached to."""
        await self.get(folder_id)
        prefix = f"folderagent/{folder_id}/".encode()
        rows = await self.read(lambda: self.kv.scan_prefix(prefix), "the folder's agents")
        return [key[len(prefix) :].decode() for key, _ in rows]

    async def delete(self, folder_id: str) -> list[str]:
        """Delete the folder and its files; returns the agents it was attached to (the caller
        detaches it from them)."""
        attached = await self.agents(folder_id)
        for record in await self.read(lambda: folder_files(self.kv, folder_id), "files"):
            await self.delete_file(folder_id, record.id)

        async def build(txn: Transaction) -> None:
            folder = await load_folder(txn, folder_id)
            if folder is None:
                return
            await txn.delete(folder_key(folder_id))
            await txn.delete(name_key(folder.name))

        await self.read.transact(build, f"folder {folder_id}")
        return attached

    # -- files ---------------------------------------------------------------------------------
    async def upload(
        self,
        folder_id: str,
        name: str,
        data: bytes,
        *,
        declared_type: str | None = None,
        duplicate_handling: str = "suffix",
    ) -> FileRecord | None:
        """Store an upload (``pending``) and its processing job. ``None`` when an existing
        file of that name is kept (``skip``)."""
        if duplicate_handling not in DUPLICATES:
            raise InvalidRequestError(
                f"duplicate_handling: must be one of {', '.join(DUPLICATES)}, got "
                f"{duplicate_handling!r}"
            )
        clean = posixpath.basename(name.replace("\\", "/")).strip()
        if not clean or clean in (".", ".."):
            raise InvalidRequestError(f"file: {name!r} is not a usable file name")
        folder = await self.get(folder_id)
        check_supported(clean, declared_type)  # Letta refuses other types at upload (415)
        now = self.ports.clock.now()
        file_id = self.ports.ids.new("file")
        blobs = _blobs("fileraw", file_id, data)

        async def build(txn: Transaction) -> FileRecord | None:
            existing = await folder_files(txn, folder.id)
            for mine in existing:
                if mine.id == file_id:  # an ambiguous commit landed: our own earlier write
                    return mine
            names = {f.file_name: f for f in existing}
            final = clean
            if clean in names:
                if duplicate_handling == "skip":
                    return None
                if duplicate_handling == "error":
                    raise InvalidRequestError(
                        f"file: {clean!r} already exists in folder {folder.name!r}"
                    )
                if duplicate_handling == "replace":
                    await _delete_file(txn, names[clean])
                else:
                    final = unique_name(clean, set(names))
            record = FileRecord(
                id=file_id,
                folder_id=folder.id,
                file_name=final,
                original_file_name=clean,
                file_type=file_type(clean, declared_type),
                file_size=len(data),
                raw_chunks=len(blobs),
                created_at=now,
                updated_at=now,
            )
            for key, value in blobs:
                await txn.set(key, value)
            await txn.set(file_key(folder.id, file_id), pack(record))
            await txn.set(file_id_key(file_id), pack(folder.id))
            await txn.set(job_key(file_id), b"")
            return record

        stored: FileRecord | None = await self.read.transact(build, f"upload {clean}")
        return stored

    async def file(self, file_id: str, folder_id: str | None = None) -> FileRecord:
        record = await self.read(lambda: load_file(self.kv, file_id), f"file {file_id}")
        if record is None or (folder_id is not None and record.folder_id != folder_id):
            raise ResourceNotFoundError("file", file_id)
        assert isinstance(record, FileRecord)
        return record

    async def files(self, folder_id: str) -> list[FileRecord]:
        await self.get(folder_id)
        listed: list[FileRecord] = await self.read(
            lambda: folder_files(self.kv, folder_id), "files"
        )
        return listed

    async def content(self, record: FileRecord) -> str:
        text: str = await self.read(lambda: file_text(self.kv, record), f"file {record.id}")
        return text

    async def delete_file(self, folder_id: str, file_id: str) -> None:
        tried = False  # a retry may follow a commit that landed without an answer

        async def build(txn: Transaction) -> None:
            nonlocal tried
            data = await txn.get(file_key(folder_id, file_id))
            if data is None:
                if tried:  # gone: this delete's own earlier attempt (or another) landed
                    return
                raise ResourceNotFoundError("file", file_id)
            tried = True
            await _delete_file(txn, unpack(data))

        await self.read.transact(build, f"file {file_id}")

    async def pending(self, limit: int = 50) -> list[str]:
        """Files whose processing is not finished (to run again after a crash)."""
        rows = await self.read(lambda: self.kv.scan_prefix(JOBS, limit=limit), "file jobs")
        return [key[len(JOBS) :].decode() for key, _ in rows]

    # -- processing ----------------------------------------------------------------------------
    async def _update(
        self,
        file_id: str,
        change: Callable[[FileRecord], FileRecord],
        extra: Sequence[tuple[bytes, bytes | None]] = (),
    ) -> FileRecord | None:
        """Apply ``change`` to the file record with ``extra`` writes, in one transaction that
        re-reads the record (``None``: the file is gone or finished, nothing written)."""

        async def build(txn: Transaction) -> FileRecord | None:
            record = await load_file(txn, file_id)
            if record is None or record.done:
                return None
            new = change(record)
            for key, value in extra:
                if value is None:
                    await txn.delete(key)
                else:
                    await txn.set(key, value)
            await txn.set(file_key(new.folder_id, new.id), pack(new))
            if new.done:
                await txn.delete(job_key(new.id))
            return new

        result: FileRecord | None = await self.read.transact(build, f"processing file {file_id}")
        return result

    async def process(
        self, file_id: str, embedder: Embedder, embedder_name: str
    ) -> FileRecord | None:
        """Parse, chunk and embed one file, then mark it ``completed`` (or ``error``). Safe to
        run again, and concurrently: every write is idempotent."""
        found: FileRecord | None = await self.read(
            lambda: load_file(self.kv, file_id), f"file {file_id}"
        )
        if found is None:
            await self.read.transact(lambda txn: txn.delete(job_key(file_id)), "a stale file job")
            return None
        if found.done:
            return found
        folder = await self.get(found.folder_id)
        clock = self.ports.clock
        record = await self._update(file_id, _status("parsing", clock.now()))
        if record is None:
            return None
        chunks = record.raw_chunks
        raw = await self.read(lambda: _blob(self.kv, "fileraw", file_id, chunks), "the upload")
        try:
            text = parse_document(record.file_name, raw, record.file_type)
        except DocumentError as error:
            return await self._update(file_id, _failed(str(error), clock.now()))
        encoded = text.encode("utf-8")
        texts = _blobs("filetext", file_id, encoded)
        passages = chunk_passages(text, folder.chunk_size)
        parsed = _parsed(len(texts), len(encoded), len(passages), clock.now())
        record = await self._update(file_id, parsed, texts)
        if record is None:
            return None
        for start in range(0, len(passages), _EMBED_BATCH):
            batch = passages[start : start + _EMBED_BATCH]
            vectors = await embedder.embed(batch)
            writes: list[tuple[bytes, bytes | None]] = []
            for n, (passage, vector) in enumerate(zip(batch, vectors, strict=True), start):
                values = list(vector)
                item = FilePassage(
                    id=f"passage-{file_id}-{n}",
                    file_id=file_id,
                    folder_id=record.folder_id,
                    n=n,
                    text=passage,
                    vector=struct.pack(f"<{len(values)}d", *values),
                    embedder=embedder_name,
                )
                writes.append((passage_key(file_id, n), pack(item)))
            record = await self._update(file_id, _embedded(start + len(batch), clock.now()), writes)
            if record is None:
                return None
        return await self._update(file_id, _completed(len(passages), clock.now()))


def _status(status: str, now: float) -> Callable[[FileRecord], FileRecord]:
    return lambda r: attrs.evolve(r, processing_status=status, updated_at=now)


def _failed(problem: str, now: float) -> Callable[[FileRecord], FileRecord]:
    return lambda r: attrs.evolve(
        r, processing_status="error", error_message=problem, updated_at=now
    )


def _parsed(
    text_chunks: int, size: int, passages: int, now: float
) -> Callable[[FileRecord], FileRecord]:
    return lambda r: attrs.evolve(
        r,
        processing_status="embedding",
        text_chunks=text_chunks,
        text_size=size,
        total_chunks=passages,
        chunks_embedded=0,
        updated_at=now,
    )


def _embedded(done: int, now: float) -> Callable[[FileRecord], FileRecord]:
    return lambda r: attrs.evolve(r, chunks_embedded=done, updated_at=now)


def _completed(total: int, now: float) -> Callable[[FileRecord], FileRecord]:
    return lambda r: attrs.evolve(
        r, processing_status="completed", chunks_embedded=total, updated_at=now
    )


async def _delete_file(txn: Transaction, record: FileRecord) -> None:
    for prefix in (f"fileraw/{record.id}/", f"filetext/{record.id}/", f"fchunk/{record.id}/"):
        for key, _ in await txn.scan_prefix(prefix.encode()):
            await txn.delete(key)
    await txn.delete(file_key(record.folder_id, record.id))
    await txn.delete(file_id_key(record.id))
    await txn.delete(job_key(record.id))


async def file_passages(kv: KV | Transaction, file_id: str) -> list[FilePassage]:
    rows = await kv.scan_prefix(f"fchunk/{file_id}/".encode())
    return [unpack(v) for _, v in rows]
