"""Sample programs for kelpie_dst: plain trio code that the simulator runs unmodified.

* :mod:`.bank`: a bank server on its own node that crashes and restarts while clients transfer
  money with retries; checks that money is conserved and every acknowledged transfer applied
  exactly once. The README's first command runs it.
* :mod:`.interleave`: 50 tasks interleaving through sleeps, locks, channels, events and
  cancellation (the determinism acceptance workload).
* :mod:`.race`: a bug that needs one task to win every round (PCT finds it, uniform rarely).
* :mod:`.deadlock`: two tasks taking two locks in opposite orders.
* :mod:`.leaky`: programs that read the wall clock, make a uuid4, or start a thread.
* :mod:`.threads`: a data race between two plain threads, found by seeded preemption (the
  threads canary), and its fix.
* :mod:`.setorder`: behaviour that depends on iterating a set of objects.
* :mod:`.replication`: a 4-node replicated log that emits send/recv events (the trace-timeline
  example in docs/traces.md).
* :mod:`.toy_kv_service`: a cached KV service with a planted cache race, and the Hypothesis
  state machines that find it (the tutorial in docs/hypothesis.md).
"""
