"""The HTML timeline: a self-contained page whose embedded data round-trips exactly."""

import html
import json
import os
import re
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest
import trio

import kelpie_dst
from kelpie_dst._trace import Event
from kelpie_dst._trace_html import build_model, decode_events, read_model, render_html
from kelpie_dst._trace_page import JS
from kelpie_dst.examples import replication

FAULTS = ["process.crash=0.04", "process.pause=0.03", "network.partition=0.3"]


async def _recorded(sim: kelpie_dst.Simulation) -> list[Event]:
    await replication.main(sim, entries=20)
    sim.trace_event("odd", text="</script><!-- {{JS}} {{DATA}}", blob=b"\x00\xff", uni="żółw ✓")
    sim.trace_event("odd", nested={"b": [1, 2.5, None, True], "a": {"x": b"\x01"}}, big=2**70)
    return list(sim.trace.events)


@pytest.fixture(scope="module")
def events() -> list[Event]:
    result = kelpie_dst.run(_recorded, seed=21, faults=FAULTS, record=True)
    assert result.ok, result.failure
    assert isinstance(result.value, list)
    return result.value


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def test_the_page_is_self_contained(events: list[Event]) -> None:
    page = render_html(events, title="replication <seed 4>", trace_hash="ab" * 16)
    parser = _Page()
    parser.feed(page)
    tags = [tag for tag, _ in parser.tags]
    assert page.startswith("<!DOCTYPE html>") and tags.count("canvas") == 1
    scripts = [attrs for tag, attrs in parser.tags if tag == "script"]
    assert len(scripts) == 2 and all("src" not in attrs for attrs in scripts)
    assert "link" not in tags and "img" not in tags and "iframe" not in tags
    for needle in ("url(", "@import", "fetch(", "XMLHttpRequest", "http://", "https://"):
        assert needle not in page.replace(JS, "")  # nothing to load...
        assert needle not in JS  # ...and the script loads nothing either
    assert "<title>replication &lt;seed 4&gt; · kelpie trace</title>" in page
    assert "{{" not in page.replace("{{JS}} {{DATA}}", "")  # every placeholder filled


def test_the_embedded_events_round_trip_exactly(events: list[Event]) -> None:
    page = render_html(events, title="t")
    decoded = decode_events(read_model(page))
    assert decoded == [Event(e.index, e.time_ns, e.node, e.kind, e.fields) for e in events]
    odd = [e for e in decoded if e.kind == "odd"]
    assert odd[0].fields["blob"] == b"\x00\xff" and "</script>" in odd[0].fields["text"]
    assert odd[1].fields["big"] == str(2**70)  # beyond msgpack's 64 bits: kept as text
    assert odd[1].fields["nested"]["a"]["x"] == b"\x01"
    assert render_html(events, title="t") == page  # a pure function of the trace


def test_the_model_has_lanes_states_partitions_and_links(events: list[Event]) -> None:
    model = build_model(events)
    assert model["nodes"][:2] == ["-", "main"]
    assert sorted(model["nodes"][2:]) == ["f1", "f2", "f3"]
    states = {state for _lane, _a, _b, state in model["spans"]}
    assert {"up", "down", "paused"} <= states
    crash = next(e for e in events if e.kind == "node.crash")
    lane = model["nodes"].index(crash.fields["node"])
    assert [lane, crash.time_ns] in [s[:2] for s in model["spans"] if s[3] == "down"]
    assert model["partitions"] and all(a < b for a, b, *_ in model["partitions"])
    messages = [link for link in model["links"] if link[6] == "msg"]
    sends = sum(e.kind in ("repl.recv", "ack.recv") for e in events)
    assert len(messages) >= sends * 0.9  # a receive whose send is found gets an arrow
    for start, end, a, b, begin, finish, _ in messages[:50]:
        assert events[start].kind.endswith(".send") and events[end].kind.endswith(".recv")
        assert events[start].fields["msg"] == events[end].fields["msg"]
        assert begin <= finish and a != b
    connects = [link for link in model["links"] if link[6] == "connect"]
    assert connects and all(begin < finish for *_, begin, finish, _ in connects)
    # A crash emitted by the nemesis (node "-") is drawn in the crashed node's lane.
    index = events.index(crash)
    assert model["l"][index] == lane and model["nodes"][model["n"][index]] == "-"


def test_an_empty_or_unfinished_trace_still_renders() -> None:
    assert decode_events(read_model(render_html([]))) == []
    with kelpie_dst.open_simulation(seed=1, record=True) as handle:
        handle.step(trio.sleep, 1)
        unfinished = list(handle.sim.trace.events)
    assert read_model(render_html(unfinished))["outcome"] is None


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_script_parses() -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".js", delete=False) as f:
        f.write(JS)
    subprocess.run(["node", "--check", f.name], check=True, capture_output=True)


SMOKE = """
<script>
window.onerror = (m) => { document.title = "SMOKE-ERR " + m; };
window.addEventListener("load", () => {
  const c = document.getElementById("canvas"), r = c.getBoundingClientRect();
  const at = (type, x, y) => c.dispatchEvent(new MouseEvent(type,
    {clientX: r.left + x, clientY: r.top + y, bubbles: true}));
  c.dispatchEvent(new WheelEvent("wheel", {deltaY: -400, clientX: r.left + 700,
    clientY: r.top + 80, bubbles: true, cancelable: true}));
  at("mousemove", 700, 80); at("click", 700, 80); at("dblclick", 700, 80);
  document.getElementById("zoomout").click(); document.getElementById("fit").click();
  window.kelpieTrace.select(5, true);
  const s = document.getElementById("search");
  s.value = "node.crash"; s.dispatchEvent(new Event("input"));
  setTimeout(() => {
    if (!document.title.startsWith("SMOKE-ERR")) {
      document.title = "SMOKE-OK " + JSON.stringify(window.kelpieTrace.state());
    }
  }, 1500);
});
</script>
"""


@pytest.mark.skipif(
    not Path("/usr/bin/chromium").exists() and not os.environ.get("CI"),
    reason="no /usr/bin/chromium (apt-get install chromium); CI installs it and never skips",
)
def test_the_page_runs_in_headless_chromium(events: list[Event], tmp_path: Path) -> None:
    if not Path("/usr/bin/chromium").exists():  # only with CI set (else skipped above)
        pytest.fail(
            "CI is set but /usr/bin/chromium is missing: install Debian's chromium "
            "(apt-get install chromium, as .ci/run does), or unset CI to skip this test",
            pytrace=False,
        )
    page = render_html(events, title="smoke").replace("</body>", SMOKE + "</body>")
    path = tmp_path / "smoke.html"
    path.write_text(page, encoding="utf-8")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
    flags += ["--disable-background-networking", "--disable-component-update", "--disable-sync"]
    flags += [f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,900"]
    flags += ["--virtual-time-budget=5000", "--dump-dom", path.as_uri()]
    proc = subprocess.run(
        ["/usr/bin/chromium", *flags], capture_output=True, text=True, timeout=120, check=False
    )
    title = re.search(r"<title>(.*?)</title>", proc.stdout)
    assert title is not None, proc.stderr[-2000:]
    assert title.group(1).startswith("SMOKE-OK"), title.group(1)
    state = json.loads(html.unescape(title.group(1).removeprefix("SMOKE-OK ")))
    assert state["search"] == "node.crash"
    assert state["shown"] == sum(e.kind == "node.crash" for e in events)
    assert state["selected"] == 5
