#!/usr/bin/env bash
# gpu_tree.sh: the working tree the device tool copies to a lent GPU machine, kept within what such
# a copy may weigh (64 MiB). The tracked tree is about 80 MB, three quarters of it the committed result
# files (results/*.h5), and a GPU check reads none of them: tools/gpu_check.sh writes its own, and
# step 8's comparison with the committed ones runs back here. `trim` takes them off git's index and
# hides them from it (marked lines in .git/info/exclude), so that the copy leaves them out; the
# files stay where they are. `restore` puts the index entries and the exclude file back as they were.
# `size` prints what the copy would weigh: tracked files and untracked ones git does not ignore.
# Usage: tools/gpu_tree.sh trim|restore|size
#   trim, run the checks (the device tool's `run` with carry [".gpu"]), then restore; nothing is committed.
set -euo pipefail
cd "$(dirname "$0")/.."
exclude=$(git rev-parse --git-path info/exclude)
mark="# tools/gpu_tree.sh trim"

size() {
  git ls-files -z --cached --others --exclude-standard | xargs -0 du -cb 2>/dev/null | tail -1 |
    awk '{printf "%.1f MiB the device tool would copy (its limit: 64 MiB)\n", $1 / 1048576}'
}

case "${1:-}" in
trim)
  grep -qF "$mark" "$exclude" 2>/dev/null && { echo "gpu_tree.sh: already trimmed (tools/gpu_tree.sh restore undoes it)" >&2; exit 2; }
  if ! git diff --cached --quiet -- 'results/*.h5'; then
    echo "gpu_tree.sh: results/*.h5 have staged changes: commit or unstage them first" >&2
    exit 2
  fi
  mkdir -p "$(dirname "$exclude")"
  printf '%s\n/results/*.h5\n' "$mark" >>"$exclude" # the mark on its own line: git reads no comment after a pattern
  git rm -q --cached -- 'results/*.h5'
  size
  ;;
restore)
  grep -qF "$mark" "$exclude" 2>/dev/null || { echo "gpu_tree.sh: not trimmed" >&2; exit 2; }
  git reset -q HEAD -- 'results/*.h5'
  awk -v m="$mark" '$0 == m {skip = 1; next} skip {skip = 0; next} {print}' "$exclude" >"$exclude.tmp" # the mark and its pattern
  mv "$exclude.tmp" "$exclude"
  size
  ;;
size) size ;;
*)
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac
