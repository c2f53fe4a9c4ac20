"""``python -m kelpie_agent.cli`` is the ``kelpie`` command."""

from ._commands import main

main()
