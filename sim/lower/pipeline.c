/* pipeline: see pipeline.h. */
#include "sim/lower/pipeline.h"

#include <stdlib.h>
#include <string.h>

#include "sim/lower/liveness.h"
#include "sim/lower/migrate.h"
#include "sim/lower/rows.h"
#include "sim/lower/segment.h"
#include "sim/lower/stash.h"

static int lower_plan(sched *s, const net *n, const plan *p, const sched_cfg *cfg, bool lean, err *e)
{
    memset(s, 0, sizeof *s);
    if (cfg->batch < 1) return err_set(e, "batch must be at least 1 (got %d)", cfg->batch);
    s->batch = cfg->batch;
    lower c = {.s = s, .n = n, .p = p, .cfg = cfg};
    /* room for the steps and buffers of most plans, so that growing the lists seldom copies them:
     * they grow with the bands (ResNet-50 2ps:4: 1,465 steps before liveness and 1,356 buffers; 2ps:8:
     * 2,470 and 1,947); room never written costs nothing */
    int bands = 1;
    for (int i = 0; i < p->n_seg; i++) {
        const plan_seg *ps = &p->segs[i];
        int most = ps->fp > ps->bp ? ps->fp : ps->bp;
        if (ps->mode == PLAN_ROWS && most > bands) bands = most;
    }
    c.cap_step = (6 + 2 * bands) * n->n + 256, c.cap_buf = c.cap_step;
    s->steps = err_realloc(NULL, (size_t)c.cap_step * sizeof(sched_step));
    s->bufs = err_realloc(NULL, (size_t)c.cap_buf * sizeof(sched_buf));
    int **maps[] = {&c.act, &c.aux, &c.grad, &c.param, &c.pgrad, &c.wsum, &c.opt, &c.run, &c.stats, &c.sums, &c.whole};
    for (size_t m = 0; m < sizeof maps / sizeof *maps; m++) {
        *maps[m] = err_calloc((size_t)n->n, sizeof(int));
        memset(*maps[m], -1, (size_t)n->n * sizeof(int));
    }
    segment_persistent(&c);
    int **bound = err_calloc((size_t)p->n_seg, sizeof(int *)); /* 2PS boundaries, [segment][layer * R + band] */
    for (int i = 0; i < p->n_seg; i++)
        if (p->segs[i].mode == PLAN_ROWS) {
            bound[i] = err_calloc((size_t)n->n * p->segs[i].fp, sizeof(int));
            memset(bound[i], -1, (size_t)n->n * p->segs[i].fp * sizeof(int));
        }
    segment_load(&c);
    for (int i = 0; i < p->n_seg; i++) { /* forward */
        c.seg = i;
        if (p->segs[i].mode == PLAN_ROWS) rows_forward(&c, &p->segs[i], bound[i]);
        else segment_forward(&c, &p->segs[i]);
    }
    c.bwd_phase = true;
    for (int i = p->n_seg - 1; i >= 0; i--) { /* backward */
        c.seg = i;
        if (p->segs[i].mode == PLAN_ROWS) rows_backward(&c, &p->segs[i], bound[i]);
        else segment_backward(&c, &p->segs[i]);
    }
    if (p->migrate) migrate_updates(&c);
    else segment_update(&c);
    s->flops = sched_compute_flops(s);
    stash_mark_offloads(&c);
    int rc = stash_encode(&c, e);
    if (!rc) rc = stash_place_moves(&c, e);
    if (!rc) {
        if (p->migrate) migrate_place_moves(&c);
        liveness_place(s, lean);
    }
    for (int i = 0; i < p->n_seg; i++) free(bound[i]);
    free(bound);
    for (size_t m = 0; m < sizeof maps / sizeof *maps; m++) free(*maps[m]);
    if (rc) sched_free(s);
    return rc;
}

int pipeline_lower(sched *s, const net *n, const plan *p, const sched_cfg *cfg, err *e)
{
    return lower_plan(s, n, p, cfg, false, e);
}

int pipeline_lower_lean(sched *s, const net *n, const plan *p, const sched_cfg *cfg, err *e)
{
    return lower_plan(s, n, p, cfg, true, e);
}
