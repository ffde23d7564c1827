#!/usr/bin/env bash
# One part of the device kit, run where it lands: on a lent GPU machine (python3 with CUDA torch and jax, no
# network), with the part's wheels carried in .device-kit/PART (`make device-kit` made them and printed this call):
#
#     bash scripts/device_run.sh PART                  # PART: gpu-policy, gpu-jax, gpu-torch, gpu-physics, gpu-warp, gpu-train, cores16, tune16
#     bash scripts/device_run.sh PART --rehearse       # here, on CPU, tiny sizes, .device-kit-rehearse/PART
#     bash scripts/device_run.sh PART --only GLOB      # only the part's cells matching GLOB (rerun what broke)
#                                                      # (tune16, a script part: --only ENVS, its panel entries)
#     bash scripts/device_run.sh PART --stage S        # a part over one call (gpu-warp): stage S's pieces, held
#                                                      # on the machine for the part's call (made right after)
#
# It installs the wheels into a temporary site folder (not the project's pins: rlbench runs on the torch and jax
# it finds, and env.json records them), puts this checkout's rlbench and adapters there, runs the part's suite
# under a wall limit (DEVICE_WALL_S, default device_kit.py's WALL_S; finished rows are kept when it cuts in)
# and leaves the run folder as $OUT/PART.tar.gz (under the 16 MiB a returned file may have). A rehearsal hides
# from the interpreter every package the GPU machine lacks, unless the kit carries it, so a missing wheel fails
# here, not there.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
parts=$(cd "$root/suites/device" && ls -- *.toml *.sh | sed 's/\.\(toml\|sh\)$//' | paste -sd, - | sed 's/,/, /g')
part=${1:-}
[ $# -gt 0 ] && shift
rehearse=0
only=()
only_glob=
stage=
while [ $# -gt 0 ]; do
  case $1 in
    --rehearse) rehearse=1 ;;
    --only)
      [ $# -gt 1 ] || { echo "device_run: --only needs a cell glob" >&2; exit 2; }
      only=(--only "$2"); only_glob=$2; shift ;;
    --stage)
      [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "device_run: --stage needs a stage number (1, 2, ...)" >&2; exit 2; }
      stage=$2; shift ;;
    *) echo "device_run: unknown argument '$1' (valid: --rehearse, --only GLOB, --stage S)" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$part" ] || { [ ! -f "$root/suites/device/$part.toml" ] && [ ! -f "$root/suites/device/$part.sh" ]; }; then
  echo "device_run: unknown part '$part' (valid: $parts)" >&2
  exit 2
fi
if [ $rehearse = 1 ]; then
  py=${PYTHON:-$root/.venv/bin/python}
  kit=${KIT:-$root/.device-kit-rehearse}/$part
  out=${OUT:-$root/reports/device-rehearse}
else
  py=${PYTHON:-python3}
  kit=${KIT:-$root/.device-kit}/$part
  out=${OUT:-$root/reports/device}
fi
if [ -n "$stage" ]; then   # a stage call: its pieces checked and held (KIT.held) for the part's call; nothing runs
  [ -d "$kit.stage$stage" ] || { echo "device_run: no stage $stage for $part in $kit.stage$stage: run \`make device-kit\`$([ $rehearse = 1 ] && echo ' REHEARSE=1') first, and carry that folder" >&2; exit 2; }
  exec "$py" "$root/scripts/device_kit.py" hold "$kit.stage$stage" "$kit.held"
fi
if [ ! -f "$kit/kit.json" ]; then
  echo "device_run: no kit for $part in $kit: run \`make device-kit\`$([ $rehearse = 1 ] && echo ' REHEARSE=1') first" >&2
  exit 2
fi
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/rlbench-device.XXXXXX")
trap 'rm -rf "$work"' EXIT
site=$work/site
t0=$(date +%s)

if [ $rehearse = 1 ]; then   # the stage calls a lent machine gets first, here in turn
  for s in $(seq 1 "$("$py" -c 'import json, sys; print(json.load(open(sys.argv[1])).get("stages", 0))' "$kit/kit.json")"); do
    "$py" "$root/scripts/device_kit.py" hold "$kit.stage$s" "$kit.held" || exit 2
  done
