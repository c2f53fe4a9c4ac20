"""A thread blocked in a real read that nobody answers: the watchdog fails the run (threads.md)."""

import os
import threading

import trio


def work(r: int) -> None:
    # A real pipe that nobody writes: the simulation cannot see this call.
    os.read(r, 1)


async def main() -> None:
    r, _w = os.pipe()
    thread = threading.Thread(target=work, args=(r,), name="reader")
    thread.start()
    await trio.sleep(1)
    thread.join()
