"""The SDK's methods by introspection (tests/api/sdk_methods.py): letta-client 1.12 has 129,
117 of them not Letta Cloud-only; the app routes every method this branch implements.
(Routing only; the letta-client tests call them with strict validation.)"""

from __future__ import annotations

from kelpie_agent.api._app import shared_app

from .sdk_methods import routed, sdk_methods

IMPLEMENTED = {
    "agents.tools.update_approval",
    "agents.export_file",
    "agents.import_file",
    "archives.create",
    "archives.list",
    "archives.retrieve",
    "archives.update",
    "archives.delete",
    "archives.passages.create",
    "archives.passages.create_many",
    "archives.passages.delete",
    "agents.archives.attach",
    "agents.archives.detach",
    "agents.create",
    "agents.messages.create",
    "health",
}


def test_the_sdk_methods_are_enumerated_and_ours_are_routed() -> None:
    every = sdk_methods(cloud=True)
    found = sdk_methods()
    assert len(every) == 129 and len(found) == 117
    assert all(method and path.startswith("/v1/") for _, method, path in found)
    table = routed(shared_app(), found)
    assert IMPLEMENTED <= {name for name, ok in table.items() if ok}
    # a path that only matches a route by its template's parameter is not a match
    assert not table["tools.search"]  # POST /v1/tools/search is not /v1/tools/{tool_id}
