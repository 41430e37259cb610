/* timing: a calibrated time model — what each step of a schedule costs on one machine, fitted
 * from the engine's own measurements of the same kinds of steps (`lrcnn calibrate`).
 *
 * Every step has a *key* (what it does, without its size) and a size x along that key:
 *   FWD, BWD, STATS   "fwd conv 64x224>64x224 k3 s1 p1" (kind, input and output channels and
 *                     widths, window; the input height too for kinds that need whole maps; flags
 *                     for in-place, map statistics, no input gradient): x = output rows × batch,
 *                     so one key serves every band height and batch;
 *   ALLOC, FREE       "alloc" (and "alloc zero", zero-filled): x = bytes;
 *   COPY, OFFLOAD, PREFETCH, LOAD, UPDATE: x = bytes moved; ENCODE, DECODE "encode sign": x = the
 *                     map's fp32 bytes.
 * A key's time is fitted as a + b·x over its samples (least squares; through the origin when all
 * were taken at one size). A key never measured falls back to its *class* (the key's first two
 * words, "fwd conv"): the class's measured microseconds per unit of work (FLOPs, or bytes moved for
 * kinds without), and a class never measured to the roofline of the device profile. The model
 * says which share of a prediction came from fitted keys.
 * Not done here: measuring (engine/exec.h step_us, cli/cli_calibrate.c) or files (io/profile.h). */
#ifndef LRCNN_TIMING_H
#define LRCNN_TIMING_H

#include "sim/lower/sched.h"

#define TIMING_KEY_LEN 96
#define TIMING_CLS_LEN 32

/* A step as the model sees it. */
typedef struct {
    char key[TIMING_KEY_LEN], cls[TIMING_CLS_LEN];
    double x;      /* size along the key */
    double work;   /* size along the class: FLOPs, or bytes moved */
} timing_probe;

void timing_probe_step(const net *n, const sched *s, const sched_step *t, timing_probe *p);

/* One measured step. */
typedef struct {
    const char *key, *cls;
    double x, work, us;
} timing_sample;

typedef struct {
    char *name;
    double a, b;          /* keys: us = a + b x; classes: us = b work */
    int n;                /* samples behind it */
} timing_entry;

typedef struct timing_memo timing_memo;

typedef struct timing_model {
    char source[256];     /* the profile file it was read from */
    char backend[16];     /* "cpu" | "cuda" */
    double error;         /* the median |predicted - measured| / measured of the held-out checks the
                             calibration ran (0: none): how far apart two plans' predicted times
                             must be to tell them apart */
    int n_key, n_cls;
    timing_entry *keys, *cls; /* sorted by name */
    timing_memo *memo;    /* lookups made so far (timing_sched_step_us) */
} timing_model;

/* How much faster, relatively, one plan must be predicted than another for the model to tell them
 * apart: a one-sided 90% bound on the difference of two predictions whose errors are independent and
 * normal with the spread m->error implies (the median of |N(0, s)| is 0.6745 s), 1.2816 x sqrt(2) x
 * m->error / 0.6745 = 2.687 x m->error. Conservative where two plans share most of their steps (their
 * errors are then alike and their difference smaller). 0 without held-out checks. */
double timing_margin(const timing_model *m);

/* Fits m from n samples (m->source and m->backend are left to the caller). */
void timing_fit(timing_model *m, const timing_sample *v, int n);
void timing_free(timing_model *m);
/* A view of m for another thread: the same keys and classes, a memo of its own (the memo is the one
 * thing a lookup writes). Free with timing_unshare, before m. */
timing_model timing_share(const timing_model *m);
void timing_unshare(timing_model *view);

/* How a step's time was predicted. */
typedef enum { TIMING_FITTED, TIMING_CLASS, TIMING_ROOFLINE } timing_how;

/* The predicted microseconds of a probed step; roofline_us is the device's roofline for it (used
 * when neither its key nor its class was measured). */
double timing_step_us(const timing_model *m, const timing_probe *p, double roofline_us, timing_how *how);

/* The same for step t of schedule s (of net n), remembering each kind of step's lookup: a
 * schedule's prediction builds each key once, not once a step (the planner times hundreds). Only
 * after timing_memo_use(m, n), which makes the lookups n's (a walk over a schedule's steps asks
 * it once, not once a step: comparing the net's name at every step was 4% of the planner's time
 * with a profile). */
void timing_memo_use(const timing_model *m, const net *n);
double timing_sched_step_us(const timing_model *m, const net *n, const sched *s, const sched_step *t, double roofline_us,
                            timing_how *how);

#endif
