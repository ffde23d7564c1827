# The device kit's tune part (scripts/device_run.sh tune16 --only ENV): `make check-tune` on the lent machine's
# 16 cores and GPU, one panel env per call (a call runs at most 6 minutes): trivial (a zero-cost step), gil (a
# 500 us step holding the GIL), cnn (the Nature CNN on stacked 84x84 frames, where the GPU is an option). Each:
# `rlbench tune --budget 2m` racing the panel's strategies up to 1024 envs (64 per core), with the policy on
# the GPU as well where the machine has one, against an exhaustive sweep of the same candidates thinned to 60
# configurations (every other size from 1024 down: the largest always, tune's pick added wherever it lies),
# 2 repeats. The first call also calibrates the machine (apart from the budget; cached for the next calls while
# the machine stays warm). Sourced by device_run.sh with $py, $work, $part, $rehearse and $only set; it leaves
# $work/$part/check-tune.csv and, per env, the tune and sweep run folders.
envs=${only_glob:-trivial,gil,cnn}
if [ "$rehearse" = 1 ]; then   # here, on CPU: one tiny pass of each env asked for
  args=(--budget 20s --sizes 1,2 --repeats 1 --max-cells 8)   # 20 s: a CNN tune spawns torch in each cell
else
  args=(--budget 2m --repeats 2 --max-cells 60)
fi
"$py" "$root/scripts/check_tune.py" --envs "$envs" --no-pufferlib --out "$work/$part" "${args[@]}"
