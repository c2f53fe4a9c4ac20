"""Reusable scenario workloads (see docs/scenarios.md).

* :mod:`.kv`: clients on several nodes doing get/set/cas against one SimKV database host,
  recorded as a history and checked for linearizability (``scenarios/kv_linearizability.toml``).
* :mod:`.bank`: the bank example (:mod:`kelpie_dst.examples.bank`) as a scenario workload, with
  its money-conservation and exactly-once invariants (``scenarios/bank.toml``).
* :mod:`.agents`: N agents, M messages each, a mix of tools, on server nodes sharing one
  database host, with checkers for lost acknowledgements, single activation, mixing across
  agents and completion (the five agent scenarios in ``scenarios/``).
* :mod:`.canaries`: planted bugs that the harness must find, replay and shrink
  (``tests/quality``).
"""
