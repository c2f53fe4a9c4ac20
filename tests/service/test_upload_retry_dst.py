"""A background upload that storage makes give up is retried on its node until it is done, so
storage failing for a while never leaves a file unfinished until some node restarts (found by
the agent_uploads scenario, Dchaos18-5)."""

from __future__ import annotations

import pytest
import trio

import kelpie_dst
from kelpie_agent.service import _folders as folders

from .harness import service_node

TEXT = ("The otter floats on its back. " * 40 + "\n\n") * 6


@pytest.mark.dst(seeds=3, guards="strict", faults=["storage.write_fail=0.9"])
async def test_processing_given_up_on_storage_is_retried_until_completed(
    dst: kelpie_dst.Simulation,
) -> None:
    dst.faults.healed = True  # no faults while the folder and the upload are stored
    async with service_node(sandbox=False) as service:
        folder = await folders.create_folder(service, "docs", chunk_size=100)
        record = await folders.upload_file(
            service, folder.id, "otters.txt", TEXT.encode(), declared_type=None,
            duplicate_handling="suffix",
        )  # fmt: skip
        assert record is not None
        dst.faults.healed = False  # storage fails nine writes in ten while it is processed
        await trio.sleep(15)
        dst.heal()
        status = ""
        with trio.move_on_after(120):
            while status != "completed":
                await trio.sleep(1)
                status = (await folders.get_file(service, folder.id, record.id)).processing_status
        assert status == "completed"
        assert dst.faults.fired["storage.write_fail"] > 0
