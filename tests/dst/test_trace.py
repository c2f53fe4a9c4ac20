"""The trace: canonical encoding, hashing, files, and first-divergence reports."""

import io

import kelpie_dst
from kelpie_dst._trace import Event, Trace, decode_trace, first_divergence, read_trace


def test_field_order_does_not_change_the_hash() -> None:
    a, b = Trace(), Trace()
    a.emit(1.5, "n1", "log", {"x": 1, "y": [1, 2], "z": {"b": 2, "a": 1}})
    b.emit(1.5, "n1", "log", {"z": {"a": 1, "b": 2}, "y": (1, 2), "x": 1})
    assert a.hexdigest() == b.hexdigest()
    c = Trace()
    c.emit(1.5, "n1", "log", {"x": 2, "y": [1, 2], "z": {"b": 2, "a": 1}})
    assert c.hexdigest() != a.hexdigest()


def test_memory_addresses_are_stripped() -> None:
    a, b = Trace(), Trace()
    a.emit(0, "-", "log", {"obj": object()})
    b.emit(0, "-", "log", {"obj": object()})
    assert a.hexdigest() == b.hexdigest()
    assert " at 0x" not in str(a.tail[0].fields["obj"])


def test_trace_file_round_trip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        kelpie_dst.log("hello", n=1)

    path = tmp_path / "run.trace"
    with open(path, "wb") as f:
        result = kelpie_dst.run(main, seed=2, trace_file=f)
    events = list(read_trace(path))
    assert len(events) == result.events
    assert events[0].kind == "run.start" and events[-1].kind == "run.end"
    assert any(e.kind == "log" and e.fields["message"] == "hello" for e in events)


def test_first_divergence_names_the_first_differing_event() -> None:
    left = [Event(i, i, "n", "log", {"v": i}) for i in range(5)]
    right = [*left[:3], Event(3, 3, "n", "log", {"v": 99}), left[4]]
    divergence = first_divergence(left, right)
    assert divergence is not None and divergence.index == 3
    text = divergence.describe("A", "B")
    assert "index 3" in text and "v=3" in text and "v=99" in text
    assert first_divergence(left, list(left)) is None
    shorter = first_divergence(left, left[:2])
    assert shorter is not None and shorter.index == 2 and shorter.right is None


def test_decode_matches_in_memory_events() -> None:
    sink = io.BytesIO()
    trace = Trace(record=True, file=sink)
    trace.emit(0.25, "a", "k", {"f": 1})
    trace.emit(0.5, "b", "k", {"f": 2})
    assert list(decode_trace(sink.getvalue())) == trace.events
