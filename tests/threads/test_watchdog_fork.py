"""A forked process (a sweep's worker) gets a watchdog of its own: the parent's monitor thread
does not survive a fork, so the child must start its own on first use."""

from __future__ import annotations

import os

from kelpie_dst.threads._watchdog import monitor


def test_a_forked_child_starts_its_own_monitor_thread() -> None:
    started, watches = monitor.started, dict(monitor.watches)
    monitor.started = True  # as if a simulation had run in this process
    try:
        pid = os.fork()
        if pid == 0:  # the child: report through the exit code only
            os._exit(0 if (monitor.started, monitor.watches) == (False, {}) else 1)
        _, status = os.waitpid(pid, 0)
    finally:
        monitor.started = started
        monitor.watches.update(watches)
    assert os.waitstatus_to_exitcode(status) == 0
    assert monitor.started is started
