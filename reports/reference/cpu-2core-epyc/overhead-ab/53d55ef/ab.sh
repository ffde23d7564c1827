#!/bin/bash
# issue 65 (the protocol's until_target in measure's loop, the child passing reached): check_overhead at 76892b3
# (base, /work/run4) and at dev (/work/run5), alternated base, dev, dev, base; plus the rlpyt/gymnasium-async cells
PY=/work/main/.venv/bin/python
one() {  # worktree side round
  cd /work/$1 && PYTHONPATH=/work/$1 $PY scripts/check_overhead.py --repeats 3 > /work/runlogs/ab3/overhead-$2-$3.txt 2>&1
  rm -rf /tmp/ab3-rl-$2-$3
  cd /work/$1 && PYTHONPATH=/work/$1 $PY -m rlbench.cli run --adapter rlpyt-serial --adapter rlpyt-cpu --adapter gymnasium-async --env CartPole-v1 --num-envs 16 --repeats 3 --out /tmp/ab3-rl-$2-$3 > /work/runlogs/ab3/rlpyt-$2-$3.txt 2>&1
  cp /tmp/ab3-rl-$2-$3/results.jsonl /work/runlogs/ab3/rlpyt-$2-$3.jsonl
}
one run4 base 1; one run5 dev 1; one run5 dev 2; one run4 base 2
echo done > /work/runlogs/ab3/DONE
