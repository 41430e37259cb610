/* pipe: pipelined model parallelism — a net cut into S stages over P devices, a batch cut into m
 * micro-batches, and the order in which each device runs its stages' forwards and backwards. From
 * that order alone come the number of micro-batches a device holds activations for at once (its
 * peak, with what one stage keeps per micro-batch) and, with each stage's times and the link, the
 * iteration's time, pipeline bubble included. Nothing here hard-codes a textbook count: the counts
 * are walked from the order, and tests/test_pipe.c checks them against the textbooks'.
 *
 * Schedules (Megatron-LM's names and orders):
 *   GPIPE        every forward, then every backward (Huang et al., GPipe, 2019)
 *   1F1B         PipeDream-Flush: device d runs min(P - d - 1, m) forwards, then one forward and one
 *                backward in turn, then the backwards left (Narayanan et al., 2021)
 *   INTERLEAVED  1F1B over v model chunks a device: chunk c of device d is stage c*P + d; forwards
 *                go through the chunks P micro-batches at a time, backwards through them in reverse;
 *                (P - d - 1)*2 + (v - 1)*P warm-up forwards (needs m a multiple of P)
 * Stage s runs on device s % P (s = c*P + d), so a device's S/P = v stages are not neighbours
 * unless v = 1. Not here: cutting a real net into stages and what each stage keeps (the caller's). */
#ifndef LRCNN_PIPE_H
#define LRCNN_PIPE_H

#include <stdbool.h>
#include <stdint.h>

#include "sim/base/err.h"
#include "sim/predict/sim.h"

typedef enum { PIPE_GPIPE, PIPE_1F1B, PIPE_INTERLEAVED } pipe_kind;

typedef struct {
    pipe_kind kind;
    int devices;      /* P */
    int micro;        /* m: micro-batches a batch */
    int chunks;       /* v: stages a device (INTERLEAVED; 1 otherwise) */
} pipe_cfg;

/* One step of a device's order: the forward or backward of micro-batch mb through stage `stage`. */
typedef struct {
    bool bwd;
    int mb, stage;
} pipe_op;

const char *pipe_kind_name(pipe_kind k);
/* The kind a name (gpipe, 1f1b, interleaved) gives; -1 for none. */
int pipe_kind_of(const char *name);

/* 0, or -1 with e saying what is wrong with c (a count below 1, chunks > 1 but not INTERLEAVED,
 * INTERLEAVED with m not a multiple of P). */
int pipe_check(const pipe_cfg *c, err *e);
static inline int pipe_stages(const pipe_cfg *c) { return c->devices * (c->kind == PIPE_INTERLEAVED ? c->chunks : 1); }
static inline int pipe_device_of(const pipe_cfg *c, int stage) { return stage % c->devices; }

/* Device d's order (2 * m * stages-a-device ops) into ops; returns their count. */
int pipe_order(const pipe_cfg *c, int d, pipe_op *ops);

/* Walked over device d's order: the most micro-batches whose forward through one of its stages has
 * begun and whose backward through it has not ended, in all (*total) and, where stash is not NULL,
 * the most bytes they keep at once, stash[s] being what stage s keeps for one micro-batch (its
 * autograd state: what its backward reads), with working[s] (or 0) on top for the op running then.
 * Returns the peak count. */
int pipe_in_flight(const pipe_cfg *c, int d, const int64_t *stash, const int64_t *working, int64_t *peak_bytes);

/* The iteration on the devices: each runs its order, an op as soon as the device is free and its
 * input has arrived — a forward through stage s after stage s-1's forward of that micro-batch and
 * link_us[s-1] to carry the activation; a backward through s after its own forward and stage s+1's
 * backward and link_us[s] to carry the gradient back. fwd_us[s], bwd_us[s]: stage s's times for one
 * micro-batch; tail_us[d] (NULL: none), what device d does once after its last backward (its stages'
 * optimizer step). Returns the time from the first forward to the last device's end; *busy (if not NULL): the
 * share of P times that the devices compute (1 - the bubble). -1 when the order deadlocks (never for
 * the three kinds: a test walks them). */
double pipe_makespan(const pipe_cfg *c, const double *fwd_us, const double *bwd_us, const double *link_us, const double *tail_us,
                     double *busy);

