"""Memory blocks through the service: an agent's core memory (by label) and standalone blocks
(by id), each method's happy path and errors (one node, strict guards)."""

from __future__ import annotations

import pytest
import trio

from kelpie_agent.service import ConflictError, InvalidError, NotFoundError

from .harness import otto, service_node, user
from .test_agents import _fails


@pytest.mark.dst(seeds=3, guards="strict")
async def test_an_agents_blocks_list_get_update_attach_detach() -> None:
    async with service_node() as svc:
        agent_id = (await svc.create_agent(otto())).agent.id
        assert [b.label for b in await svc.list_agent_blocks(agent_id)] == ["persona", "human"]
        human = await svc.get_agent_block(agent_id, "human")
        assert human.value == ""
        updated = await svc.update_agent_block(agent_id, "human", value="Name: Ada", limit=500)
        assert (updated.id, updated.value, updated.limit) == (human.id, "Name: Ada", 500)
        reply = await svc.send_message(agent_id, user("what is my name?"))
        assert reply.reply == "Your name is Ada."  # the agent sees the edit
        renamed = await svc.update_agent_block(agent_id, "human", new_label="user")
        assert renamed.label == "user"
        assert (await svc.get_agent_block(agent_id, "user")).value == "Name: Ada"

        shared = await svc.create_block("notes", "kelp grows fast")
        view = await svc.attach_block(agent_id, shared.id)
        assert [b.label for b in view.blocks] == ["persona", "user", "notes"]
        again = await svc.attach_block(agent_id, shared.id)  # attaching twice is a no-op
        assert [b.id for b in again.blocks] == [b.id for b in view.blocks]
        await svc.update_block(shared.id, value="kelp grows very fast")  # standalone edit
        assert (await svc.get_agent_block(agent_id, "notes")).value == "kelp grows very fast"
        view = await svc.detach_block(agent_id, shared.id)
        assert [b.label for b in view.blocks] == ["persona", "user"]
        assert (await svc.get_block(shared.id)).label == "notes"  # detached, not deleted


@pytest.mark.dst(seeds=2, guards="strict")
async def test_an_agents_block_errors() -> None:
    async with service_node() as svc:
        agent_id = (await svc.create_agent(otto())).agent.id
        other = await svc.create_block("persona", "another persona")
        await _fails(svc.list_agent_blocks("agent-nope"), NotFoundError, 404, "agent-nope")
        await _fails(
            svc.get_agent_block(agent_id, "missing"),
            NotFoundError,
            404,
            "has no block labelled 'missing'",
        )
        await _fails(svc.get_agent_block(agent_id, "bad label"), InvalidError, 422, "label")
        await _fails(
            svc.update_agent_block(agent_id, "human", value="x" * 20_001),
            InvalidError,
            400,
            "value: has 20001 characters, over its limit 20000",
        )
        await _fails(
            svc.update_agent_block(agent_id, "human", value="abc", limit=2),
            InvalidError,
            400,
            "value: has 3 characters, over its limit 2",
        )
        await _fails(svc.update_agent_block(agent_id, "human", limit=0), InvalidError, 422, "limit")
        await _fails(
            svc.update_agent_block(agent_id, "human", new_label="persona"),
            ConflictError,
            409,
            "already has a block labelled 'persona'",
        )
        await _fails(
            svc.update_agent_block(agent_id, "human", new_label="a b"), InvalidError, 422, "label"
        )
        await _fails(svc.update_agent_block(agent_id, "nope", value="x"), NotFoundError, 404)
        await _fails(svc.attach_block(agent_id, other.id), ConflictError, 409, "labelled 'persona'")
        await _fails(svc.attach_block(agent_id, "block-nope"), NotFoundError, 404, "block-nope")
        await _fails(svc.detach_block(agent_id, other.id), NotFoundError, 404, "is not attached")
        await _fails(svc.detach_block(agent_id, "bad id!"), InvalidError, 422, "block_id")
        assert (await svc.get_agent_block(agent_id, "human")).value == ""  # all refused


