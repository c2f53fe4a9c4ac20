"""An agent's settings in and out, through the real SDK (``settings``).

With ``settings`` on, once the agents' clients are done (the faults go on), one more client,
on random nodes, hopping after failures, drives what the other walkers leave alone and logs
what it read for :func:`._agent_settings_checks.check_settings` (``settings_contract``):

1. **Creates**: two agents ``settings-0`` and ``settings-1``, each with random settings (a
   system prompt, a description, tags, metadata, a time zone, tool rules) and its model,
   context window and output tokens given in one of Letta's three shapes (top-level ``model``,
   ``context_window_limit`` and ``max_tokens``; ``llm_config`` with ``model`` and
   ``model_endpoint_type``; ``llm_config`` with a ``handle``), and two blocks (one with a
   random limit and read-only flag, one without a limit). Read back at once.
2. **PATCHes**: ``PATCHES`` updates of ``settings-0`` (and two of ``settings-1``), each a
   random non-empty subset of every field ``PATCH /v1/agents/{id}`` documents (empty values
   too: ``""``, ``[]``, ``{}``), the model's fields in one of the shapes above; the answer
   and a read after it are logged with the model of the agent.
3. **Files**: a folder of three files (waited until processed), attached to ``settings-0``
   (which opens them), one of them closed again.
4. **Round trip**: ``settings-0`` is exported and imported twice (under names of the
   client's), both copies read back; their files' open states read once processed; the first
   copy exported again; the first copy's block written through the API, and the source and
   the second copy read again.

None of these agents is ever sent a message, so no other oracle sees them. Every create is
retry-safe (looked up by its name before a retry).
"""

from __future__ import annotations

import json
from typing import Any

import trio

from ._agent_settings_checks import SettingsLog, agent_shape, blocks_shape
from ._agent_walker import SdkWalker

__all__ = ["SettingsWalker"]

SOURCE = "settings-0"
OTHER = "settings-1"
COPIES = ("settings-copy-a", "settings-copy-b")
PATCHES = 6
FOLDER = "settings-docs"
FILES = 3
HANDLES = ("anthropic/claude-sonnet-5-5", "anthropic/claude-haiku-4-5", "anthropic/claude-opus-4-1")
ZONES = ("UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo", "Australia/Sydney")
TAGS = ("shelf", "ledger", "kelp", "tide", "reef")
SYSTEMS = ("", "You keep the shelf tidy.", "You keep shelves.\n\n{CORE_MEMORY}")
DESCRIPTIONS = ("", "keeps shelves", "the settings walk's agent")
METADATA: tuple[dict[str, Any], ...] = ({}, {"shelf": 1}, {"nested": {"a": [1, 2]}, "b": True})
RULES: tuple[dict[str, Any], ...] = (
    {"type": "max_count_per_step", "tool_name": "conversation_search", "max_count_limit": 2},
    {"type": "max_count_per_step", "tool_name": "archival_memory_search", "max_count_limit": 3},
    {"type": "run_first", "tool_name": "conversation_search"},
    {"type": "exit_loop", "tool_name": "archival_memory_insert"},
    {
        "type": "constrain_child_tools",
        "tool_name": "conversation_search",
        "children": ["archival_memory_insert"],
    },
    {"type": "requires_approval", "tool_name": "archival_memory_insert"},
)
WINDOWS = (16_000, 32_000, 64_000, 200_000)
OUTPUTS = (1024, 2048, 4096, 8192)


