#!/bin/sh
# Re-run every command whose output is quoted in docs/*.md, printing "$ command", its output and
# its exit code, so the quoted output can be refreshed after the simulator changes (trace hashes
# change whenever the simulator's own events change). Run from anywhere with the virtualenv's bin
# directory on PATH:   PATH=$PWD/.venv/bin:$PATH sh docs/examples/transcript.sh > /tmp/transcript.txt
# Takes two to three minutes (the watchdog example alone waits 5 s of real time). Each section
# is headed "### <doc page>: <what>".

cd "$(dirname "$0")" || exit 1
export PYTHONDONTWRITEBYTECODE=1

show() {
    echo "\$ $*"
    sh -c "$*" 2>&1
    echo "[exit $?]"
    echo
}

echo "### tutorial: real trio, 20 runs"
show 'for i in $(seq 1 20); do python tutorial_wallet.py > /dev/null 2>&1 && printf . || printf F; done; echo'
echo "### tutorial: first run"
show kelpie-dst run --entry tutorial_wallet:main --seed 1
echo "### tutorial: seed loop"
show 'for seed in $(seq 0 9); do kelpie-dst run --entry tutorial_wallet:main --seed $seed > /dev/null; echo "seed $seed: exit $?"; done'
echo "### tutorial/cli: failing seed (exit 1), twice"
show kelpie-dst run --entry tutorial_wallet:main --seed 3
show kelpie-dst run --entry tutorial_wallet:main --seed 3
echo "### tutorial: fixed"
show kelpie-dst run --entry tutorial_wallet_fixed:main --seed 3
show python sweep.py tutorial_wallet:main 200
show python sweep.py tutorial_wallet_fixed:main 200
echo "### tutorial: pytest (from the repository root)"
show 'cd ../.. && pytest docs/examples/test_tutorial_wallet.py'
show 'cd ../.. && DST_SEED=7 pytest docs/examples/test_tutorial_wallet.py -v'
show 'cd ../.. && pytest docs/examples/test_tutorial_wallet.py -q -k no_overdraft_fixed --dst-seeds 200'
show 'cd ../.. && pytest docs/examples/test_tutorial_wallet.py -q -k "test_no_overdraft and not fixed" --dst-seeds 20 --dst-seed-start 100'
echo "### cli: shrink a plain program"
show kelpie-dst shrink --entry tutorial_wallet:main --seed 7 --swarm
echo "### tutorial: nodes"
show kelpie-dst run --entry tutorial_nodes:main --seed 1
show kelpie-dst run --entry tutorial_nodes:main --seed 1 --fault process.crash=0.2
show kelpie-dst run --entry tutorial_nodes:main --seed 1 --fault process.crash=0.2 --trace /tmp/nodes.trace
show python show_trace.py /tmp/nodes.trace node. fault log run.
show kelpie-dst run --entry tutorial_nodes:main_fixed --seed 1 --fault process.crash=0.2
echo "### tutorial/cli: guards (exit 4)"
show kelpie-dst run --entry tutorial_leaks:main --seed 1
show kelpie-dst run --entry tutorial_leaks:main --seed 1 --strict
echo "### tutorial/cli: check-determinism"
show kelpie-dst check-determinism --entry tutorial_wallet:main --seed 3
show kelpie-dst check-determinism --entry kelpie_dst.examples.setorder:main --seed 4
show kelpie-dst check-determinism --entry hashseed_order:main --seed 1
show kelpie-dst check-determinism --entry hashseed_order:main --seed 1 --vary-hashseed --runs 4
echo "### tutorial: PCT"
show python sweep.py kelpie_dst.examples.race:main 100 random
show python sweep.py kelpie_dst.examples.race:main 100 pct
show python sweep.py tutorial_wallet:main 200 pct
show kelpie-dst run --entry kelpie_dst.examples.race:main --strategy pct --seed 15
echo "### cli: exit codes 2, 3, 64"
show kelpie-dst run --entry kelpie_dst.examples.deadlock:main --seed 1
show kelpie-dst run --entry process_faults:main --seed 1 --max-time 2s
show kelpie-dst run --entry cli_crash:main --seed 1
show kelpie-dst run --entry tutorial_wallet
show kelpie-dst run --entry tutorial_wallet:main --fault process.crash=2
show kelpie-dst run --entry tutorial_wallet:main --fault disk.melt=0.1
show kelpie-dst run --entry tutorial_wallet:main --max-time soon
show kelpie-dst run --entry tutorial_wallet:main --strategy fifo
show kelpie-dst check-determinism --entry tutorial_wallet:main
echo "### cli: seeds, swarm, hash seed, faults"
show 'kelpie-dst run --entry tutorial_wallet:main | head -1'
show kelpie-dst run --entry tutorial_nodes:main_fixed --seed 4 --swarm
show 'PYTHONHASHSEED=5 kelpie-dst run --entry tutorial_wallet:main --seed 3 | tail -2'
show 'for i in 1 2; do KELPIE_DST_NO_REEXEC=1 kelpie-dst run --entry hashseed_order:main --seed 1 | tail -1; done'
show 'for i in 1 2; do kelpie-dst run --entry hashseed_order:main --seed 1 | tail -1; done'
show kelpie-dst faults
show 'kelpie-dst faults --markdown'
echo "### faults"
show kelpie-dst run --entry process_faults:main --seed 1 --fault process.pause=0.3
show kelpie-dst run --entry process_faults:main --seed 1 --fault process.crash=0.3
show kelpie-dst run --entry process_faults:main --seed 1 --fault process.crash=0.3 --trace /tmp/pf.trace
show python show_trace.py /tmp/pf.trace node. fault
show python custom_fault.py
show python -c "\"import kelpie_dst; print(', '.join(f.describe() for f in kelpie_dst.FaultPlan(swarm=True).resolve(0)))\""
echo "### api"
show PYTHONHASHSEED=0 python run_api_demo.py
show python stepping_demo.py
echo "### threads: the watchdog (5 s of real time)"
show kelpie-dst run --entry watchdog_app:main --seed 1
echo "### cli: a scenario, a sweep and a replay token (from the repository root)"
show 'cd ../.. && kelpie-dst run kv_linearizability --seed 3'
show 'cd ../.. && kelpie-dst sweep tests/quality/scenarios/duplicate_deposit.toml --seeds 10 --jobs 1'
show 'cd ../.. && kelpie-dst replay $(kelpie-dst sweep tests/quality/scenarios/duplicate_deposit.toml --seeds 10 --jobs 1 | sed -n "s/^replay: kelpie-dst replay //p" | head -1)'
echo "### scenarios: liveness, bad input, shrink"
show 'cd ../.. && kelpie-dst run bank --seed 1 --set duration=5s --set liveness.within=1s'
show 'cd ../.. && kelpie-dst run tests/cli/bad/fault_unknown_type.toml'
show 'cd ../.. && kelpie-dst run kv_linearizability --set faults.network.partition.probability=2'
show 'cd ../.. && kelpie-dst run tests/cli/bad/invariant_unknown.toml'
show 'cd ../.. && kelpie-dst shrink tests/quality/scenarios/duplicate_deposit.toml --seed 2'
echo "### sweeps: a failure that depends on earlier seeds"
show 'cd ../.. && kelpie-dst sweep --entry tests.cli.programs:leaky --seeds 3 -j 1'
echo "### tutorial: PCT depth 1, handoff"
show python sweep.py kelpie_dst.examples.race:main 100 pct 1
show python sweep.py kelpie_dst.examples.handoff:main 300 pct
echo "### traces: save, show, diff (files in /tmp)"
show 'kelpie-dst run --entry kelpie_dst.examples.replication:main --seed 4 --fault process.crash=0.04 --fault process.pause=0.03 --fault network.partition=0.3 --fault network.delay=0.05 --fault network.reset=0.01 --trace /tmp/replication.trace'
show 'cd /tmp && kelpie-dst trace show replication.trace --node f3 --kind node --kind fault --from 15s --to 22s'
show 'PYTHONHASHSEED=1 kelpie-dst run --entry hashseed_order:main --seed 1 --trace /tmp/a.trace > /dev/null; PYTHONHASHSEED=2 kelpie-dst run --entry hashseed_order:main --seed 1 --trace /tmp/b.trace > /dev/null; cd /tmp && kelpie-dst trace diff a.trace b.trace'
echo "### mcp: the chaos workload (tests/mcp/workloads.py)"
show 'cd ../.. && python -c "import kelpie_dst; from tests.mcp import workloads; r = kelpie_dst.run(workloads.chaos, seed=1, faults=workloads.ALL_FAULTS); print(r.summary_line()); print(\"faults fired:\", \", \".join(f\"{k}={v}\" for k, v in r.faults_fired.items()))"'
echo "### hypothesis: the toy KV machine, in a fresh directory (no repository pytest options)"
show 'd=$(mktemp -d) && printf "from kelpie_dst.examples.toy_kv_service import FixedToyKVMachine, ToyKVMachine\n\nTestToyKV = ToyKVMachine.TestCase\nTestFixedToyKV = FixedToyKVMachine.TestCase\n" > $d/test_toy_kv_machine.py && cd $d && python -m pytest -q -p no:cacheprovider test_toy_kv_machine.py; rc=$?; rm -rf $d; exit $rc'
echo "### README: counter.py, copied from the README"
show 'd=$(mktemp -d) && awk "/^# counter.py/,/^\`\`\`\$/" ../../README.md | grep -v "^\`\`\`" > $d/counter.py && cd $d && kelpie-dst run --entry counter:main --seed 1; rc=$?; rm -rf $d; exit $rc'
