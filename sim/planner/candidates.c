/* candidates: see candidates.h. */
#include "sim/planner/candidates.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/lower/pipeline.h"
#include "sim/predict/arena.h"
#include "sim/predict/closed.h"

/* The most migration m can take off the device at a plan's peak: all it moves (at some moments no
 * layer is at work; a closer bound would have to know the moment of the peak). */
int64_t cand_migrate_savable(const search_req *r, int m)
{
    int state = r->cfg.optimizer == SCHED_ADAM ? 2 : 1; /* optimizer state per parameter */
    int64_t all = 0;
    for (int L = 0; L < r->n->n; L++) all += r->n->layers[L].params * 4 * (1 + (m >= 1 ? state : 0) + (m == 2));
    return all;
}

/* A plan of this peak may have the smallest footprint: nothing fits, and no arena planned so far is
 * below its peak (no arena is smaller than its plan's peak). */
bool cand_may_be_least(const search_ctx *c, int64_t peak)
{
    return c->least && (c->least_at < 0 || peak < c->out->pts[c->least_at].footprint);
}

bool cand_fits(const search_ctx *c, int i) { return c->out->pts[i].placed && c->out->pts[i].footprint <= c->r->budget; }

static uint64_t text_hash(const char *s)
{
    uint64_t h = 1469598103934665603u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

/* The slot of text in the table of texts seen: its point's index there, or -1 where it would go. */
static int *slot_of(search_ctx *c, const char *text)
{
    if (2 * (c->out->n_pts + 1) > c->n_slots) { /* grow, and put every point back */
        free(c->slots);
        c->n_slots = c->n_slots ? 2 * c->n_slots : 1024;
        c->slots = err_calloc((size_t)c->n_slots, sizeof *c->slots);
        for (int k = 0; k < c->n_slots; k++) c->slots[k] = -1;
        for (int i = 0; i < c->out->n_pts; i++) *slot_of(c, c->out->pts[i].text) = i;
    }
    for (uint64_t k = text_hash(text);; k++) {
        int *s = &c->slots[k & (uint64_t)(c->n_slots - 1)];
        if (*s < 0 || !strcmp(c->out->pts[*s].text, text)) return s;
    }
}

/* Point i's arena, from its schedule lowered again (and its time, if it had none): what it
 * reserves decides whether it fits. */
void cand_place(search_ctx *c, int i)
{
    const search_req *r = c->r;
    search_point *pt = &c->out->pts[i];
    plan p;
    sched s;
    err e;
    if (plan_parse(&p, r->n, pt->text, &e)) return;
    int rc = pipeline_lower_lean(&s, r->n, &p, &r->cfg, &e);
    plan_free(&p);
    if (rc) return;
    if (isnan(pt->time_us)) pt->time_us = sim_time_us(r->n, &s, r->dev, NULL);
    arena a;
    arena_measure(&s, &a);
    pt->footprint = a.size + a.apart, pt->placed = true;
    arena_free(&a), sched_free(&s);
    if (c->least && (c->least_at < 0 || pt->footprint < c->out->pts[c->least_at].footprint)) c->least_at = i;
}

/* Lowers, replays and times `text` with BatchNorm mode `bn` (NULL: the default), once (a text seen
 * before returns its index). A plan without encodings or migration whose closed-form peak (equal to
 * the replay: tests/test_closed.c) is over the budget is not lowered (no schedule), unless
 * migration could bring it under (the migration pass orders candidates by time). Its arena waits
 * for settle(), which plans it only for the plans that may answer, except when nothing fits (the
 * arena of every plan that may be the smallest footprint) or r->place_all. Returns the index of
 * its point; -1 if it is not a plan for this net. */
int cand_eval_bn(search_ctx *c, const char *text, const char *bn, const char *source)
{
    const search_req *r = c->r;
    char full[PLAN_TEXT_LEN];
    if ((size_t)snprintf(full, sizeof full, "%s%s%s", text, bn ? " bn=" : "", bn ? bn : "") >= sizeof full) return -1;
    int *slot = slot_of(c, full);
    if (*slot >= 0) {
        int i = *slot;
        if (!c->out->pts[i].placed && cand_may_be_least(c, c->out->pts[i].peak)) cand_place(c, i);
        return i;
    }
    plan p;
    sched s;
    err e;
    sim_mem mem;
    double us = NAN;
    if (plan_parse(&p, r->n, full, &e)) return -1;
    bool staged = false;
    int levels = 0;
    for (int k = 0; k < p.n_seg; k++) {
        staged |= p.segs[k].passes.staged;
        if (p.segs[k].passes.staged && p.segs[k].passes.n_fwd > levels) levels = p.segs[k].passes.n_fwd;
    }
    bool closed = !plan_modified(&p);
    if (closed) closed_predict(r->n, &p, &r->cfg, &mem);
    bool may_migrate = closed && (r->space & SEARCH_MIGRATE) && mem.peak - cand_migrate_savable(r, 2) <= r->budget;
    if (closed && mem.peak > r->budget && !may_migrate && !cand_may_be_least(c, mem.peak)) {
        plan_free(&p);
    } else {
        int rc = pipeline_lower_lean(&s, r->n, &p, &r->cfg, &e);
        plan_free(&p);
        if (rc) return -1;
        sim_replay(&s, &mem, NULL);
        us = sim_time_us(r->n, &s, r->dev, NULL);
        sched_free(&s);
    }
    search_result *o = c->out;
    if (o->n_pts == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 256;
        o->pts = err_realloc(o->pts, (size_t)c->cap * sizeof *o->pts);
    }
    int at = o->n_pts++;
    /* what encodings could save at the peak at most: every kept activation and boundary there */
    int64_t savable = mem.at_peak[MEM_ACT] + mem.at_peak[MEM_BOUNDARY];
    o->pts[at] = (search_point){.text = err_strdup(full), .peak = mem.peak, .footprint = mem.peak, .time_us = us, .source = source,
                                .floor = mem.peak - savable, .fwd_peak = isnan(us) ? 0 : mem.fwd_peak, .staged = staged,
                                .levels = levels};
    *slot_of(c, full) = at;
    if (!isnan(us) && (cand_may_be_least(c, mem.peak) || (r->place_all && mem.peak <= r->budget))) cand_place(c, at);
    return at;
}

int cand_eval(search_ctx *c, const char *text, const char *source) { return cand_eval_bn(c, text, c->r->bn, source); }
