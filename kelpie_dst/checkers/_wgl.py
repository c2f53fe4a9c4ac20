"""The search for a linearization of one partition: Wing & Gong's algorithm, with Lowe's memo.

This follows Porcupine's ``checkSingle``. Call and return events are sorted by time into a doubly
linked list (calls before returns at equal times, so intervals that touch overlap). At any point
of the search, the candidates to linearize next are the operations whose call event comes before
the first remaining return event: the operation of that return event cannot be postponed past it.
Linearizing an operation "lifts" its two events out of the list; backtracking "unlifts" them.
Configurations already explored (set of linearized operations as an int bitset, model state) are
remembered, and reaching one again is pruned.

Operations with an unknown outcome have no return event (their response time is infinite): they
are candidates from their invocation on, and the search succeeds as soon as every operation with
a known outcome is linearized; the remaining ones are taken never to have happened.

Refinements over plain WGL keep the search narrow when many clients share a key:

* A read-only candidate with a known outcome (a read, a failed cas) that the model accepts is
  linearized at once, with no alternatives tried. If any order of the remaining operations works,
  moving it to the front still works: it does not change the state, and no pending operation
  precedes it in real time (all of their return events come after its call event).
* Otherwise the candidates are tried goal first: the deadline operation (the one whose return
  event comes first) if the model accepts it now, else first the candidates after which the
  model would accept it. Then the rest in invocation order.
* Pruning is by dominance: a configuration is skipped when one with the same state, the same
  operations with a known outcome and a subset of those with an unknown outcome was explored.
  That one can do everything this one can, by leaving the extra operations out.
* An unknown outcome is applied only right before a candidate that the model then accepts with
  another outcome (result or next state). In any linearization where the next operation is not
  affected like that, the unknown outcome can be left out instead.

Unknown outcomes are what makes histories expensive, and where they go in the order of choices
matters a lot, in opposite ways. Eagerly (in invocation order), a valid history whose timed-out
writes took effect is solved quickly. Lazily (last, and each one paired with an operation it
affects, as a single step), they are applied only when nothing else works, which lets dominance
prune hard: a history that is not linearizable is refuted quickly. So the caller can run both in
alternation and take the first verdict. Both are complete: every pruning above only skips
configurations from which some other, explored configuration can do at least as much.
"""

from __future__ import annotations

from collections.abc import Generator, Hashable
from typing import Any, cast

import attrs

from ._history import Operation
from ._model import Model

__all__ = ["Search"]

_HEAD = 0

# One frame per linearized operation: (choices at that point, index of the next choice to try
# there, model state before). The operation that was taken is choices[index - 1].
_Frame = tuple[list[int], int, Hashable]


