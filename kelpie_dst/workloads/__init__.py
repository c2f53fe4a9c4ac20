"""Reusable scenario workloads (see docs/scenarios.md).

* :mod:`.kv`: clients on several nodes doing get/set/cas against one SimKV database host,
  recorded as a history and checked for linearizability (``scenarios/kv_linearizability.toml``).
* :mod:`.bank`: the bank example (:mod:`kelpie_dst.examples.bank`) as a scenario workload, with
  its money-conservation and exactly-once invariants (``scenarios/bank.toml``).
* :mod:`.canaries`: planted bugs that the harness must find, replay and shrink
  (``tests/quality``).
"""
