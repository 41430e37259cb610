#!/usr/bin/env bash
# A sweep as a Slurm job array: task I of N runs `lrcnn sweep SPEC --shard I/N` into a part file,
# and a last job, started when every task has succeeded, merges the parts into one result file.
#
#   experiments/slurm_sweep.sh SPEC N OUT.h5 [sbatch options...]
#   e.g. experiments/slurm_sweep.sh experiments/baselines.spec 16 results/baselines.h5 --partition=cpu
#
# The tree must be built (./lrcnn --version builds it) on a file system every node sees, and be the
# same commit everywhere: merge refuses parts from different commits or spec texts. Parts go to
# OUT.parts/ beside OUT.h5; a failed task can be rerun alone (sbatch --array=I ...) before merging
# by hand: lrcnn merge OUT.h5 OUT.parts/part-*.h5.
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
spec="$1" n="$2" out="$3"; shift 3
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
lrcnn="$here/build/lrcnn"
[ -x "$lrcnn" ] || { echo "slurm_sweep: build first (./lrcnn --version)" >&2; exit 2; }
parts="$out.parts"
mkdir -p "$parts"
array=$(sbatch --parsable --array="1-$n" --job-name=lrcnn-sweep --output="$parts/%a.log" "$@" \
  --wrap="'$lrcnn' sweep '$spec' --shard \$SLURM_ARRAY_TASK_ID/$n -o '$parts'/part-\$SLURM_ARRAY_TASK_ID.h5 --quiet")
sbatch --parsable --dependency="afterok:$array" --job-name=lrcnn-merge --output="$parts/merge.log" "$@" \
  --wrap="'$lrcnn' merge '$out' '$parts'/part-*.h5"
echo "submitted: array $array (tasks 1..$n), merge after it; parts and logs in $parts/" >&2
