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

const char *const cand_bn_modes[N_BN_MODES] = {[BN_OFFLOAD] = "train-offload", [BN_REBUILD] = "train-rebuild",
                                                [BN_PASSES] = "train-recompute"};

const char *cand_base_text(const char *text, char *buf, size_t len)
{
    const char *bn = strstr(text, " bn=");
    snprintf(buf, len, "%.*s", bn ? (int)(bn - text) : (int)strlen(text), text);
    return bn ? bn + 4 : NULL;
}

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

/* What evaluating a full text tells, none of it depending on the search so far. */
typedef struct cand_judged {
    char *text;    /* the full text (the ahead table's key; NULL: a free slot) */
    bool ok;       /* a plan for this net, and it lowered where it was lowered */
    bool staged;   /* a row segment gathers BatchNorm statistics in stages */
    int levels;    /* then: the most levels in one row segment */
    bool lowered;  /* lowered, replayed and timed (mem the replay's); else mem is the closed form's */
    sim_mem mem;
    double us;     /* the device's model; NAN where not lowered */
} cand_judged;

/* Below what no encoding takes a plan of memory m: its peak less what encodings could save there at
 * most, every kept activation and boundary. */
static int64_t floor_of(const sim_mem *m) { return m->peak - m->at_peak[MEM_ACT] - m->at_peak[MEM_BOUNDARY]; }

/* The plan's schedule lowered, replayed and timed into j (j->ok false if it does not lower). */
static void judge_lower(const search_req *r, const sim_device *d, const plan *p, cand_judged *j)
{
    sched s;
    err e;
    if (pipeline_lower_lean(&s, r->n, p, &r->cfg, &e)) {
        j->ok = false;
        return;
    }
    sim_replay(&s, &j->mem, NULL);
    j->us = sim_time_us(r->n, &s, d, NULL);
    j->lowered = true;
    sched_free(&s);
}

/* `full` judged on device d (r->dev, or a thread's view of it): the closed form where the plan has
 * one; lowered, replayed and timed unless that closed peak is over the budget and no migration could
 * bring it under (whether such a plan is lowered after all, as one that may keep least, depends on
 * the search: cand_eval_bn decides it). */
static void judge(const search_req *r, const sim_device *d, const char *full, cand_judged *j)
{
    plan p;
    err e;
    *j = (cand_judged){.us = NAN};
    if (plan_parse(&p, r->n, full, &e)) return;
    j->ok = true;
    for (int k = 0; k < p.n_seg; k++) {
        j->staged |= p.segs[k].passes.staged;
        if (p.segs[k].passes.staged && p.segs[k].passes.n_fwd > j->levels) j->levels = p.segs[k].passes.n_fwd;
    }
    bool closed = !plan_modified(&p);
    if (closed) closed_predict(r->n, &p, &r->cfg, &j->mem);
    bool may_migrate = closed && (r->space & SEARCH_MIGRATE) && j->mem.peak - cand_migrate_savable(r, 2) <= r->budget;
    if (!closed || j->mem.peak <= r->budget || may_migrate) judge_lower(r, d, &p, j);
    plan_free(&p);
}

bool cand_full_text(const char *text, const char *bn, char *full)
{
    return (size_t)snprintf(full, PLAN_TEXT_LEN, "%s%s%s", text, bn ? " bn=" : "", bn ? bn : "") < PLAN_TEXT_LEN;
}

/* The ahead table's slot of `full`: its entry, or the free slot where it would go (c->cap_ahead > 0). */
static cand_judged *ahead_slot(const search_ctx *c, const char *full)
{
    for (uint64_t k = text_hash(full);; k++) {
        cand_judged *j = &c->ahead[k & (uint64_t)(c->cap_ahead - 1)];
        if (!j->text || !strcmp(j->text, full)) return j;
    }
}

/* Lowers, replays and times `text` with BatchNorm mode `bn` (NULL: the default), once (a text seen
 * before returns its index; one judged ahead, cand_ahead, takes that judgement). A plan without
 * encodings or migration whose closed-form peak (equal to the replay: tests/test_closed.c) is over
 * the budget is not lowered (no schedule), unless migration could bring it under (the migration
 * pass orders candidates by time). Its arena waits for settle(), which plans it only for the plans
 * that may answer, except when nothing fits (the arena of every plan that may be the smallest
 * footprint) or r->place_all. Returns the index of its point; -1 if it is not a plan for this net. */
