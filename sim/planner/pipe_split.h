/* pipe_split: where to cut a net into pipeline stages (sim/predict/pipe.h) so that every device's
 * peak fits a budget and the slowest stage — what bounds the pipeline's throughput — is as fast as
 * can be: a dynamic program over the net's clean cuts, exact for that objective under the stage
 * model of pipe_stage_costs (one lowering of the net at the micro-batch size; any range of layers
 * costed from it: its stash, working and persistent bytes, its times, the buffers for what it
 * receives, and the micro-batches its device holds at once under the schedule). GPipe and 1F1B (a
 * stage a device); the interleaved schedule's stages are not contiguous on a device and are not
 * searched here. Not here: plans chosen per stage (one plan for all), an ILP over both. */
#ifndef LRCNN_PIPE_SPLIT_H
#define LRCNN_PIPE_SPLIT_H

#include "sim/predict/pipe.h"

/* Stage starts first[0..P] (first[0] = 1, first[P] = n->n) of the fastest split whose every device's
 * peak fits `budget`: 0; 1 when none does (e says the least budget any split needs); -1 (e) on error. */
int pipe_split(const net *n, const plan *p, const sched_cfg *cfg, const sim_device *d, const pipe_cfg *c, int64_t budget,
               int *first, err *e);

#endif