@pytest.mark.dst(seeds=3, guards="strict")
async def test_standalone_blocks_create_get_list_update_delete_and_their_agents() -> None:
    async with service_node() as svc:
        made = []
        for i in range(5):  # listed by creation time (then id): let the clock move
            made.append(await svc.create_block(f"b{i % 2}", f"value {i}"))
            await trio.sleep(0.01)
        assert (await svc.get_block(made[0].id)) == made[0]
        assert await svc.list_blocks() == made
        assert await svc.list_blocks(label="b1") == [made[1], made[3]]
        assert await svc.list_blocks(limit=2, after=made[1].id) == made[2:4]
        assert await svc.list_blocks(order="desc", limit=2) == [made[4], made[3]]
        assert await svc.list_blocks(before=made[3].id, limit=2) == made[1:3]
        changed = await svc.update_block(
            made[0].id, value="new", description="d", read_only=True, metadata={"x": 1}
        )
        assert (changed.value, changed.description, changed.read_only) == ("new", "d", True)
        assert changed.metadata == {"x": 1}
        relabelled = await svc.update_block(made[0].id, label="renamed", limit=10)
        assert (relabelled.label, relabelled.limit) == ("renamed", 10)

        a = await svc.create_agent(otto(name="a", block_ids=(made[1].id,)))
        await trio.sleep(0.01)
        b = await svc.create_agent(otto(name="b", block_ids=(made[1].id,)))
        await svc.create_agent(otto(name="c"))
        users = await svc.block_agents(made[1].id)
        assert [v.agent.id for v in users] == [a.agent.id, b.agent.id]
        assert await svc.block_agents(made[2].id) == []

        await svc.delete_block(made[2].id)
        await _fails(svc.get_block(made[2].id), NotFoundError, 404, made[2].id)
        assert made[2].id not in [blk.id for blk in await svc.list_blocks()]


@pytest.mark.dst(seeds=2, guards="strict")
async def test_standalone_block_errors() -> None:
    async with service_node() as svc:
        block = await svc.create_block("human", "abc", limit=5)
        await _fails(svc.create_block("no space"), InvalidError, 422, "label")
        await _fails(
            svc.create_block("h", "x" * 6, limit=5),
            InvalidError,
            400,
            "value: has 6 characters, over its limit 5",
        )
        await _fails(svc.create_block("h", limit=0), InvalidError, 422, "limit")
        await _fails(svc.create_block("h", read_only="yes"), InvalidError, 422, "read_only")  # type: ignore[arg-type]
        await _fails(svc.create_block("h", 7), InvalidError, 422, "value")  # type: ignore[arg-type]
        await _fails(svc.get_block("block-nope"), NotFoundError, 404, "block-nope")
        await _fails(svc.get_block("a/b"), InvalidError, 422, "block_id")
        await _fails(svc.update_block(block.id, colour="red"), InvalidError, 422, "colour")
        await _fails(
            svc.update_block(block.id, value="toolong"), InvalidError, 400, "over its limit 5"
        )
        await _fails(svc.update_block("block-nope", value="x"), NotFoundError, 404)
        await _fails(svc.delete_block("block-nope"), NotFoundError, 404)
        await _fails(svc.block_agents("block-nope"), NotFoundError, 404)
        await _fails(svc.list_blocks(after="block-nope"), NotFoundError, 404, "after")
        await _fails(svc.list_blocks(label="a b"), InvalidError, 422, "label")
        await _fails(svc.list_blocks(limit=5000), InvalidError, 422, "limit")
        assert await svc.get_block(block.id) == block


@pytest.mark.dst(seeds=2, guards="strict")
async def test_relabelling_a_shared_block_cannot_give_an_agent_two_blocks_with_one_label() -> None:
    async with service_node() as svc:
        agent_id = (await svc.create_agent(otto())).agent.id
        shared = await svc.create_block("notes", "kelp")
        await svc.attach_block(agent_id, shared.id)
        await _fails(
            svc.update_block(shared.id, label="human"),
            ConflictError,
            409,
            f"agent {agent_id} already has a block labelled 'human'",
        )
        assert (await svc.get_block(shared.id)).label == "notes"  # nothing changed
        assert [b.label for b in await svc.list_agent_blocks(agent_id)] == [
            "persona",
            "human",
            "notes",
        ]
        renamed = await svc.update_block(shared.id, label="facts")  # a free label is fine
        assert renamed.label == "facts"
        assert (await svc.get_agent_block(agent_id, "facts")).value == "kelp"