int cand_eval_bn(search_ctx *c, const char *text, const char *bn, const char *source)
{
    const search_req *r = c->r;
    char full[PLAN_TEXT_LEN];
    if (!cand_full_text(text, bn, full)) return -1;
    int *slot = slot_of(c, full);
    if (*slot >= 0) {
        int i = *slot;
        if (!c->out->pts[i].placed && cand_may_be_least(c, c->out->pts[i].peak)) cand_place(c, i);
        return i;
    }
    cand_judged j, *a = c->cap_ahead ? ahead_slot(c, full) : NULL;
    if (a && a->text) j = *a;
    else judge(r, r->dev, full, &j);
    if (j.ok && !j.lowered && cand_may_be_least(c, j.mem.peak)) { /* over the budget, but it may keep least */
        plan p;
        err e;
        if (plan_parse(&p, r->n, full, &e)) return -1;
        judge_lower(r, r->dev, &p, &j);
        plan_free(&p);
    }
    if (!j.ok) return -1;
    search_result *o = c->out;
    if (o->n_pts == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 256;
        o->pts = err_realloc(o->pts, (size_t)c->cap * sizeof *o->pts);
    }
    int at = o->n_pts++;
    o->pts[at] = (search_point){.text = err_strdup(full), .peak = j.mem.peak, .footprint = j.mem.peak, .time_us = j.us,
                                .source = source, .floor = floor_of(&j.mem), .fwd_peak = j.lowered ? j.mem.fwd_peak : 0,
                                .staged = j.staged, .levels = j.levels};
    slot = slot_of(c, full);
    *slot = at;
    if (j.lowered && (cand_may_be_least(c, j.mem.peak) || (r->place_all && j.mem.peak <= r->budget))) cand_place(c, at);
    return at;
}

void cand_ahead(search_ctx *c, char *const *full, int n)
{
    const search_req *r = c->r;
    if (r->threads < 2 || n < 2) return;
    if (2 * (c->n_ahead + n) > c->cap_ahead) { /* grow, and put every entry back */
        cand_judged *was = c->ahead;
        int cap = c->cap_ahead;
        while (2 * (c->n_ahead + n) > c->cap_ahead) c->cap_ahead = c->cap_ahead ? 2 * c->cap_ahead : 1024;
        c->ahead = err_calloc((size_t)c->cap_ahead, sizeof *c->ahead);
        for (int k = 0; k < cap; k++)
            if (was[k].text) *ahead_slot(c, was[k].text) = was[k];
        free(was);
    }
    cand_judged **todo = err_calloc((size_t)n, sizeof *todo);
    int m = 0;
    for (int i = 0; i < n; i++) { /* new texts only, each once: their slots claimed now */
        cand_judged *a = ahead_slot(c, full[i]);
        if (a->text || *slot_of(c, full[i]) >= 0) continue;
        a->text = err_strdup(full[i]), todo[m++] = a, c->n_ahead++;
    }
#pragma omp parallel num_threads(r->threads) if (m > 1)
    {
        sim_device dev = *r->dev; /* the time model's memo is a thread's own */
        timing_model view;
        if (dev.model) view = timing_share(dev.model), dev.model = &view;
#pragma omp for schedule(dynamic)
        for (int i = 0; i < m; i++) {
            cand_judged got;
            judge(r, &dev, todo[i]->text, &got);
            got.text = todo[i]->text, *todo[i] = got; /* the key stays */
        }
        if (dev.model) timing_unshare(&view);
    }
    free(todo);
}

bool cand_ahead_peek(const search_ctx *c, const char *text, const char *bn, cand_peek *pk)
{
    char full[PLAN_TEXT_LEN];
    const cand_judged *j = c->cap_ahead && cand_full_text(text, bn, full) ? ahead_slot(c, full) : NULL;
    if (!j || !j->text || !j->ok) return false;
    *pk = (cand_peek){j->mem.peak, floor_of(&j->mem), j->staged};
    return true;
}

void cand_ahead_free(search_ctx *c)
{
    for (int k = 0; k < c->cap_ahead; k++) free(c->ahead[k].text);
    free(c->ahead);
    c->ahead = NULL, c->n_ahead = c->cap_ahead = 0;
}

int cand_eval(search_ctx *c, const char *text, const char *source) { return cand_eval_bn(c, text, c->r->bn, source); }
