#!/bin/bash
# issue 64 part 7 (and the rlpyt/batch change): check_overhead at 26ffda1 (base) and at dev, alternated; rlpyt cells too
PY=/work/main/.venv/bin/python
one() {  # side round
  cd /work/$1 && PYTHONPATH=/work/$1 $PY scripts/check_overhead.py --repeats 3 > /work/runlogs/ab/overhead-$1-$2.txt 2>&1
  rm -rf /tmp/ab-rl-$1-$2
  cd /work/$1 && PYTHONPATH=/work/$1 $PY -m rlbench.cli run --adapter rlpyt-serial --adapter rlpyt-cpu --adapter rlpyt-gpu --adapter gymnasium-async --env CartPole-v1 --num-envs 16 --repeats 3 --out /tmp/ab-rl-$1-$2 > /work/runlogs/ab/rlpyt-$1-$2.txt 2>&1
  cp /tmp/ab-rl-$1-$2/results.jsonl /work/runlogs/ab/rlpyt-$1-$2.jsonl
}
mkdir -p /work/runlogs/ab
one base 1; one dev 1; one dev 2; one base 2
echo done > /work/runlogs/ab/DONE