fi
"$py" "$root/scripts/device_kit.py" wheels "$kit" "$work/wheels" --held "$kit.held" || exit 2
"$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$work"/wheels/*.whl \
  || { echo "device_run: the kit's wheels did not install ($kit/wheels)" >&2; exit 2; }
rm -rf "$work/wheels"
if [ -f "$kit/envpool-assets.tar.gz" ]; then
  # EnvPool's asset packages trimmed to this part's envs (the whole ones are over what one call carries)
  tar -xzf "$kit/envpool-assets.tar.gz" -C "$work" || exit 2
  export ENVPOOL_ASSETS_PATH=$work/envpool-assets
fi
mkdir -p "$site/rlbench"
cp -r "$root/rlbench/." "$site/rlbench/"
cp -r "$root/adapters" "$site/adapters"
eval "$("$py" "$root/scripts/device_kit.py" provenance "$kit")"   # RLBENCH_GIT_*, wall_s
suite=$root/suites/device/$part.toml
script=$root/suites/device/$part.sh   # a script part (tune16) runs scripts, not one suite
if [ $rehearse = 1 ]; then
  if [ ! -f "$script" ]; then
    "$py" "$root/scripts/device_kit.py" rehearse-suite "$suite" "$work/$part.toml" || exit 2
    suite=$work/$part.toml
  fi
  "$py" "$root/scripts/device_kit.py" guard "$site" "$work/guard" || exit 2
  export PYTHONPATH=$site:$work/guard
else
  export PYTHONPATH=$site
fi
export PYTHONUNBUFFERED=1
export RLBENCH_ENVS_HERE=brax   # no network to build the brax environment: its adapters (mjx) run here, on the kit
# JAX's persistent compilation cache, the machine's own for this call: a cell's later repeats (fresh processes)
# load what its first compiled, as Warp's kernel cache does; compile_s stays out of every rate, and the rows
# record the cache (device_settings.JAX_COMPILATION_CACHE_DIR)
export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-$work/jax-cache}
echo "device_run: $part on $(hostname), kit installed in $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "device_run: no nvidia-smi"

cd "$work" || exit 2   # `python -m` puts the working folder first on the path: not the checkout's rlbench
"$py" "$root/scripts/device_kit.py" imports "$kit" || exit 2
if [ -f "$script" ]; then
  export root py work part rehearse only_glob
  timeout -s INT -k 30 "$wall_s" bash "$script"
  rc=$?
  [ -f "$work/$part/check-tune.csv" ] || { echo "device_run: $part wrote no check-tune.csv (exit $rc)" >&2; exit 1; }
  tar -czf "$out/$part.tar.gz" -C "$work" "$part"
  echo "device_run: $out/$part.tar.gz, $(( $(stat -c %s "$out/$part.tar.gz") / 1024 )) KiB, $(( $(date +%s) - t0 )) s in all"
  exit $rc
fi
timeout -s INT -k 30 "$wall_s" "$py" -m rlbench.cli run "$suite" --out "$work/$part" --no-build \
  --allow-errors "${only[@]}"
rc=$?
if [ ! -f "$work/$part/results.jsonl" ]; then
  echo "device_run: $part wrote no results (exit $rc)" >&2
  exit 1
fi
[ $rc = 124 ] && echo "device_run: the wall limit ($wall_s s) cut the run; its finished rows are kept"
[ $rc = 124 ] && "$py" -m rlbench.cli report "$work/$part" >/dev/null
tar -czf "$out/$part.tar.gz" -C "$work" "$part"
size=$(stat -c %s "$out/$part.tar.gz")
echo "device_run: $out/$part.tar.gz, $(( size / 1024 )) KiB, $(( $(date +%s) - t0 )) s in all"
"$py" - "$work/$part/results.jsonl" <<'EOF'
import collections, json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
print("device_run: rows: " + ", ".join(f"{n} {s}" for s, n in sorted(collections.Counter(r["status"] for r in rows).items())))
for r in rows:
    if r["status"] not in ("ok", "unsupported"):
        print(f"  {r['status']}: {r['cell_id']}: {str(r.get('error'))[:300]}")
EOF
if [ "$size" -gt $(( 16 * 1024 * 1024 )) ]; then
  echo "device_run: $part.tar.gz is over the 16 MiB a returned file may have" >&2
  exit 1
fi
