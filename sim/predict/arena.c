/* arena: see arena.h. */
#include "sim/predict/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim/plan/enc.h"

typedef arena_block block;

/* The blocks, in the order of the steps that open them, and their indices in the order they end
 * (ties, the blocks never freed, in the order opened). */
typedef struct {
    block *v;
    int n, cap;
    int *ends, n_ends;
} blocks;

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
 * blocks are counted into *apart as the most device bytes they hold at once. */
static void find_blocks(const sched *s, blocks *bl, int64_t *at, int64_t *apart)
{
    int *issue = NULL, *cur = err_calloc((size_t)s->n_buf + 1, sizeof(int)); /* issue: at the first OFFLOAD */
    int *home = err_calloc((size_t)s->n_buf + 1, sizeof(int));
    for (int b = 0; b < s->n_buf; b++) cur[b] = home[b] = -1;
    int64_t out_now = 0;
    *apart = 0;
    for (int i = 0; i < s->n_step; i++) {
        const sched_step *t = &s->steps[i];
        if (t->op != SCHED_ALLOC && t->op != SCHED_FREE && t->op != SCHED_OFFLOAD && t->op != SCHED_PREFETCH) continue;
        const sched_buf *sb = &s->bufs[t->buf];
        int b = t->buf;
        if (arena_outside(sb)) { /* its predicted bytes, apart */
            bool dev_in = t->op == SCHED_ALLOC || t->op == SCHED_PREFETCH, dev_out = t->op == SCHED_OFFLOAD || (t->op == SCHED_FREE && cur[b] >= 0);
            if (dev_in) out_now += sb->bytes, cur[b] = 0;
            if (dev_out) out_now -= sb->bytes, cur[b] = -1;
            if (out_now > *apart) *apart = out_now;
            continue;
        }
        if (cur[b] >= 0) bl->v[cur[b]].t1 = i, bl->ends[bl->n_ends++] = cur[b], cur[b] = -1; /* the block it leaves ends here */
        int placed = -1;
        switch (t->op) {
        case SCHED_ALLOC:
            if (sb->host_home) placed = home[b] = open_block(bl, i, sb->bytes, true, true);
            else placed = cur[b] = open_block(bl, i, sb->bytes, false, sb->persistent);
            break;
        case SCHED_OFFLOAD:
            if (!issue) sched_move_issue(s, issue = err_calloc((size_t)s->n_step + 1, sizeof(int)));
            if (home[b] >= 0) placed = home[b];
            else placed = cur[b] = open_block(bl, issue[i] >= 0 && issue[i] < i ? issue[i] : i, sb->bytes, true, false);
            break;
        case SCHED_PREFETCH: placed = cur[b] = open_block(bl, i, sb->bytes, false, false); break;
        default: /* FREE */
            if (home[b] >= 0) bl->v[home[b]].t1 = i, bl->ends[bl->n_ends++] = home[b], home[b] = -1;
            break;
        }
        if (at) at[i] = placed;
    }
    bool *open = err_calloc((size_t)bl->n + 1, sizeof(bool)); /* never freed: to the end, in the order opened */
    for (int b = 0; b < s->n_buf; b++) {
        if (cur[b] >= 0) bl->v[cur[b]].t1 = s->n_step, open[cur[b]] = true;
        if (home[b] >= 0) bl->v[home[b]].t1 = s->n_step, open[home[b]] = true;
    }
    for (int k = 0; k < bl->n; k++)
        if (open[k]) bl->ends[bl->n_ends++] = k;
    free(issue), free(cur), free(home), free(open);
}

typedef struct placed placed;

/* One side's blocks being placed, by position: their indices in bl, sizes, and the offsets of the
 * placement being made (written back to bl once the best is chosen); their lifetimes [c0, c1] in
 * steps, and their positions in order of start and of end with those steps beside them in that
 * order (a walk over them reads the times in sequence); the live peak. The best-fit orders renumber
 * the lifetimes onto the steps where some block starts or ends (crowding: the overlaps stay, n_time
 * counts them) and keep the blocks placed in order (placed). */
