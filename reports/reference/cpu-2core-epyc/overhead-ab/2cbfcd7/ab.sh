#!/bin/bash
# issue 66 (seed per repeat in the cell spec and the row; compare's noise): check_overhead at 14c87cc (base, /work/run4)
# and at dev (/work/run5), alternated base, dev, dev, base; plus the rlpyt/gymnasium-async cells
PY=/work/main/.venv/bin/python
one() {  # worktree side round
  cd /work/$1 && PYTHONPATH=/work/$1 $PY scripts/check_overhead.py --repeats 3 > /work/runlogs/ab2/overhead-$2-$3.txt 2>&1
  rm -rf /tmp/ab2-rl-$2-$3
  cd /work/$1 && PYTHONPATH=/work/$1 $PY -m rlbench.cli run --adapter rlpyt-serial --adapter rlpyt-cpu --adapter gymnasium-async --env CartPole-v1 --num-envs 16 --repeats 3 --out /tmp/ab2-rl-$2-$3 > /work/runlogs/ab2/rlpyt-$2-$3.txt 2>&1
  cp /tmp/ab2-rl-$2-$3/results.jsonl /work/runlogs/ab2/rlpyt-$2-$3.jsonl
}
one run4 base 1; one run5 dev 1; one run5 dev 2; one run4 base 2
echo done > /work/runlogs/ab2/DONE