@attrs.define
class Search:
    """One search over ``ops``: drive ``run`` once to its end, then read ``steps`` and ``best``."""

    model: Model[Any]
    ops: list[Operation]
    lazy: bool
    """Apply unknown outcomes lazily (last, and only with an operation they affect) rather than
    eagerly (in invocation order, whenever they affect some candidate)."""
    steps: int = 0
    """Model transitions tried plus backtracks."""
    best: list[int] = attrs.Factory(list)
    """The longest linearization prefix reached by the search (indices into ``ops``)."""

    def run(self, pause_every: int) -> Generator[None, None, bool]:
        """Search, pausing (yielding) every ``pause_every`` steps or so; return the verdict."""
        ops = self.ops
        model = self.model
        # Events: (time, 0 = call / 1 = return, operation).
        events = [(op.invoke_time, 0, i) for i, op in enumerate(ops)]
        events += [(op.response_time, 1, i) for i, op in enumerate(ops) if not op.unknown]
        events.sort()
        size = len(events) + 2
        # Nodes: 0 = head, then the events in time order, then the tail (a sentinel never
        # reached: while an operation with a known outcome is pending, its return is listed).
        nxt = [*range(1, size), -1]
        prv = [-1, *range(size - 1)]
        node_op: list[Operation | None] = [None] * size  # the operation, on call nodes only
        bit = [0] * size  # call node -> the operation's bit in the linearized set
        read_only = [False] * size  # call node -> read-only, with a known outcome
        match = [-1] * size  # call node -> its return node (-1: unknown outcome)
        call_of = [-1] * size  # return node -> its call node
        call_node = [0] * len(ops)
        for node, (_, is_return, i) in enumerate(events, start=1):
            if is_return:
                match[call_node[i]] = node
                call_of[node] = call_node[i]
            else:
                call_node[i] = node
                node_op[node] = ops[i]
                bit[node] = 1 << i
                read_only[node] = not ops[i].unknown and model.read_only(ops[i])

        step = model.step
        pause_at = pause_every
        optional_last = lazy = self.lazy
        # (known operations linearized, state) -> the sets of unknown-outcome ones linearized
        # with them, for every configuration explored so far.
        seen: dict[tuple[int, Hashable], list[int]] = {}
        stack: list[_Frame] = []
        state: Hashable = model.init()
        known = 0  # bitset of the linearized operations with a known outcome
        unknown = 0  # bitset of the linearized operations with an unknown outcome
        required = sum(1 for op in ops if not op.unknown)
        steps = 0
        best_len = -1
        choices: list[int] = []
        followers: list[int] = []  # after a lazily applied unknown outcome: what may follow
        pos = 0
        expand = True  # a new configuration: its choices are still to be listed
        while True:
            if expand:
                if not required:
                    self.steps = steps
                    return True
                if steps >= pause_at:
                    self.steps = steps
                    yield
                    pause_at = steps + pause_every
                # List the candidates; stop at a read-only one the model accepts.
                choices = []
                optional: list[int] = []  # candidates with an unknown outcome go last
                node = nxt[_HEAD]
                op = node_op[node]
                while op is not None:
                    if read_only[node]:
                        steps += 1
                        if step(state, op)[0]:
                            choices = [node]
                            break
                    else:
                        (optional if optional_last and match[node] < 0 else choices).append(node)
                    node = nxt[node]
                    op = node_op[node]
                else:  # `node` is the first return event: order the choices goal first
                    goal = call_of[node]
                    goal_op = cast(Operation, node_op[goal])
                    steps += 1
                    if not read_only[goal] and step(state, goal_op)[0]:
                        choices.remove(goal)
                        choices.insert(0, goal)
                        choices += optional
                    else:
                        helpful: list[int] = []
                        others: list[int] = []
                        for c in choices + optional:
                            steps += 2
                            ok, after = step(state, cast(Operation, node_op[c]))
                            (helpful if ok and step(after, goal_op)[0] else others).append(c)
                        choices = helpful + others
                pos = 0
                expand = False

            if pos < len(choices):
                node = choices[pos]
                pos += 1
                steps += 1
                ok, new_state = step(state, cast(Operation, node_op[node]))
                if not ok:
                    continue
                ret = match[node]
                if ret >= 0:
                    new_known, new_unknown = known | bit[node], unknown
                    # Prune a configuration explored before, or one that only adds unknown-
                    # outcome operations to one explored before: that one can do whatever this
                    # one can, by leaving those operations out.
                    explored = seen.setdefault((new_known, new_state), [])
                    if any(x & ~new_unknown == 0 for x in explored):
                        continue
                    explored.append(new_unknown)
                else:
                    # An unknown outcome is only worth applying right before an operation that
                    # the model then accepts with another outcome: before any other, leaving it
                    # out works just as well. Lazily, it is applied together with one of those.
                    new_known, new_unknown = known, unknown | bit[node]
                    if new_state == state:
                        continue
                    memo = (new_known, new_state)
                    if any(x & ~new_unknown == 0 for x in seen.get(memo, ())):
                        continue
                    followers = []
                    other = nxt[_HEAD]
                    other_op = node_op[other]
                    while other_op is not None:
                        if other != node:
                            steps += 2
                            ok_was, was = step(state, other_op)
                            ok_now, now = step(new_state, other_op)
                            if ok_now and (not ok_was or was != now):
                                if not lazy or read_only[other]:
                                    followers = [other]
                                    break
                                followers.append(other)
                        other = nxt[other]
                        other_op = node_op[other]
                    if not followers:
                        continue
                    if not lazy:
                        seen.setdefault(memo, []).append(new_unknown)
                stack.append((choices, pos, state))
                state = new_state
                known, unknown = new_known, new_unknown
                # Lift the call event and the return event out of the list.
                p, q = prv[node], nxt[node]
                nxt[p] = q
                prv[q] = p
                if ret >= 0:
                    required -= 1
                    p, q = prv[ret], nxt[ret]
                    nxt[p] = q
                    prv[q] = p
                if ret >= 0 or not lazy:
                    expand = True
                else:  # not remembered in `seen`: only some of its choices are explored
                    choices = followers
                    pos = 0
                continue

            # No choice works here: undo the last one and try the next choice before it.
            if len(stack) > best_len:
                best_len = len(stack)
                self.best = [bit[c[p - 1]].bit_length() - 1 for c, p, _ in stack]
            if not stack:
                self.steps = steps
                return False
            steps += 1
            choices, pos, state = stack.pop()
            node = choices[pos - 1]
            ret = match[node]
            if ret >= 0:
                known ^= bit[node]
                required += 1
                nxt[prv[ret]] = ret
                prv[nxt[ret]] = ret
            else:
                unknown ^= bit[node]
            nxt[prv[node]] = node
            prv[nxt[node]] = node
