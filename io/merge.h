/* merge: the part files of a sharded sweep (lrcnn sweep SPEC --shard I/N) joined into the file the
 * whole sweep writes.
 *
 * Every part is checked before anything is written: a result file of a shard (root attributes
 * shard = "I/N" and sweep_runs), all N parts of one sweep present once each, written from the same
 * spec text (spec_digest), commit and tree state (git_commit, git_dirty), and together holding
 * each run of the sweep exactly once. The merged file has part 1's root attributes less the
 * shard's; lrcnn_command and date are the merge's; host, cpu, omp_wait_policy and hdf5_version read
 * "mixed: see /shards" and threads 0 where the parts differ. Runs are copied as they are
 * (H5Ocopy), and the table /shards says where and how each part was run. Written through
 * io/outfile.h like every result, so it is never half-written and never replaces a file unless
 * overwrite. Not done here: running shards (cli/cli_sweep.c). */
#ifndef LRCNN_MERGE_H
#define LRCNN_MERGE_H

#include <stdbool.h>
#include <stdio.h>

#include "sim/base/err.h"

/* log (or NULL) gets a line when the parts come from a tree with local changes, which merge
 * cannot compare. */
int h5_merge(const char *out, char *const *parts, int n, bool overwrite, FILE *log, err *e);

#endif
