"""``QuietCookies`` (Dspeed-15): httpx's cookie handling, minus the parsing of cookie-less
responses, with the same wall-clock read (the guards' record of it is in the trace)."""

from __future__ import annotations

import httpx
import pytest

import kelpie_dst
from kelpie_dst.net._cookies import QuietCookies, quiet_cookies


def _app(request: httpx.Request) -> httpx.Response:
    if request.url.path == "/login":
        return httpx.Response(200, headers={"set-cookie": "session=abc; Path=/"}, text="in")
    return httpx.Response(200, text=request.headers.get("cookie", "none"))


@pytest.mark.trio
async def test_cookies_set_by_a_response_are_kept_and_sent() -> None:
    async with httpx.AsyncClient(transport=httpx.MockTransport(_app), base_url="http://t") as c:
        quiet_cookies(c)
        assert isinstance(c.cookies, QuietCookies)
        assert (await c.get("/echo")).text == "none"
        assert len(c.cookies.jar) == 0
        await c.get("/login")
        assert c.cookies.get("session") == "abc"
        assert (await c.get("/echo")).text == "session=abc"


def test_a_cookieless_response_reads_the_clock_as_the_jar_does() -> None:
    """Each response reads ``time.time()`` once, like ``CookieJar.make_cookies``: in a
    simulation the guards redirect it from the same site, whichever store is used."""
    sites: dict[str, list[tuple[str, str, int]]] = {}
    hashes: dict[str, str] = {}

    for name, store in (("plain", httpx.Cookies), ("quiet", QuietCookies)):

        async def main(store: type[httpx.Cookies] = store) -> None:
            transport = httpx.MockTransport(_app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                client._cookies = store()
                for _ in range(3):
                    await client.get("/echo")

        result = kelpie_dst.run(main, seed=1)
        assert result.ok
        sites[name] = [r for r in result.redirected if r[0] == "time.time"]
        hashes[name] = result.trace_hash
    assert sites["quiet"] == sites["plain"]
    assert hashes["quiet"] == hashes["plain"]
    assert sites["plain"] and sites["plain"][0][2] >= 3
