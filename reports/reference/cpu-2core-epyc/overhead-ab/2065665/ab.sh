#!/bin/bash
# issue 65: 2065665 (dev, run5) against 7653948 (base, run4), alternated
PY=/work/main/.venv/bin/python
one() {  # worktree side round
  cd /work/$1 && PYTHONPATH=/work/$1 $PY scripts/check_overhead.py --repeats 3 > /work/runlogs/ab4/overhead-$2-$3.txt 2>&1
  rm -rf /tmp/ab4-rl-$2-$3
  cd /work/$1 && PYTHONPATH=/work/$1 $PY -m rlbench.cli run --adapter rlpyt-serial --adapter rlpyt-cpu --adapter gymnasium-async --env CartPole-v1 --num-envs 16 --repeats 3 --out /tmp/ab4-rl-$2-$3 > /work/runlogs/ab4/rlpyt-$2-$3.txt 2>&1
  cp /tmp/ab4-rl-$2-$3/results.jsonl /work/runlogs/ab4/rlpyt-$2-$3.jsonl
}
one run4 base 1; one run5 dev 1; one run5 dev 2; one run4 base 2
echo done > /work/runlogs/ab4/DONE