typedef struct {
    blocks *bl;
    int n, n_time;
    int *idx, *c0, *c1;
    int64_t *size, *off;
    int *by_start, *by_end, *start_at, *end_at;
    int64_t base;  /* bytes of the persistent blocks packed at the bottom */
    int64_t lower; /* the live peak, the arena's lower bound: first at step peak */
    int peak;
    placed *pl;
} side;

/* The blocks placed so far, two ways: in order of offset (their byte ranges and renumbered
 * lifetimes, in chunks of up to ARENA_CHUNK, so that a block goes in by a short move), and by time, the renumbered
 * steps in buckets of ARENA_BUCKET, each listing the placed blocks (positions) whose lifetimes
 * reach into it. A lifetime's overlapping blocks are among those its buckets list: where those
 * lists are short (on ResNet-50's vdnn-all 2% of the blocks placed overlap a lifetime) they are
 * read and sorted; where they are long (DenseNet's maps live long) the blocks in order of offset. */
enum { ARENA_BUCKET = 16, ARENA_CHUNK = 64 };

typedef struct {
    int n;
    int c0[ARENA_CHUNK], c1[ARENA_CHUNK];
    int64_t lo[ARENA_CHUNK], hi[ARENA_CHUNK];
} chunk;

struct placed {
    chunk *pool; /* the chunks, in the order made */
    int *ord;    /* their order of offset: pool[ord[0]], pool[ord[1]], ...; none empty but a lone first */
    int n_ch, n;
    int n_bucket;
    int **list, *len, *cap;
    int *seen, stamp; /* per position: the query that last met it */
    int64_t *r, *tmp; /* a query's overlapping ranges: lo, hi pairs; room to sort them */
};

static void placed_open(placed *pl, int n, int n_time)
{
    int most = 2 * n / ARENA_CHUNK + 2; /* chunks after a split are half full at least */
    pl->pool = err_calloc((size_t)most, sizeof(chunk)), pl->ord = err_calloc((size_t)most, sizeof(int));
    pl->n_bucket = n_time / ARENA_BUCKET + 1;
    pl->list = err_calloc((size_t)pl->n_bucket, sizeof(int *));
    pl->len = err_calloc((size_t)pl->n_bucket, sizeof(int)), pl->cap = err_calloc((size_t)pl->n_bucket, sizeof(int));
    pl->seen = err_calloc((size_t)n + 1, sizeof(int)), pl->stamp = 0;
    pl->r = err_calloc((size_t)2 * n + 2, sizeof(int64_t)), pl->tmp = err_calloc((size_t)2 * n + 2, sizeof(int64_t));
}

static void placed_close(placed *pl)
{
    for (int k = 0; k < pl->n_bucket; k++) free(pl->list[k]);
    free(pl->pool), free(pl->ord);
    free(pl->list), free(pl->len), free(pl->cap), free(pl->seen), free(pl->r), free(pl->tmp);
}

static void placed_clear(placed *pl)
{
    pl->n = 0, pl->n_ch = 1, pl->ord[0] = 0, pl->pool[0].n = 0;
    for (int k = 0; k < pl->n_bucket; k++) pl->len[k] = 0;
}

static void placed_add(placed *pl, int p, int64_t lo, int64_t hi, int c0, int c1)
{
    int c = 0, z = pl->n_ch - 1; /* the first chunk ending above lo, or the last */
    while (c < z) {
        int m = (c + z) / 2;
        const chunk *k = &pl->pool[pl->ord[m]];
        if (k->lo[k->n - 1] <= lo) c = m + 1;
        else z = m;
    }
    if (pl->pool[pl->ord[c]].n == ARENA_CHUNK) { /* full: its upper half to a new chunk after it */
        memmove(pl->ord + c + 2, pl->ord + c + 1, (size_t)(pl->n_ch - c - 1) * sizeof(int));
        pl->ord[c + 1] = pl->n_ch++;
        chunk *a = &pl->pool[pl->ord[c]], *b = &pl->pool[pl->ord[c + 1]];
        int h = ARENA_CHUNK / 2;
        b->n = ARENA_CHUNK - h, a->n = h;
        memcpy(b->c0, a->c0 + h, (size_t)b->n * sizeof(int)), memcpy(b->c1, a->c1 + h, (size_t)b->n * sizeof(int));
        memcpy(b->lo, a->lo + h, (size_t)b->n * sizeof(int64_t)), memcpy(b->hi, a->hi + h, (size_t)b->n * sizeof(int64_t));
        if (a->lo[h - 1] <= lo) c++;
    }
    chunk *k = &pl->pool[pl->ord[c]];
    int j = k->n; /* after every block starting at or below lo */
    for (; j > 0 && k->lo[j - 1] > lo; j--) k->c0[j] = k->c0[j - 1], k->c1[j] = k->c1[j - 1], k->lo[j] = k->lo[j - 1], k->hi[j] = k->hi[j - 1];
    k->c0[j] = c0, k->c1[j] = c1, k->lo[j] = lo, k->hi[j] = hi, k->n++;
    pl->n++;
    for (int t = c0 / ARENA_BUCKET; t <= c1 / ARENA_BUCKET; t++) {
        if (pl->len[t] == pl->cap[t]) pl->list[t] = err_realloc(pl->list[t], (size_t)(pl->cap[t] = pl->cap[t] * 2 + 16) * sizeof(int));
        pl->list[t][pl->len[t]++] = p;
    }
}

