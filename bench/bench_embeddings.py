"""HashingEmbedder throughput and VectorIndex search latency over 5,000 passages.

Run with ``.venv/bin/python bench/bench_embeddings.py``. Passages are synthetic sentences of
12..40 words drawn (seeded) from a 2,000-word vocabulary; queries have 3..8 words. Search
latency is measured without filters, with a tag filter ("any" of 2 of 20 tags) and with a
date range covering a tenth of the passages. Search cost grows with the passages that pass the
filters times the query's non-zero coordinates (printed).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import trio

from kelpie_agent.embeddings import HashingEmbedder, Passage, VectorIndex

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qu", "dor", "len", "ith"]


def vocabulary(rng: random.Random, size: int) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))))
    return sorted(words)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passages", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--dimensions", type=int, default=512)
    args = parser.parse_args()

    rng = random.Random(7)
    vocab = vocabulary(rng, 2000)
    texts = [" ".join(rng.choices(vocab, k=rng.randint(12, 40))) for _ in range(args.passages)]
    queries = [" ".join(rng.choices(vocab, k=rng.randint(3, 8))) for _ in range(args.queries)]
    tags = [f"tag{i}" for i in range(20)]

    embedder = HashingEmbedder(args.dimensions)
    start = time.perf_counter()
    vectors = trio.run(embedder.embed, texts)
    elapsed = time.perf_counter() - start
    print(f"embed: {len(texts)} passages in {elapsed:.2f}s = {len(texts) / elapsed:,.0f} embeds/s")

    index = VectorIndex(args.dimensions)
    start = time.perf_counter()
    for i, (text, vector) in enumerate(zip(texts, vectors, strict=True)):
        passage_tags = rng.sample(tags, 2)
        index.add(Passage(f"p{i:05d}", text, vector, tags=passage_tags, created_at=float(i)))
    print(f"index: {len(index)} passages added in {time.perf_counter() - start:.2f}s")

    query_vectors = [embedder.vector(q) for q in queries]
    nonzero = statistics.mean(sum(1 for v in q if v) for q in query_vectors)
    print(f"queries: {len(queries)}, {nonzero:.0f} non-zero coordinates on average")
    tenth = args.passages / 10
    cases = {
        "no filter": {},
        "tags any(2 of 20)": {"tags": ["tag3", "tag11"]},
        "date range (10%)": {"start": 4 * tenth, "end": 5 * tenth},
    }
    for label, filters in cases.items():
        timings = []
        for vector in query_vectors:
            start = time.perf_counter()
            index.search(vector, top_k=10, **filters)
            timings.append(time.perf_counter() - start)
        timings.sort()
        p50 = statistics.median(timings) * 1000
        p95 = timings[int(len(timings) * 0.95)] * 1000
        print(f"search top-10, {label}: p50 {p50:.1f} ms, p95 {p95:.1f} ms")


if __name__ == "__main__":
    main()
