"""A tiny wallet with a check-then-act race: the program of docs/tutorial.md.

Plain trio, no kelpie_dst import. Run it for real with ``python tutorial_wallet.py``, or in the
simulator with ``kelpie-dst run --entry tutorial_wallet:main --seed 3``.
"""

# ruff: noqa: S311  (the random module is seeded by the simulator; not for cryptography)

from __future__ import annotations

import random

import trio


class Wallet:
    def __init__(self, balance: int) -> None:
        self.balance = balance

    async def withdraw(self, amount: int) -> bool:
        if self.balance < amount:  # check...
            return False
        await self._authorize(amount)  # ...other tasks run while this waits...
        self.balance -= amount  # ...act on a check that may be stale by now
        return True

    async def _authorize(self, amount: int) -> None:
        await trio.sleep(0.001)  # stands in for a call to a payment service


async def shopper(wallet: Wallet) -> None:
    for _ in range(3):
        await trio.sleep(random.choice([0.01, 0.02, 0.03]))  # think time
        await wallet.withdraw(random.randint(5, 15))


async def main() -> None:
    wallet = Wallet(60)
    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(shopper, wallet)
    assert wallet.balance >= 0, f"overdrawn: balance={wallet.balance}"


if __name__ == "__main__":
    trio.run(main)
