"""The ``kelpie`` command: ``kelpie serve`` runs one node of the Letta-compatible server.

    kelpie serve [--host 127.0.0.1] [--port 8283] [--db sqlite:///PATH | postgresql://...]
                 [--llm anthropic|sim] [--api-key KEY] [--data-dir DIR] [--node-id ID] ...

See docs/deployment.md. ``python -m kelpie_agent.cli`` is the same command.
"""

from ._commands import EXIT_USAGE as EXIT_USAGE
from ._commands import cli as cli
from ._commands import main as main
from ._config import ServeConfig as ServeConfig
from ._config import ServeUsageError as ServeUsageError

__all__ = ["EXIT_USAGE", "ServeConfig", "ServeUsageError", "cli", "main"]
