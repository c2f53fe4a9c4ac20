"""pytest tests for the tutorial's wallet (docs/tutorial.md, "Through pytest").

``test_no_overdraft`` tests the buggy wallet and FAILS ON PURPOSE for some seeds, to show the
failure report; the other tests pass. Run from the repository root, so that the replay lines
work as printed: ``pytest docs/examples/test_tutorial_wallet.py``.
"""

from __future__ import annotations

import pytest
import trio
import tutorial_wallet
import tutorial_wallet_fixed

import kelpie_dst


@pytest.mark.dst(seeds=10)
async def test_no_overdraft(dst: kelpie_dst.Simulation) -> None:
    await tutorial_wallet.main()  # the buggy wallet: some seeds fail


@pytest.mark.dst(seeds=10)
async def test_no_overdraft_fixed(dst: kelpie_dst.Simulation) -> None:
    wallet = tutorial_wallet_fixed.Wallet(60)
    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(tutorial_wallet_fixed.shopper, wallet)
    dst.log("final balance", balance=wallet.balance)  # recorded in the trace
    assert wallet.balance >= 0


@pytest.mark.dst(seeds=3)
def test_withdrawals_step_by_step(dst_sim: kelpie_dst.SimulationHandle) -> None:
    wallet = tutorial_wallet_fixed.Wallet(20)
    assert dst_sim.step(wallet.withdraw, 5) is True  # runs in the simulation, returns its value
    assert dst_sim.time == 0.001  # virtual seconds; the authorize call took 1 ms

    # Two concurrent withdrawals, started from the test on a node of their own.
    shop = dst_sim.sim.add_node("shop")
    results: list[bool] = []

    async def withdraw(amount: int) -> None:
        results.append(await wallet.withdraw(amount))

    shop.start_soon(withdraw, 10)
    shop.start_soon(withdraw, 10)
    assert results == []  # nothing runs between steps
    dst_sim.advance(1)  # one virtual second passes; both withdrawals finish
    assert sorted(results) == [False, True]
    assert wallet.balance == 5
    assert dst_sim.time == 1.001