/* Ranges r[0..m) (lo, hi pairs) in order of lo: a merge sort through tmp, insertion below 16. */
static void sort_ranges(int64_t *r, int64_t *tmp, int m)
{
    if (m <= 16) {
        for (int i = 1; i < m; i++) {
            int64_t lo = r[2 * i], hi = r[2 * i + 1];
            int j = i;
            for (; j > 0 && r[2 * j - 2] > lo; j--) r[2 * j] = r[2 * j - 2], r[2 * j + 1] = r[2 * j - 1];
            r[2 * j] = lo, r[2 * j + 1] = hi;
        }
        return;
    }
    int h = m / 2;
    sort_ranges(r, tmp, h), sort_ranges(r + 2 * h, tmp, m - h);
    int i = 0, j = h, o = 0;
    while (i < h && j < m) {
        int from = r[2 * j] < r[2 * i] ? j++ : i++;
        tmp[2 * o] = r[2 * from], tmp[2 * o + 1] = r[2 * from + 1], o++;
    }
    while (i < h) tmp[2 * o] = r[2 * i], tmp[2 * o + 1] = r[2 * i + 1], o++, i++;
    memcpy(r, tmp, (size_t)o * 2 * sizeof(int64_t)); /* the rest of the right half is in place */
}

/* A best-fit search over byte ranges taken in order of offset, from `end` up: the smallest gap of
 * at least `size` (the lowest of equal ones) so far in best (-1: none yet). A range past all
 * before it opens a gap; one that touches or overlaps them only moves the end up (so ranges that
 * start together may come in either order). */
typedef struct {
    int64_t size, end, best, best_gap;
} fit_scan;

static inline void fit_range(fit_scan *f, int64_t lo, int64_t hi)
{
    int64_t gap = lo - f->end;
    if (gap >= f->size && gap < f->best_gap) f->best = f->end, f->best_gap = gap;
    if (hi > f->end) f->end = hi;
}

/* The offset of the smallest gap of at least `size` bytes between the placed blocks that overlap
 * [c0, c1] in time (best fit), or, with none, the offset above them all; from the base up. */
static int64_t best_fit(const side *sd, int c0, int c1, int64_t size)
{
    placed *pl = sd->pl;
    fit_scan f = {size, sd->base, -1, INT64_MAX};
    int listed = 0;
    for (int k = c0 / ARENA_BUCKET; k <= c1 / ARENA_BUCKET; k++) listed += pl->len[k];
    if (8 * listed > pl->n) { /* many placed blocks listed: all of them, in order of offset */
        for (int c = 0; c < pl->n_ch; c++) {
            const chunk *k = &pl->pool[pl->ord[c]];
            for (int j = 0; j < k->n; j++)
                if (k->c1[j] >= c0 && k->c0[j] <= c1) fit_range(&f, k->lo[j], k->hi[j]);
        }
        return f.best >= 0 ? f.best : f.end;
    }
    int m = 0, stamp = ++pl->stamp;
    for (int k = c0 / ARENA_BUCKET; k <= c1 / ARENA_BUCKET; k++)
        for (int i = 0; i < pl->len[k]; i++) {
            int p = pl->list[k][i];
            if (pl->seen[p] == stamp || sd->c1[p] < c0 || sd->c0[p] > c1) continue;
            pl->seen[p] = stamp;
            pl->r[2 * m] = sd->off[p], pl->r[2 * m + 1] = sd->off[p] + sd->size[p], m++;
        }
    sort_ranges(pl->r, pl->tmp, m);
    for (int j = 0; j < m; j++) fit_range(&f, pl->r[2 * j], pl->r[2 * j + 1]);
    return f.best >= 0 ? f.best : f.end;
}