class SettingsWalker(SdkWalker):
    """Drives the agents' settings and agent files (see the module docstring)."""

    PREFIX = "settings"

    def __init__(self, clients: Any, rng: Any) -> None:
        super().__init__(clients, rng)
        self.log = SettingsLog()
        self.problems = self.log.problems
        self.models: dict[str, dict[str, Any]] = {}  # agent id -> what it must show
        self.ids: dict[str, str] = {}  # name -> id
        self.copies: list[str] = []

    async def run(self) -> None:
        await self._phases(
            (self._creates, self._patches, self._files, self._round_trip),
            lambda phase: phase == self._creates or SOURCE in self.ids,
        )

    # -- drawing settings --------------------------------------------------------------------
    def _model_fields(self, fields: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
        """The request fields for ``fields`` (of model, context_window, max_tokens) in a random
        shape, and what the agent must show for them."""
        rng = self.rng
        want: dict[str, Any] = {}
        handle = rng.choice(HANDLES)
        if "model" in fields:
            want["model"] = handle
        if "context_window" in fields:
            want["context_window"] = rng.choice(WINDOWS)
        if "max_tokens" in fields:
            want["max_tokens"] = rng.choice(OUTPUTS)
        shape = rng.choice(("top", "llm", "handle"))
        body: dict[str, Any] = {}
        if shape == "top":
            for key, name in (
                ("model", "model"),
                ("context_window", "context_window_limit"),
                ("max_tokens", "max_tokens"),
            ):
                if key in want:
                    body[name] = want[key]
            return body, want
        config: dict[str, Any] = {}
        if "model" in want:
            provider, short = want["model"].split("/", 1)
            config["model"] = short
            config["model_endpoint_type"] = provider
            if shape == "handle":
                config["handle"] = want["model"]
        if "context_window" in want:
            config["context_window"] = want["context_window"]
        if "max_tokens" in want:
            config["max_tokens"] = want["max_tokens"]
        return {"llm_config": config}, want

    def _field(self, name: str, k: int, agent: str) -> Any:
        rng = self.rng
        if name == "name":
            return f"{agent}-v{k}"
        if name == "system":
            return rng.choice(SYSTEMS)
        if name == "description":
            return rng.choice(DESCRIPTIONS)
        if name == "tags":
            return sorted(rng.sample(TAGS, rng.randint(0, 3)))
        if name == "metadata":
            return dict(rng.choice(METADATA))
        if name == "timezone":
            return rng.choice(ZONES)
        if name == "tool_rules":
            return [dict(r) for r in rng.sample(RULES, rng.randint(0, 2))]
        raise ValueError(name)

    # -- 1. creates ----------------------------------------------------------------------------
    async def _creates(self) -> None:
        for name in (SOURCE, OTHER):
            await self._create_one(name)

    async def _create_one(self, name: str) -> None:
        rng = self.rng
        body: dict[str, Any] = {}
        want: dict[str, Any] = {"name": name, "timezone": "UTC"}
        for field in ("system", "description", "tags", "metadata", "tool_rules"):
            body[field] = want[field] = self._field(field, 0, name)
        if rng.random() < 0.7:
            body["timezone"] = want["timezone"] = self._field("timezone", 0, name)
        model_body, model_want = self._model_fields(("model", "context_window", "max_tokens"))
        body.update(model_body)
        want.update(model_want)
        limit = rng.choice((40, 100, 1000, 7000))
        read_only = rng.random() < 0.5
        blocks = [
            {
                "label": "notes",
                "value": "shelf notes"[: min(limit, 11)],
                "limit": limit,
                "read_only": read_only,
                "description": "what is on the shelf",
                "metadata": {"kind": "notes"},
            },
            {"label": "scratch", "value": "loose"},
        ]
        want["blocks"] = {
            "notes": ("shelf notes"[: min(limit, 11)], limit, read_only, "what is on the shelf"),
            "scratch": ("loose", 20_000, False, ""),
        }

        async def find(sdk: Any) -> Any:
            page = await sdk.agents.list(name=name, limit=1, order="asc")
            return page.items[0] if page.items else None

        async def make(sdk: Any) -> Any:
            return await sdk.agents.create(name=name, memory_blocks=blocks, **body)

        shown = json.dumps(body, sort_keys=True)
        made = await self._create(f"agents.create({name})", find, make)
        agent_id = str(made.id)
        self.ids[name] = agent_id
        self.models[agent_id] = want
        self.log.reads.append((f"agents.create({name}, {shown}) answered", want, _seen(made)))
        state = await self._sdk("agents.retrieve", agent_id)
        self.log.reads.append((f"agents.retrieve({name}) after its create", want, _seen(state)))

    # -- 2. PATCHes ----------------------------------------------------------------------------
    async def _patches(self) -> None:
        plan = [SOURCE] * PATCHES + ([OTHER] * 2 if OTHER in self.ids else [])
        self.rng.shuffle(plan)
        for k, name in enumerate(plan, start=1):
            await self._patch(name, k)

    async def _patch(self, name: str, k: int) -> None:
        rng = self.rng
        agent_id = self.ids[name]
        model = self.models[agent_id]
        fields = ("name", "system", "description", "tags", "metadata", "timezone", "tool_rules")
        chosen = [f for f in fields if rng.random() < 0.3]
        model_fields = tuple(
            f for f in ("model", "context_window", "max_tokens") if rng.random() < 0.3
        )
        if not chosen and not model_fields:
            chosen = [rng.choice(fields)]
        body = {f: self._field(f, k, name) for f in chosen}
        want = dict(model, **body)
        if model_fields:
            model_body, model_want = self._model_fields(model_fields)
            body.update(model_body)
            want.update(model_want)
        shown = json.dumps(body, sort_keys=True)
        answer = await self._sdk("agents.update", agent_id, **body)
        self.models[agent_id] = want
        self.log.reads.append((f"agents.update({name}, {shown}) answered", want, _seen(answer)))
        state = await self._sdk("agents.retrieve", agent_id)
        what = f"agents.retrieve({name}) after update {k} ({shown})"
        self.log.reads.append((what, want, _seen(state)))

    # -- 3. files ------------------------------------------------------------------------------
    async def _files(self) -> None:
        source = self.ids[SOURCE]

        async def find(sdk: Any) -> Any:
            page = await sdk.folders.list(name=FOLDER, limit=1)
            items = page if isinstance(page, list) else page.items
            return items[0] if items else None

        folder = await self._create(
            f"folder {FOLDER}", find, lambda sdk: sdk.folders.create(name=FOLDER)
        )
        for i in range(FILES):
            text = "".join(f"shelf {i} line {n}: kelp and tide\n" for n in range(6)).encode()
            await self._sdk(
                "folders.files.upload",
                folder.id,
                file=(f"shelf-{i}.txt", text),
                duplicate_handling="skip",  # a retry answers the file the first attempt made
            )
        for _ in range(60):  # attached once processed, so that attaching opens every file
            page = await self._sdk("folders.files.list", folder.id, limit=1000, order="asc")
            if all(f.processing_status == "completed" for f in page.items):
                break
            await trio.sleep(1)
        await self._sdk("agents.folders.attach", folder.id, agent_id=source)
        files = await self._sdk("agents.files.list", source, limit=1000, order="asc")
        closed = self.rng.choice([f for f in files.files])
        await self._sdk("agents.files.close", closed.file_id, agent_id=source)
        files = await self._sdk("agents.files.list", source, limit=1000, order="asc")
        self.log.open_source = _open_states(files)

    # -- 4. round trip -------------------------------------------------------------------------
    async def _round_trip(self) -> None:
        source = self.ids[SOURCE]
        exported = await self._sdk("agents.export_file", source)
        document = _document(exported)
        raw = json.dumps(document).encode()
        for name in COPIES:
            copy = await self._import(raw, name)
            if copy is not None:
                self.copies.append(copy)
        if not self.copies:
            return
        old = await self._sdk("agents.retrieve", source)
        before = blocks_shape(old)
        for name, copy in zip(COPIES, self.copies, strict=False):
            state = await self._sdk("agents.retrieve", copy)
            self.log.copies.append((f"import of {SOURCE} as {name}", _seen(old), _seen(state)))
            self.log.block_ids.append((name, tuple(str(b.id) for b in state.blocks or ())))
        self.log.block_ids.append((SOURCE, tuple(str(b.id) for b in old.blocks or ())))
        first = self.copies[0]
        again: dict[str, Any] = {}
        for _ in range(60):  # the files' text (and the copy's open states) once processed
            again = _document(await self._sdk("agents.export_file", first))
            if all(f.get("processing_status") == "completed" for f in again.get("files") or ()):
                break
            await trio.sleep(1)
        files = await self._sdk("agents.files.list", first, limit=1000, order="asc")
        self.log.open_copy = _open_states(files)
        self.log.round_trips.append((f"export of {COPIES[0]}", document, again))
        # the first copy's memory is its own: writing it leaves the others' as they were
        await self._sdk("agents.blocks.update", "scratch", agent_id=first, value="the copy's own")
        others = [(SOURCE, source, before)]
        if len(self.copies) > 1:
            second = await self._sdk("agents.retrieve", self.copies[1])
            others.append((COPIES[1], self.copies[1], blocks_shape(second)))
        for name, agent_id, was in others:
            now = blocks_shape(await self._sdk("agents.retrieve", agent_id))
            self.log.isolation.append((f"{name} after writing {COPIES[0]}'s scratch", was, now))

    async def _import(self, raw: bytes, name: str) -> str | None:
        async def find(sdk: Any) -> Any:
            page = await sdk.agents.list(name=name, limit=1, order="asc")
            return page.items[0].id if page.items else None

        answered: list[str] = []

        async def make(sdk: Any) -> Any:
            got = await sdk.agents.import_file(file=("settings.af", raw), name=name)
            answered.append("yes")
            return got.agent_ids[0] if got.agent_ids else None

        copy = await self._create(f"agents.import_file(name={name})", find, make)
        if copy is None:
            self.problems.append(f"agents.import_file(name={name}) answered no agent id")
            return None
        if not answered:  # cut mid-way and found by name: it may lack what follows the create
            self.log.unsure.append(name)
        return str(copy)


def _document(exported: Any) -> dict[str, Any]:
    return json.loads(exported) if isinstance(exported, str | bytes) else dict(exported)


def _open_states(page: Any) -> dict[str, bool]:
    # by the file's own name: the copy's folder may have another ("docs_(1)", Letta's suffix)
    return {str(f.file_name).rsplit("/", 1)[-1]: bool(f.is_open) for f in page.files}


def _seen(state: Any) -> dict[str, Any]:
    """What an AgentState shows of the fields the walk sets."""
    return agent_shape(state)