/* What stage s keeps, holds and takes for one micro-batch, from one lowering of the whole net at
 * the micro-batch size under a plan, each buffer charged by its use:
 *   stash       every buffer alive across the iteration's turn (forward to backward) that a backward
 *               step of its layers uses — what autograd keeps; a tensor two stages' backwards read
 *               counts in both (each device holds its copy: the received activation too); one no
 *               backward reads counts with its layer's stage; an encoded copy and its decoded map with
 *               the stages whose backward reads the map (each device holds its own)
 *   persistent  parameters, their gradients, optimizer state, running statistics of its layers
 *   working     the most its steps hold at once besides those (their outputs, gradients,
 *               workspaces): the live bytes its steps use or its layers own, at its fullest step,
 *               less its stash
 *   boundary    the activation it sends on (its last layer's output; the same bytes of gradient
 *               come back)
 *   fwd_us, bwd_us  its steps on the device's model (recomputation and moves in the backward's)
 *   update_us   its share of the optimizer's step (by parameters), and the batch's arrival on stage 0:
 *               once an iteration, after its device's last backward
 * On one device with one micro-batch this is the net itself: tests/test_pipe.c checks that the peak
 * (persistent, stash, working) equals the replay's and the times add up to the schedule's. */
typedef struct {
    int first, last;
    int64_t stash, persistent, working, boundary;
    double fwd_us, bwd_us, update_us;
} pipe_stage;


/* A net lowered once for ranges of its layers to be costed as stages: times and persistent bytes by
 * layer, the layers whose backward reads each buffer, the buffers on the device before each step and
 * at the iteration's turn. */
typedef struct {
    const net *n;
    int batch;
    sched s;
    double *fwd, *bwd, *upd;   /* [n] by layer (the batch's arrival and layerless steps with layer 1) */
    int64_t *persistent;       /* [n] */
    int *rd0, *rd;             /* buffer b's readers: rd[rd0[b] .. rd0[b+1]), sorted */
    bool *at_turn;             /* [n_buf]: on the device when the backward pass begins */
    int *on0, *on;             /* step i's buffers on the device: on[on0[i] .. on0[i+1]) (layers' steps) */
    int *decoded;              /* [n_buf]: for an encoded copy and its decoded map, the map (held where it is
                                  read, as pipe_sched.h composes it); else -1 */
} pipe_net;

int pipe_net_init(pipe_net *pn, const net *n, const plan *p, const sched_cfg *cfg, const sim_device *d, err *e);
void pipe_net_free(pipe_net *pn);
/* Layers [a, z) as one stage, into out. */
void pipe_range(const pipe_net *pn, int a, int z, pipe_stage *out);

/* Device d's peak: its stages' persistent bytes, and the stashes of the micro-batches in flight with
 * the running stage's working bytes (pipe_in_flight). What a stage receives needs no buffer of its
 * own: the activation is the tensor its first layers read (in its stash, or working), the gradient
 * its last layer's output gradient (working). pipe_sched.h composes the device's schedule step by
 * step, and tests/test_pipe.c checks its replay, and the engine running it, against this. st: every
 * stage. */
int64_t pipe_device_peak(const pipe_cfg *c, int d, const pipe_stage *st);

/* The same for a device with one stage s (GPipe, 1F1B), `flight` micro-batches in flight
 * (pipe_in_flight's count). */
static inline int64_t pipe_stage_peak(const pipe_stage *s, int flight) { return s->persistent + flight * s->stash + s->working; }

/* Stages [first[s], first[s+1]) of net n (first[0] = 1, first[S] = n->n; each a clean cut) under plan
 * p at micro-batch cfg->batch, on device d, into out[S]; -1 (e) if the plan does not lower. */
int pipe_stage_costs(const net *n, const plan *p, const sched_cfg *cfg, const sim_device *d, const int *first, int S,
                     pipe_stage *out, err *e);

/* S stage starts (first[0..S]) at the net's clean cuts (pipe_cut_ok under p) balancing the stages' forward times (greedy
 * over the `layer` lowering's per-layer times); -1 (e) when the net has fewer than S - 1 clean cuts. */
int pipe_balanced_cuts(const net *n, const plan *p, const sched_cfg *cfg, const sim_device *d, int S, int *first, err *e);

/* Whether a stage may begin at layer L: a clean cut, and not inside one of p's row or checkpoint
 * segments (whose recomputation would cross devices; p NULL: any clean cut). */
bool pipe_cut_ok(const net *n, const plan *p, int L);

#endif
