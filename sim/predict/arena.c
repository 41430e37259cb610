/* arena: see arena.h. */
#include "sim/predict/arena_side.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim/plan/enc.h"

const char *const arena_orders[ARENA_ORDERS + 1] = {"from the live peak outwards, late ends low", "from the live peak outwards, late ends high", "crowding, late ends low", "crowding, early starts low", "size x crowding",
                                                     "the best order, its blocks above the live peak first"};

static int open_block(blocks *bl, int t0, int64_t bytes, bool host, bool persistent)
{
    if (bl->n == bl->cap) {
        bl->cap = bl->cap * 2 + 256;
        bl->v = err_realloc(bl->v, (size_t)bl->cap * sizeof *bl->v), bl->ends = err_realloc(bl->ends, (size_t)bl->cap * sizeof(int));
    }
    int64_t size = (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    bl->v[bl->n] = (block){.size = size > 0 ? size : ARENA_ALIGN, .off = -1, .t0 = t0, .t1 = t0, .host = host, .persistent = persistent};
    return bl->n++;
}

bool arena_outside(const sched_buf *b) { return b->kind == BUF_ENC && enc_data_sized(b->enc); }

/* The blocks of s (arena.h), at[i] the block step i places (-1 none; at NULL: not wanted); outside
 * blocks are counted into *apart as the most device bytes they hold at once. The device side's live
 * peak comes from the same walk: at the step a device block opens, the bytes live are those opened
 * so far less those that ended at an earlier step (a block ending at this step is still live). */
static void find_blocks(const sched *s, blocks *bl, int64_t *at, int64_t *apart)
{
    int *issue = NULL, *cur = err_calloc((size_t)s->n_buf + 1, sizeof(int)); /* issue: at the first OFFLOAD */
    int *home = err_calloc((size_t)s->n_buf + 1, sizeof(int));
    for (int b = 0; b < s->n_buf; b++) cur[b] = home[b] = -1;
    int64_t out_now = 0, live = 0;
    int last_start = 0; /* the last start of a device block not persistent */
    *apart = 0;
    sched_events ev;
    sched_events_open(s, &ev);
    for (int k = 0; k < ev.n; k++) {
        const sched_event *t = &ev.ev[k];
        const sched_buf *sb = &s->bufs[t->buf];
        int b = t->buf, i = t->step;
        if (arena_outside(sb)) { /* its predicted bytes, apart */
            bool dev_in = t->op == SCHED_ALLOC || t->op == SCHED_PREFETCH, dev_out = t->op == SCHED_OFFLOAD || (t->op == SCHED_FREE && cur[b] >= 0);
            if (dev_in) out_now += sb->bytes, cur[b] = 0;
            if (dev_out) out_now -= sb->bytes, cur[b] = -1;
            if (out_now > *apart) *apart = out_now;
            continue;
        }
        int64_t ending = 0; /* the device bytes whose block ends here */
        if (cur[b] >= 0) { /* the block it leaves ends here */
            block *x = &bl->v[cur[b]];
            x->t1 = i, bl->ends[bl->n_ends++] = cur[b], cur[b] = -1, ending = x->host ? 0 : x->size;
        }
        int placed = -1;
        bool device = false;
        switch (t->op) {
        case SCHED_ALLOC:
            if (sb->host_home) placed = home[b] = open_block(bl, i, sb->bytes, true, true);
            else placed = cur[b] = open_block(bl, i, sb->bytes, false, sb->persistent), device = true;
            break;
        case SCHED_OFFLOAD:
            if (!issue) sched_move_issue(s, issue = err_calloc((size_t)s->n_step + 1, sizeof(int)));
            if (home[b] >= 0) placed = home[b];
            else placed = cur[b] = open_block(bl, issue[i] >= 0 && issue[i] < i ? issue[i] : i, sb->bytes, true, false);
            break;
        case SCHED_PREFETCH: placed = cur[b] = open_block(bl, i, sb->bytes, false, false), device = true; break;
        default: /* FREE */
            if (home[b] >= 0) bl->v[home[b]].t1 = i, bl->ends[bl->n_ends++] = home[b], home[b] = -1;
            break;
        }
        if (device) {
            live += bl->v[placed].size, last_start = bl->v[placed].persistent ? last_start : i;
            if (live > bl->dev.lower) bl->dev = (live_peak){live, i, last_start};
        }
        live -= ending;
        if (at) at[i] = placed;
    }
    bool *open = err_calloc((size_t)bl->n + 1, sizeof(bool)); /* never freed: to the end, in the order opened */
    for (int b = 0; b < s->n_buf; b++) {
        if (cur[b] >= 0) bl->v[cur[b]].t1 = s->n_step, open[cur[b]] = true;
        if (home[b] >= 0) bl->v[home[b]].t1 = s->n_step, open[home[b]] = true;
    }
    for (int k = 0; k < bl->n; k++) {
        if (open[k]) bl->ends[bl->n_ends++] = k;
        bl->n_host += bl->v[k].host;
    }
    free(issue), free(cur), free(home), free(open), sched_events_close(&ev);
}

/* Free byte ranges below a top, as an allocator keeps them. */
typedef struct {
    int64_t *r; /* lo, hi pairs in order, all below top */
    int n, cap;
    int64_t top, most; /* the top; the highest it reached */
} holes;

/* The holes are few (2 or 3 on a row plan as a block comes and goes), so they move by a loop, not a
 * call to memmove. */
static void holes_drop(holes *f, int k)
{
    for (int j = 2 * k, z = 2 * --f->n; j < z; j++) f->r[j] = f->r[j + 2];
}

/* An offset for `bytes`: the low end of the smallest hole that holds them (best fit), else the top. */
static int64_t holes_take(holes *f, int64_t bytes)
{
    int h = -1;
    for (int k = 0; k < f->n; k++) {
        int64_t gap = f->r[2 * k + 1] - f->r[2 * k];
        if (gap >= bytes && (h < 0 || gap < f->r[2 * h + 1] - f->r[2 * h])) h = k;
    }
    if (h < 0) {
        int64_t off = f->top;
        f->top += bytes;
        if (f->top > f->most) f->most = f->top;
        return off;
    }
    int64_t off = f->r[2 * h];
    if ((f->r[2 * h] += bytes) == f->r[2 * h + 1]) holes_drop(f, h);
    return off;
}

/* [lo, hi) free again: merged with the holes beside it, and with the top. */
static void holes_give(holes *f, int64_t lo, int64_t hi)
{
    int k = 0;
    while (k < f->n && f->r[2 * k] < lo) k++;
    bool left = k > 0 && f->r[2 * k - 1] == lo, right = k < f->n && f->r[2 * k] == hi;
    if (left && right) {
        f->r[2 * k - 1] = f->r[2 * k + 1];
        holes_drop(f, k--);
    } else if (left) {
        f->r[2 * --k + 1] = hi;
    } else if (right) {
        f->r[2 * k] = lo;
    } else {
        if (f->n == f->cap) f->r = err_realloc(f->r, (size_t)(f->cap = f->cap * 2 + 16) * 2 * sizeof(int64_t));
        for (int j = 2 * f->n++ - 1; j >= 2 * k; j--) f->r[j + 2] = f->r[j];
        f->r[2 * k] = lo, f->r[2 * k + 1] = hi;
    }
    if (f->r[2 * k + 1] == f->top) f->top = f->r[2 * k], holes_drop(f, k); /* the topmost hole: the top comes down */
}

/* From the live peak outwards: the blocks live at the peak (renumbered step cp) stacked from the
 * base, latest end lowest (or, `high`, highest: then the space they leave opens at the bottom);
 * then two allocator's passes, one over the steps after the peak in time order (a block takes a
 * hole, best fit, when it begins and gives it back when it ends) and one over the steps before it
 * in reverse (a block takes a hole when it ends, gives it back when it begins). The passes never
 * meet: a block is in one of them or in the stack. Each costs a walk over the starts and ends in
 * time (at one step the starts first: a block ending there is still live) with a short list of
 * holes, where the best-fit orders cost a search of the blocks placed per block; on most schedules
 * it meets the live peak. Returns the size. */
static int64_t place_peak(side *sd, int cp, bool high)
{
    int n = sd->n;
    const int64_t *size = sd->size;
    int64_t *off = sd->off, top = sd->base;
    for (int j = 0; j < n; j++) { /* the peak's blocks, by end */
        int p = sd->by_end[high ? j : n - 1 - j];
        if (sd->c0[p] <= cp && cp <= sd->c1[p]) off[p] = top, top += size[p];
    }
    int64_t most = top;
    for (int back = 0; back < 2; back++) {
        holes f = {.top = top, .most = top};
        /* forward: begin by start, end by end; backward: the reverse of both, roles swapped, and
         * the times negated so that both walks go up */
        const int *begin = back ? sd->by_end : sd->by_start, *end = back ? sd->by_start : sd->by_end;
        const int *tb = back ? sd->end_at : sd->start_at, *te = back ? sd->start_at : sd->end_at;
        int step = back ? -1 : 1, sign = back ? -1 : 1, q = back ? n - 1 : 0, r = q;
        while (q >= 0 && q < n && sign * tb[q] <= sign * cp) q += step; /* in the stack or the other pass */
        while (r >= 0 && r < n && sign * te[r] < sign * cp) r += step;
        for (;;) {
            bool more_b = q >= 0 && q < n, more_e = r >= 0 && r < n;
            if (more_b && (!more_e || sign * tb[q] <= sign * te[r])) {
                int p = begin[q];
                off[p] = holes_take(&f, size[p]), q += step;
            } else if (more_e) {
                int p = end[r];
                holes_give(&f, off[p], off[p] + size[p]), r += step;
            } else {
                break;
            }
        }
        most = f.most > most ? f.most : most;
        free(f.r);
    }
    return most;
}

/* The side's blocks (persistent ones too) in order of start, ties in the order opened: the order
 * opened where that is it (every device block starts at the step that opens it), else a counting
 * sort over the steps (a host block starts where its copy may begin). Returns how many. */
static int side_starts(const blocks *bl, bool host, int n_step, int *out)
{
    int m = 0, last = -1;
    bool sorted = true;
    for (int k = 0; k < bl->n; k++)
        if (bl->v[k].host == host) out[m++] = k, sorted &= bl->v[k].t0 >= last, last = bl->v[k].t0;
    if (sorted) return m;
    int *at = err_calloc((size_t)n_step + 3, sizeof(int)), *tmp = err_calloc((size_t)m + 1, sizeof(int));
    for (int j = 0; j < m; j++) at[bl->v[out[j]].t0 + 1]++;
    for (int t = 0; t <= n_step; t++) at[t + 1] += at[t];
    for (int j = 0; j < m; j++) tmp[at[bl->v[out[j]].t0]++] = out[j];
    memcpy(out, tmp, (size_t)m * sizeof(int));
    free(at), free(tmp);
    return m;
}

/* The side's blocks: persistent ones packed from 0, the rest by position, in order of start and of
 * end; the live peak: the device side's as find_blocks measured it, the host side's from a walk over
 * the starts and ends of all its blocks (the bytes live rise only where a block starts: the first
 * start where they are highest is the peak). */
static void side_open(side *sd, blocks *bl, bool host, int n_step)
{
    int m = bl->n + 1;
    *sd = (side){.bl = bl, .idx = err_realloc(NULL, (size_t)m * 8 * sizeof(int)), .size = err_realloc(NULL, (size_t)m * 2 * sizeof(int64_t))};
    sd->c0 = sd->idx + m, sd->c1 = sd->c0 + m, sd->by_start = sd->c1 + m, sd->by_end = sd->by_start + m;
    sd->start_at = sd->by_end + m, sd->end_at = sd->start_at + m, sd->off = sd->size + m;
    int *pos = sd->end_at + m; /* each block's position, -1 none */
    for (int k = 0; k < bl->n; k++) { /* by position; the device side's blocks open in order of start */
        block *b = &bl->v[k];
        pos[k] = -1;
        if (b->host != host) continue;
        if (b->persistent) { /* live throughout: below the rest */
            b->off = sd->base, sd->base += b->size;
            continue;
        }
        int p = pos[k] = sd->n++;
        sd->idx[p] = k, sd->size[p] = b->size, sd->c0[p] = sd->start_at[p] = b->t0, sd->c1[p] = b->t1, sd->by_start[p] = p;
    }
    for (int q = 0, j = 0; q < bl->n_ends; q++)
        if (pos[bl->ends[q]] >= 0) sd->by_end[j] = pos[bl->ends[q]], sd->end_at[j++] = bl->v[bl->ends[q]].t1;
    if (!host) {
        sd->live = bl->dev;
        return;
    }
    int *starts = err_realloc(NULL, (size_t)m * sizeof(int));
    int n_starts = side_starts(bl, host, n_step, starts);
    for (int q = 0, i = 0; q < n_starts; q++)
        if (pos[starts[q]] >= 0) sd->by_start[i] = pos[starts[q]], sd->start_at[i++] = bl->v[starts[q]].t0;
    int64_t live = 0;
    for (int q = 0, r = 0; q < n_starts;) {
        int t = bl->v[starts[q]].t0;
        for (; r < bl->n_ends && bl->v[bl->ends[r]].t1 < t; r++)
            if (bl->v[bl->ends[r]].host == host) live -= bl->v[bl->ends[r]].size;
        for (; q < n_starts && bl->v[starts[q]].t0 == t; q++) live += bl->v[starts[q]].size;
        if (live > sd->live.lower) sd->live.lower = live, sd->live.peak = t;
    }
    for (int p = 0; p < sd->n; p++) /* the last start at or before the peak */
        sd->live.cp = sd->c0[p] <= sd->live.peak && sd->c0[p] > sd->live.cp ? sd->c0[p] : sd->live.cp;
    free(starts);
}

static void side_close(side *sd) { free(sd->idx), free(sd->size); }

/* Places one side's blocks (arena.h): the walk from the live peak both ways, then where it misses
 * the live peak the best-fit orders and the repair, the smallest arena kept; returns the arena's size
 * and the winning order's name in *how. */
static int64_t place(blocks *bl, bool host, int n_step, const char **how, int64_t *lower_out)
{
    *how = arena_orders[0], *lower_out = 0;
    if ((host ? bl->n_host : bl->n - bl->n_host) == 0) return 0; /* a side without blocks (most plans' host) */
    side sd;
    side_open(&sd, bl, host, n_step);
    int64_t lower = sd.live.lower;
    found best = {sd.n ? -1 : sd.base, arena_orders[0], err_calloc((size_t)sd.n + 1, sizeof(int64_t))};
    if (sd.n) {
        keep_smaller(&sd, &best, place_peak(&sd, sd.live.cp, false), arena_orders[0]);
        if (best.size > lower) keep_smaller(&sd, &best, place_peak(&sd, sd.live.cp, true), arena_orders[1]);
    }
    if (best.size > lower) {
        found fit = {-1, NULL, err_calloc((size_t)sd.n + 1, sizeof(int64_t))};
        arena_place_best_fit(&sd, host, n_step, lower, &fit);
        if (fit.size < best.size) best.size = fit.size, best.how = fit.how, memcpy(best.off, fit.off, (size_t)sd.n * sizeof(int64_t));
        free(fit.off);
    }
    for (int p = 0; p < sd.n; p++) bl->v[sd.idx[p]].off = best.off[p];
    free(best.off);
    side_close(&sd);
    *lower_out = lower, *how = best.how;
    return best.size;
}

static void arena_build(const sched *s, arena *a, bool offsets)
{
    memset(a, 0, sizeof *a);
    a->n_step = s->n_step;
    if (offsets) {
        a->at = err_realloc(NULL, ((size_t)s->n_step + 1) * sizeof(int64_t));
        memset(a->at, -1, ((size_t)s->n_step + 1) * sizeof(int64_t));
    }
    blocks bl = {0};
    find_blocks(s, &bl, a->at, &a->apart);
    a->n_blocks = bl.n;
    a->size = place(&bl, false, s->n_step, &a->how, &a->live);
    a->host_size = place(&bl, true, s->n_step, &a->host_how, &a->host_live);
    if (offsets)
        for (int i = 0; i < s->n_step; i++)
            if (a->at[i] >= 0) a->at[i] = bl.v[a->at[i]].off;
    a->blocks = bl.v;
    free(bl.ends);
}

void arena_plan(const sched *s, arena *a) { arena_build(s, a, true); }

void arena_measure(const sched *s, arena *a) { arena_build(s, a, false); }

void arena_free(arena *a)
{
    free(a->at), free(a->blocks);
    memset(a, 0, sizeof *a);
}
