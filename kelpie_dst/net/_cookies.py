"""An httpx cookie store that skips the standard library's parsing for a response with no cookie.

httpx hands every response to ``http.cookiejar`` (a urllib request and response built around
it, the jar's lock, header parsing), which cost the HTTP link of the agent workload about 1.5%
of a seed: Kelpie's API never sets a cookie. :class:`QuietCookies` looks for a ``Set-Cookie``
header first; only a response that has one takes httpx's own path. One thing of the skipped
work stays: the jar reads ``time.time()`` for every response, and in a simulation the guards
record where a run first reads the wall clock from (the SDK call's line in the workload, the
first user frame; this module is the simulator's, so it is skipped the same way
``http.cookiejar`` is), so it is read here too, and the trace is unchanged.
"""

from __future__ import annotations

import time

import httpx

__all__ = ["QuietCookies", "quiet_cookies"]


class QuietCookies(httpx.Cookies):
    """:class:`httpx.Cookies` that only parses responses that set a cookie."""

    def extract_cookies(self, response: httpx.Response) -> None:
        headers = response.headers
        if "set-cookie" in headers or "set-cookie2" in headers:
            super().extract_cookies(response)
            return
        jar = self.jar
        jar._policy._now = jar._now = int(time.time())  # type: ignore[attr-defined]


def quiet_cookies(client: httpx.AsyncClient) -> httpx.AsyncClient:
    """Give ``client`` a :class:`QuietCookies` holding its cookies (a store httpx's public
    setter would wrap in a plain :class:`httpx.Cookies` again)."""
    store = QuietCookies()
    store.jar = client.cookies.jar
    client._cookies = store
    return client
