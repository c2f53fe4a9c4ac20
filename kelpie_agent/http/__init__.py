"""kelpie_agent's HTTP/1.1 server: h11 on trio streams, serving one ASGI 3 application.

The same code serves in production (real sockets) and inside a kelpie_dst simulation (the
simulated network behind trio's socket hooks), so network faults hit real request bytes.
Keep-alive, pipelining, size limits, timeouts on trio's clock, ``Expect: 100-continue``, HEAD,
the lifespan protocol, an access-log callback and graceful shutdown. See docs/http-server.md.

    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve, app, "127.0.0.1", 8283)
        ...
        await server.shutdown(grace=5)
"""

from ._asgi import ASGIApp as ASGIApp
from ._errors import AsgiProtocolError as AsgiProtocolError
from ._errors import ClientDisconnected as ClientDisconnected
from ._errors import HttpServerError as HttpServerError
from ._errors import LifespanError as LifespanError
from ._log import AccessLog as AccessLog
from ._log import AccessRecord as AccessRecord
from ._log import ServerLogger as ServerLogger
from ._options import ServerOptions as ServerOptions
from ._server import HttpServer as HttpServer
from ._server import ServerStatistics as ServerStatistics
from ._server import serve as serve
from ._server import serve_listeners as serve_listeners

__all__ = [
    "ASGIApp",
    "AccessLog",
    "AccessRecord",
    "AsgiProtocolError",
    "ClientDisconnected",
    "HttpServer",
    "HttpServerError",
    "LifespanError",
    "ServerLogger",
    "ServerOptions",
    "ServerStatistics",
    "serve",
    "serve_listeners",
]
