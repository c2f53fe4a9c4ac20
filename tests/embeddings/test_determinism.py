"""HashingEmbedder gives the same vectors in every process, whatever PYTHONHASHSEED is."""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
import sys
from pathlib import Path

from kelpie_agent.embeddings import HashingEmbedder

from .corpus import PASSAGES, QUERIES

ROOT = Path(__file__).resolve().parents[2]

# Pinned: a change here changes every vector ever stored (a deliberate, versioned decision).
GOLDEN = "11f454b7f6dcfdcfe6a19fbaa0b1bea6"

SCRIPT = """
import hashlib, struct, sys
from kelpie_agent.embeddings import HashingEmbedder
from tests.embeddings.corpus import PASSAGES, QUERIES
texts = list(PASSAGES.values()) + [q for q, _ in QUERIES]
digest = hashlib.blake2b(digest_size=16)
for vector in (HashingEmbedder().vector(t) for t in texts):
    digest.update(struct.pack(f"<{len(vector)}d", *vector))
print(digest.hexdigest(), hash("kelpie"))
"""


def corpus_digest() -> str:
    texts = list(PASSAGES.values()) + [q for q, _ in QUERIES]
    digest = hashlib.blake2b(digest_size=16)
    for vector in (HashingEmbedder().vector(t) for t in texts):
        digest.update(struct.pack(f"<{len(vector)}d", *vector))
    return digest.hexdigest()


def test_vectors_match_across_processes_with_different_hash_seeds() -> None:
    outputs = []
    for hashseed in ("1", "2", "random"):
        env = dict(os.environ, PYTHONHASHSEED=hashseed, PYTHONPATH=str(ROOT))
        proc = subprocess.run(
            [sys.executable, "-c", SCRIPT],
            capture_output=True,
            text=True,
            check=True,
            env=env,
            cwd=ROOT,
            timeout=60,
        )
        outputs.append(proc.stdout.split())
    digests = {digest for digest, _ in outputs}
    assert len({str_hash for _, str_hash in outputs}) > 1  # the hash seeds really differed
    assert digests == {corpus_digest()}
    assert digests == {GOLDEN}