static int64_t place_in_order(side *sd, const int *order, int64_t limit)
{
    int64_t size = sd->base;
    placed_clear(sd->pl);
    for (int q = 0; q < sd->n; q++) {
        int p = order[q];
        int64_t off = sd->off[p] = best_fit(sd, sd->c0[p], sd->c1[p], sd->size[p]), end = off + sd->size[p];
        if (end > size) size = end;
        if (limit >= 0 && size >= limit) break;
        placed_add(sd->pl, p, off, end, sd->c0[p], sd->c1[p]);
    }
    return size;
}

/* Free byte ranges below a top, as an allocator keeps them. */
typedef struct {
    int64_t *r; /* lo, hi pairs in order, all below top */
    int n, cap;
    int64_t top, most; /* the top; the highest it reached */
} holes;

static void holes_drop(holes *f, int k) { memmove(f->r + 2 * k, f->r + 2 * k + 2, (size_t)(--f->n - k) * 2 * sizeof(int64_t)); }

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
        memmove(f->r + 2 * k + 2, f->r + 2 * k, (size_t)(f->n++ - k) * 2 * sizeof(int64_t));
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

/* An order of placement: by key1, then key2, both descending (then by position). */
typedef struct {
    double key1;
    int64_t key2;
    int p;
} rank;

static bool ranks_before(const rank *a, const rank *b)
{
    if (a->key1 != b->key1) return a->key1 > b->key1;
    if (a->key2 != b->key2) return a->key2 > b->key2;
    return a->p < b->p;
}

/* r[0..n) in order (a merge sort through tmp; the comparison inline, where qsort's call through a
 * pointer cost a tenth of a VGG-16 overl:8 evaluation). */
static void sort_ranks(rank *r, rank *tmp, int n)
{
    if (n < 2) return;
    if (n <= 16) {
        for (int i = 1; i < n; i++) {
            rank x = r[i];
            int j = i;
            for (; j > 0 && ranks_before(&x, &r[j - 1]); j--) r[j] = r[j - 1];
            r[j] = x;
        }
        return;
    }
    int h = n / 2;
    sort_ranks(r, tmp, h), sort_ranks(r + h, tmp, n - h);
    int i = 0, j = h, o = 0;
    while (i < h && j < n) tmp[o++] = ranks_before(&r[j], &r[i]) ? r[j++] : r[i++];
    while (i < h) tmp[o++] = r[i++];
    memcpy(r, tmp, (size_t)o * sizeof *r); /* the rest of the right half is in place */
}

/* The lifetimes renumbered onto the steps where a block of the side starts or ends (persistent
 * ones too: n_time of them), and crowd[p], the most bytes live at one of those steps in block p's
 * lifetime (by chunks of 64 steps' maxima for long lifetimes). Between those steps no more is live
 * than at the last of them, so these are the maxima over all the schedule's steps too. */
static void crowding(side *sd, bool host, int n_step, int64_t *crowd)
{
    const blocks *bl = sd->bl;
    int *rank = err_calloc((size_t)n_step + 2, sizeof(int)), u = 0; /* 1 where a block starts or ends, then their number */
    for (int k = 0; k < bl->n; k++)
        if (bl->v[k].host == host) rank[bl->v[k].t0] = rank[bl->v[k].t1] = 1;
    for (int t = 0; t <= n_step; t++) rank[t] = rank[t] ? u++ : -1;
    sd->n_time = u;
    for (int p = 0; p < sd->n; p++) sd->c0[p] = rank[sd->c0[p]], sd->c1[p] = rank[sd->c1[p]];
    int64_t *live = err_calloc((size_t)u + 1, sizeof(int64_t)), *most = err_calloc((size_t)u / 64 + 2, sizeof(int64_t));
    for (int k = 0; k < bl->n; k++)
        if (bl->v[k].host == host) live[rank[bl->v[k].t0]] += bl->v[k].size, live[rank[bl->v[k].t1] + 1] -= bl->v[k].size;
    for (int64_t t = 0, sum = 0; t < u; t++) live[t] = sum += live[t], most[t / 64] = live[t] > most[t / 64] ? live[t] : most[t / 64];
    for (int p = 0; p < sd->n; p++) {
        int64_t m = 0;
        for (int t = sd->c0[p]; t <= sd->c1[p];)
            if (t % 64 == 0 && t + 63 <= sd->c1[p]) m = most[t / 64] > m ? most[t / 64] : m, t += 64;
            else m = live[t] > m ? live[t] : m, t++;
        crowd[p] = m;
    }
    free(rank), free(live), free(most);
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
 * end; the live peak, from a walk over the starts and ends of all of them (the bytes live rise only
 * where a block starts: the first start where they are highest is the peak). */
static void side_open(side *sd, blocks *bl, bool host, int n_step)
{
    int m = bl->n + 1;
    *sd = (side){.bl = bl, .idx = err_realloc(NULL, (size_t)m * 8 * sizeof(int)), .size = err_realloc(NULL, (size_t)m * 2 * sizeof(int64_t))};
    sd->c0 = sd->idx + m, sd->c1 = sd->c0 + m, sd->by_start = sd->c1 + m, sd->by_end = sd->by_start + m;
    sd->start_at = sd->by_end + m, sd->end_at = sd->start_at + m, sd->off = sd->size + m;
    int *pos = sd->end_at + m, *starts = err_realloc(NULL, (size_t)m * sizeof(int)); /* pos: each block's position, -1 none */
    for (int k = 0; k < bl->n; k++) {
        block *b = &bl->v[k];
        pos[k] = -1;
        if (b->host != host) continue;
        if (b->persistent) b->off = sd->base, sd->base += b->size; /* live throughout: below the rest */
        else pos[k] = sd->n, sd->idx[sd->n] = k, sd->size[sd->n] = b->size, sd->c0[sd->n] = b->t0, sd->c1[sd->n++] = b->t1;
    }
    int n_starts = side_starts(bl, host, n_step, starts), i = 0, j = 0;
    for (int q = 0; q < n_starts; q++)
        if (pos[starts[q]] >= 0) sd->by_start[i] = pos[starts[q]], sd->start_at[i++] = bl->v[starts[q]].t0;
    for (int q = 0; q < bl->n_ends; q++)
        if (pos[bl->ends[q]] >= 0) sd->by_end[j] = pos[bl->ends[q]], sd->end_at[j++] = bl->v[bl->ends[q]].t1;
    int64_t live = 0;
    for (int q = 0, r = 0; q < n_starts;) {
        int t = bl->v[starts[q]].t0;
        for (; r < bl->n_ends && bl->v[bl->ends[r]].t1 < t; r++)
            if (bl->v[bl->ends[r]].host == host) live -= bl->v[bl->ends[r]].size;
        for (; q < n_starts && bl->v[starts[q]].t0 == t; q++) live += bl->v[starts[q]].size;
        if (live > sd->lower) sd->lower = live, sd->peak = t;
    }
    free(starts);
}

static void side_close(side *sd)
{
    if (sd->pl) placed_close(sd->pl), free(sd->pl);
    free(sd->idx), free(sd->size);
}

/* The smallest arena found so far: its size (-1: none yet), the order that gave it, and its offsets
 * by position. */
typedef struct {
    int64_t size;
    const char *how;
    int64_t *off;
} found;

/* Keeps the side's current placement, of `size`, in f when it is smaller (or f has none); whether it did. */
static bool keep_smaller(const side *sd, found *f, int64_t size, const char *how)
{
    if (f->size >= 0 && size >= f->size) return false;
    f->size = size, f->how = how;
    memcpy(f->off, sd->off, (size_t)sd->n * sizeof(int64_t));
    return true;
}

/* Where the walk from the live peak misses it: the best-fit orders, crowded first, and the repair, as
 * they run on their own (nothing found before cuts them short, so the repair starts from the best of
 * them); their best into fit. */
static void place_best_fit(side *sd, bool host, int n_step, int64_t lower, found *fit)
{
    int n = sd->n;
    int64_t *crowd = err_calloc((size_t)n + 1, sizeof(int64_t));
    rank *r = err_calloc((size_t)n + 1, sizeof(rank)), *tmp = err_calloc((size_t)n + 1, sizeof(rank));
    int *order = err_calloc((size_t)n + 1, sizeof(int)), *best_order = err_calloc((size_t)n + 1, sizeof(int));
    bool *hard = err_calloc((size_t)n + 1, sizeof(bool));
    crowding(sd, host, n_step, crowd);
    sd->pl = err_calloc(1, sizeof *sd->pl);
    placed_open(sd->pl, n, sd->n_time);
    for (int o = 2; o < ARENA_ORDERS && (fit->size < 0 || fit->size > lower); o++) {
        for (int p = 0; p < n; p++) {
            const block *b = &sd->bl->v[sd->idx[p]];
            r[p] = o == 2   ? (rank){(double)crowd[p], b->t1, p}                        /* crowded first, late ends lower */
                   : o == 3 ? (rank){(double)crowd[p], -b->t0, p}                       /* crowded first, early starts lower */
                            : (rank){(double)sd->size[p] * (double)crowd[p], -b->t0, p}; /* big and crowded first */
        }
        sort_ranks(r, tmp, n);
        for (int q = 0; q < n; q++) order[q] = r[q].p;
        if (keep_smaller(sd, fit, place_in_order(sd, order, fit->size), arena_orders[o]))
            memcpy(best_order, order, (size_t)n * sizeof(int));
    }
    /* the repair: the blocks the best order left above the live peak first (in that order), then
     * the rest in that order; a few rounds, the set of such blocks growing */
    for (int round = 0; round < ARENA_REPAIRS && fit->size > lower; round++) {
        int m = 0;
        for (int p = 0; p < n; p++) /* round 0: the best order's placement; then the last round's */
            hard[p] |= (round ? sd->off[p] : fit->off[p]) + sd->size[p] > lower;
        for (int q = 0; q < n; q++)
            if (hard[best_order[q]]) order[m++] = best_order[q];
        for (int q = 0; q < n; q++)
            if (!hard[best_order[q]]) order[m++] = best_order[q];
        keep_smaller(sd, fit, place_in_order(sd, order, fit->size), arena_orders[ARENA_ORDERS]);
    }
    free(crowd), free(r), free(tmp), free(order), free(best_order), free(hard);
}

/* Places one side's blocks (arena.h): the walk from the live peak both ways, then where it misses
 * the live peak the best-fit orders and the repair, the smallest arena kept; returns the arena's size
 * and the winning order's name in *how. */
static int64_t place(blocks *bl, bool host, int n_step, const char **how, int64_t *lower_out)
{
    *how = arena_orders[0], *lower_out = 0;
    int k0 = 0; /* a side without blocks (most plans' host) is empty: no walk over the steps */
    while (k0 < bl->n && bl->v[k0].host != host) k0++;
    if (k0 == bl->n) return 0;
    side sd;
    side_open(&sd, bl, host, n_step);
    int64_t lower = sd.lower;
    found best = {sd.n ? -1 : sd.base, arena_orders[0], err_calloc((size_t)sd.n + 1, sizeof(int64_t))};
    if (sd.n) {
        int cp = 0; /* the last start at or before the peak */
        for (int p = 0; p < sd.n; p++) cp = sd.c0[p] <= sd.peak && sd.c0[p] > cp ? sd.c0[p] : cp;
        keep_smaller(&sd, &best, place_peak(&sd, cp, false), arena_orders[0]);
        if (best.size > lower) keep_smaller(&sd, &best, place_peak(&sd, cp, true), arena_orders[1]);
    }
    if (best.size > lower) {
        found fit = {-1, NULL, err_calloc((size_t)sd.n + 1, sizeof(int64_t))};
        place_best_fit(&sd, host, n_step, lower, &fit);
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
