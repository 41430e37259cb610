/* arena: see arena.h. */
#include "sim/predict/arena.h"

#include <stdlib.h>
#include <string.h>

#include "sim/plan/enc.h"

typedef arena_block block;

typedef struct {
    block *v;
    int n, cap;
} blocks;

const char *const arena_orders[ARENA_ORDERS + 1] = {"from the live peak outwards, late ends low", "from the live peak outwards, late ends high", "crowding, late ends low", "crowding, early starts low", "size x crowding",
                                                     "the best order, its blocks above the live peak first"};


static int open_block(blocks *bl, int t0, int64_t bytes, bool host, bool persistent)
{
    if (bl->n == bl->cap) bl->v = err_realloc(bl->v, (size_t)(bl->cap = bl->cap * 2 + 256) * sizeof *bl->v);
    int64_t size = (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    bl->v[bl->n] = (block){.size = size > 0 ? size : ARENA_ALIGN, .off = -1, .t0 = t0, .t1 = t0, .host = host, .persistent = persistent};
    return bl->n++;
}

bool arena_outside(const sched_buf *b) { return b->kind == BUF_ENC && enc_data_sized(b->enc); }

/* The blocks of s (arena.h), at[i] the block step i places (-1 none); outside blocks are counted
 * into *apart as the most device bytes they hold at once. */
static void find_blocks(const sched *s, blocks *bl, int64_t *at, int64_t *apart)
{
    int *issue = err_calloc((size_t)s->n_step + 1, sizeof(int)), *cur = err_calloc((size_t)s->n_buf + 1, sizeof(int));
    int *home = err_calloc((size_t)s->n_buf + 1, sizeof(int));
    sched_move_issue(s, issue);
    for (int b = 0; b < s->n_buf; b++) cur[b] = home[b] = -1;
    int64_t out_now = 0;
    *apart = 0;
    for (int i = 0; i < s->n_step; i++) {
        const sched_step *t = &s->steps[i];
        at[i] = -1;
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
        if (cur[b] >= 0) bl->v[cur[b]].t1 = i; /* the block it leaves ends here */
        switch (t->op) {
        case SCHED_ALLOC:
            if (sb->host_home) at[i] = home[b] = open_block(bl, i, sb->bytes, true, true);
            else at[i] = cur[b] = open_block(bl, i, sb->bytes, false, sb->persistent);
            break;
        case SCHED_OFFLOAD:
            cur[b] = -1;
            if (home[b] >= 0) at[i] = home[b];
            else at[i] = cur[b] = open_block(bl, issue[i] >= 0 && issue[i] < i ? issue[i] : i, sb->bytes, true, false);
            break;
        case SCHED_PREFETCH: at[i] = cur[b] = open_block(bl, i, sb->bytes, false, false); break;
        default: /* FREE */
            if (home[b] >= 0) bl->v[home[b]].t1 = i, home[b] = -1;
            cur[b] = -1;
            break;
        }
    }
    for (int b = 0; b < s->n_buf; b++) { /* never freed: to the end */
        if (cur[b] >= 0) bl->v[cur[b]].t1 = s->n_step;
        if (home[b] >= 0) bl->v[home[b]].t1 = s->n_step;
    }
    free(issue), free(cur), free(home);
}

/* Byte ranges [lo, hi), in order and apart (touching ranges merged). */
typedef struct {
    int64_t *r; /* lo, hi pairs */
    int n, cap;
} spans;

static void spans_add(spans *s, int64_t lo, int64_t hi)
{
    int a = 0, b = s->n; /* the first range ending at or after lo */
    while (a < b) {
        int m = (a + b) / 2;
        if (s->r[2 * m + 1] < lo) a = m + 1;
        else b = m;
    }
    int z = a; /* past the last range starting at or before hi */
    while (z < s->n && s->r[2 * z] <= hi) z++;
    if (z > a) { /* merged with ranges a .. z-1 */
        if (s->r[2 * a] < lo) lo = s->r[2 * a];
        if (s->r[2 * z - 1] > hi) hi = s->r[2 * z - 1];
    } else if (s->n == s->cap) {
        s->r = err_realloc(s->r, (size_t)(s->cap = s->cap * 2 + 8) * 2 * sizeof(int64_t));
    }
    int shift = 1 - (z - a); /* ranges gained */
    memmove(s->r + 2 * (z + shift), s->r + 2 * z, (size_t)(s->n - z) * 2 * sizeof(int64_t));
    s->r[2 * a] = lo, s->r[2 * a + 1] = hi;
    s->n += shift;
}

/* Where placed blocks are in time: a segment tree over the steps. A block lies in the few nodes
 * whose step ranges make up its lifetime (`own`), and in the `sub` of those nodes and every node
 * above them; `sub` is the bytes used by blocks anywhere below a node. The bytes used by blocks
 * that overlap a lifetime are then the `own` of the nodes on the way down to it and the `sub` of
 * the nodes that make it up — a few lists of ranges, short because the ranges of blocks packed
 * against each other merge. */
typedef struct {
    spans *own, *sub;
} timetree;

static void tree_add(timetree *tt, int node, int l, int r, const block *b)
{
    spans_add(&tt->sub[node], b->off, b->off + b->size);
    if (b->t0 <= l && r <= b->t1) {
        spans_add(&tt->own[node], b->off, b->off + b->size);
        return;
    }
    int mid = (l + r) / 2;
    if (b->t0 <= mid) tree_add(tt, 2 * node, l, mid, b);
    if (b->t1 > mid) tree_add(tt, 2 * node + 1, mid + 1, r, b);
}

/* Ranges gathered from the tree: runs, each in order (a node's list), to be merged into one. */
typedef struct {
    spans all, tmp;
    int *run, n_run, cap;
} gathered;

static void gather(gathered *g, const spans *s)
{
    if (!s->n) return;
    spans *out = &g->all;
    if (out->n + s->n > out->cap) out->r = err_realloc(out->r, (size_t)(out->cap = (out->n + s->n) * 2) * 2 * sizeof(int64_t));
    if (g->n_run + 2 > g->cap) g->run = err_realloc(g->run, (size_t)(g->cap = g->cap * 2 + 64) * sizeof(int));
    g->run[g->n_run++] = out->n;
    memcpy(out->r + 2 * out->n, s->r, (size_t)s->n * 2 * sizeof(int64_t));
    out->n += s->n;
}

/* The byte ranges of placed blocks overlapping b in time, as runs into g. */
static void tree_used(const timetree *tt, int node, int l, int r, const block *b, gathered *g)
{
    if (b->t0 <= l && r <= b->t1) {
        gather(g, &tt->sub[node]);
        return;
    }
    gather(g, &tt->own[node]);
    int mid = (l + r) / 2;
    if (b->t0 <= mid) tree_used(tt, 2 * node, l, mid, b, g);
    if (b->t1 > mid) tree_used(tt, 2 * node + 1, mid + 1, r, b, g);
}

/* g's runs merged pairwise, round after round, into one run in order of the ranges' starts. */
static void merge_runs(gathered *g)
{
    spans *a = &g->all, *t = &g->tmp;
    if (g->n_run < 2) return;
    if (t->cap < a->n) t->r = err_realloc(t->r, (size_t)(t->cap = a->cap) * 2 * sizeof(int64_t));
    int64_t *src = a->r, *dst = t->r;
    g->run[g->n_run] = a->n;
    while (g->n_run > 1) {
        int m = 0;
        for (int k = 0; k < g->n_run; k += 2) {
            int i = g->run[k], mid = g->run[k + 1], end = k + 2 <= g->n_run ? g->run[k + 2] : mid, j = mid, o = i; /* the last may merge with nothing */
            while (i < mid || j < end) {
                int from = j >= end || (i < mid && src[2 * i] <= src[2 * j]) ? i++ : j++;
                dst[2 * o] = src[2 * from], dst[2 * o + 1] = src[2 * from + 1], o++;
            }
            g->run[m++] = g->run[k];
        }
        g->run[m] = a->n, g->n_run = m;
        int64_t *x = src;
        src = dst, dst = x;
    }
    if (src != a->r) { /* the merged run lies in tmp: swap the buffers */
        spans x = *a;
        a->r = t->r, t->r = x.r;
        int c = a->cap;
        a->cap = t->cap, t->cap = c;
    }
}

/* One side's blocks being placed: their indices in bl, their lifetimes renumbered onto the steps
 * where some block starts or ends (a block's [t0, t1] as [c0, c1]: the overlaps stay, the tree
 * shrinks), their positions in order of start and of end, and the tree (allocated only where the
 * walk from the live peak misses it). */
typedef struct {
    blocks *bl;
    int *idx, n, *c0, *c1, n_time, leaves;
    int *by_start, *by_end;
    int64_t base; /* bytes of the persistent blocks packed at the bottom */
    timetree tt;
} side;

/* Places the side's blocks in `order` (positions into idx) at the smallest gap left between the
 * blocks placed before that overlap them in time (best fit), or above them all; returns the size,
 * or, as soon as it reaches `limit` (a size found before: this order cannot beat it), that much
 * with the rest unplaced. */
static int64_t place_in_order(side *sd, const int *order, int64_t limit)
{
    for (int i = 0; i < 2 * sd->leaves; i++) sd->tt.own[i].n = sd->tt.sub[i].n = 0;
    int64_t size = sd->base;
    gathered g = {0};
    for (int q = 0; q < sd->n; q++) {
        int p = order[q];
        block *b = &sd->bl->v[sd->idx[p]], life = *b;
        life.t0 = sd->c0[p], life.t1 = sd->c1[p];
        g.all.n = g.n_run = 0;
        tree_used(&sd->tt, 1, 0, sd->leaves - 1, &life, &g);
        merge_runs(&g);
        const spans used = g.all;
        int64_t end = sd->base, best = -1, best_gap = 0;
        for (int j = 0; j < used.n; j++) {
            int64_t gap = used.r[2 * j] - end;
            if (gap >= b->size && (best < 0 || gap < best_gap)) best = end, best_gap = gap;
            if (used.r[2 * j + 1] > end) end = used.r[2 * j + 1];
        }
        b->off = life.off = best >= 0 ? best : end;
        if (b->off + b->size > size) size = b->off + b->size;
        if (limit >= 0 && size >= limit) break;
        tree_add(&sd->tt, 1, 0, sd->leaves - 1, &life);
    }
    free(g.all.r), free(g.tmp.r), free(g.run);
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
 * meet: a block is in one of them or in the stack. Each costs a walk over the steps with a short
 * list of holes, where the tree's orders cost a search of the tree per block; on most schedules it
 * meets the live peak. Returns the size. */
static int64_t place_peak(side *sd, int cp, bool high)
{
    int T = sd->n_time, n = sd->n;
    int64_t top = sd->base;
    for (int j = 0; j < n; j++) { /* the peak's blocks, by end */
        int p = sd->by_end[high ? j : n - 1 - j];
        if (sd->c0[p] <= cp && cp <= sd->c1[p]) sd->bl->v[sd->idx[p]].off = top, top += sd->bl->v[sd->idx[p]].size;
    }
    int64_t most = top;
    for (int back = 0; back < 2; back++) {
        holes f = {.top = top, .most = top};
        /* forward: begin by start, end by end; backward: the reverse of both, roles swapped */
        const int *begin = back ? sd->by_end : sd->by_start, *end = back ? sd->by_start : sd->by_end;
        const int *tb = back ? sd->c1 : sd->c0, *te = back ? sd->c0 : sd->c1;
        int step = back ? -1 : 1, q = back ? n - 1 : 0, r = q;
        while (q >= 0 && q < n && (back ? tb[begin[q]] >= cp : tb[begin[q]] <= cp)) q += step; /* in the stack or the other pass */
        while (r >= 0 && r < n && (back ? te[end[r]] > cp : te[end[r]] < cp)) r += step;
        for (int t = cp; t >= 0 && t < T; t += step) {
            for (; q >= 0 && q < n && tb[begin[q]] == t; q += step) {
                block *b = &sd->bl->v[sd->idx[begin[q]]];
                b->off = holes_take(&f, b->size);
            }
            for (; r >= 0 && r < n && te[end[r]] == t; r += step) {
                const block *b = &sd->bl->v[sd->idx[end[r]]];
                holes_give(&f, b->off, b->off + b->size);
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

static int by_rank(const void *x, const void *y)
{
    const rank *a = x, *b = y;
    if (a->key1 != b->key1) return a->key1 > b->key1 ? -1 : 1;
    if (a->key2 != b->key2) return a->key2 > b->key2 ? -1 : 1;
    return a->p < b->p ? -1 : 1;
}

/* crowd[p]: the most bytes live at one step of block p's lifetime (live: bytes live per step, by
 * chunks of 64 steps' maxima for long lifetimes). */
static void crowding(const side *sd, const int64_t *live, int n_step, int64_t *crowd)
{
    int n_chunk = n_step / 64 + 2;
    int64_t *most = err_calloc((size_t)n_chunk, sizeof(int64_t));
    for (int t = 0; t <= n_step; t++)
        if (live[t] > most[t / 64]) most[t / 64] = live[t];
    for (int p = 0; p < sd->n; p++) {
        const block *b = &sd->bl->v[sd->idx[p]];
        int64_t m = 0;
        for (int t = b->t0; t <= b->t1;)
            if (t % 64 == 0 && t + 63 <= b->t1) m = most[t / 64] > m ? most[t / 64] : m, t += 64;
            else m = live[t] > m ? live[t] : m, t++;
        crowd[p] = m;
    }
    free(most);
}

/* The side's blocks: persistent ones packed from 0, the rest indexed and renumbered in time. */
static void side_open(side *sd, blocks *bl, bool host, int n_step)
{
    *sd = (side){.bl = bl, .idx = err_calloc((size_t)bl->n + 1, sizeof(int))};
    int *rank = err_calloc((size_t)n_step + 2, sizeof(int)); /* 1 at the steps where a block starts or ends, then their number */
    for (int k = 0; k < bl->n; k++) {
        block *b = &bl->v[k];
        if (b->host != host) continue;
        if (b->persistent) b->off = sd->base, sd->base += b->size; /* live throughout: below the rest */
        else sd->idx[sd->n++] = k, rank[b->t0] = rank[b->t1] = 1;
    }
    int u = 0;
    for (int t = 0; t <= n_step; t++) rank[t] = rank[t] ? u++ : -1;
    sd->c0 = err_calloc((size_t)sd->n + 1, sizeof(int)), sd->c1 = err_calloc((size_t)sd->n + 1, sizeof(int));
    for (int p = 0; p < sd->n; p++) sd->c0[p] = rank[bl->v[sd->idx[p]].t0], sd->c1[p] = rank[bl->v[sd->idx[p]].t1];
    free(rank);
    sd->n_time = u;
    for (sd->leaves = 1; sd->leaves < u; sd->leaves *= 2) {}
    /* the positions by start and by end: counting sorts over the renumbered steps */
    int *at0 = err_calloc((size_t)u + 2, sizeof(int)), *at1 = err_calloc((size_t)u + 2, sizeof(int));
    sd->by_start = err_calloc((size_t)sd->n + 1, sizeof(int)), sd->by_end = err_calloc((size_t)sd->n + 1, sizeof(int));
    for (int p = 0; p < sd->n; p++) at0[sd->c0[p] + 1]++, at1[sd->c1[p] + 1]++;
    for (int t = 0; t < u; t++) at0[t + 1] += at0[t], at1[t + 1] += at1[t];
    for (int p = 0; p < sd->n; p++) sd->by_start[at0[sd->c0[p]]++] = p, sd->by_end[at1[sd->c1[p]]++] = p;
    free(at0), free(at1);
}

static void side_close(side *sd)
{
    for (int i = 0; sd->tt.own && i < 2 * sd->leaves; i++) free(sd->tt.own[i].r), free(sd->tt.sub[i].r);
    free(sd->tt.own), free(sd->tt.sub), free(sd->idx), free(sd->c0), free(sd->c1), free(sd->by_start), free(sd->by_end);
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
    for (int p = 0; p < sd->n; p++) f->off[p] = sd->bl->v[sd->idx[p]].off;
    return true;
}

/* Where the walk from the live peak misses it: the tree's orders, crowded first, and the repair, as
 * they run on their own (nothing found before cuts them short, so the repair starts from the best of
 * them); their best into tree. */
static void place_tree(side *sd, const int64_t *live, int n_step, int64_t lower, found *tree)
{
    int n = sd->n;
    int64_t *crowd = err_calloc((size_t)n + 1, sizeof(int64_t));
    rank *r = err_calloc((size_t)n + 1, sizeof(rank));
    int *order = err_calloc((size_t)n + 1, sizeof(int)), *best_order = err_calloc((size_t)n + 1, sizeof(int));
    bool *hard = err_calloc((size_t)n + 1, sizeof(bool));
    crowding(sd, live, n_step, crowd);
    sd->tt.own = err_calloc((size_t)sd->leaves * 2, sizeof(spans)), sd->tt.sub = err_calloc((size_t)sd->leaves * 2, sizeof(spans));
    for (int o = 2; o < ARENA_ORDERS && (tree->size < 0 || tree->size > lower); o++) {
        for (int p = 0; p < n; p++) {
            const block *b = &sd->bl->v[sd->idx[p]];
            r[p] = o == 2   ? (rank){(double)crowd[p], b->t1, p}                        /* crowded first, late ends lower */
                   : o == 3 ? (rank){(double)crowd[p], -b->t0, p}                       /* crowded first, early starts lower */
                            : (rank){(double)b->size * (double)crowd[p], -b->t0, p};    /* big and crowded first */
        }
        qsort(r, (size_t)n, sizeof(rank), by_rank);
        for (int q = 0; q < n; q++) order[q] = r[q].p;
        if (keep_smaller(sd, tree, place_in_order(sd, order, tree->size), arena_orders[o]))
            memcpy(best_order, order, (size_t)n * sizeof(int));
    }
    /* the repair: the blocks the best order left above the live peak first (in that order), then
     * the rest in that order; a few rounds, the set of such blocks growing */
    for (int round = 0; round < ARENA_REPAIRS && tree->size > lower; round++) {
        int m = 0;
        for (int p = 0; p < n; p++) /* round 0: the best order's placement; then the last round's */
            hard[p] |= (round ? sd->bl->v[sd->idx[p]].off : tree->off[p]) + sd->bl->v[sd->idx[p]].size > lower;
        for (int q = 0; q < n; q++)
            if (hard[best_order[q]]) order[m++] = best_order[q];
        for (int q = 0; q < n; q++)
            if (!hard[best_order[q]]) order[m++] = best_order[q];
        keep_smaller(sd, tree, place_in_order(sd, order, tree->size), arena_orders[ARENA_ORDERS]);
    }
    free(crowd), free(r), free(order), free(best_order), free(hard);
}

/* Places one side's blocks (arena.h): the walk from the live peak both ways, then where it misses
 * the live peak the tree's orders and the repair, the smallest arena kept; returns the arena's size
 * and the winning order's name in *how. */
static int64_t place(blocks *bl, bool host, int n_step, const char **how, int64_t *lower_out)
{
    side sd;
    side_open(&sd, bl, host, n_step);
    int64_t *live = err_calloc((size_t)n_step + 2, sizeof(int64_t)), lower = 0;
    for (int k = 0; k < bl->n; k++)
        if (bl->v[k].host == host) live[bl->v[k].t0] += bl->v[k].size, live[bl->v[k].t1 + 1] -= bl->v[k].size;
    for (int t = 0; t <= n_step; t++) live[t] += t ? live[t - 1] : 0, lower = live[t] > lower ? live[t] : lower;
    found best = {sd.n ? -1 : sd.base, arena_orders[0], err_calloc((size_t)sd.n + 1, sizeof(int64_t))};
    if (sd.n) {
        int cp = 0, peak = 0; /* the first step at the live peak, renumbered (live rises only where a block starts) */
        for (int t = 0; t <= n_step; t++) peak = live[t] > live[peak] ? t : peak;
        for (int p = 0; p < sd.n; p++) cp = bl->v[sd.idx[p]].t0 <= peak && sd.c0[p] > cp ? sd.c0[p] : cp;
        keep_smaller(&sd, &best, place_peak(&sd, cp, false), arena_orders[0]);
        if (best.size > lower) keep_smaller(&sd, &best, place_peak(&sd, cp, true), arena_orders[1]);
    }
    if (best.size > lower) {
        found tree = {-1, NULL, err_calloc((size_t)sd.n + 1, sizeof(int64_t))};
        place_tree(&sd, live, n_step, lower, &tree);
        if (tree.size < best.size) best.size = tree.size, best.how = tree.how, memcpy(best.off, tree.off, (size_t)sd.n * sizeof(int64_t));
        free(tree.off);
    }
    for (int p = 0; p < sd.n; p++) bl->v[sd.idx[p]].off = best.off[p];
    free(live), free(best.off);
    side_close(&sd);
    *lower_out = lower, *how = best.how;
    return best.size;
}

void arena_plan(const sched *s, arena *a)
{
    memset(a, 0, sizeof *a);
    a->n_step = s->n_step;
    a->at = err_calloc((size_t)s->n_step + 1, sizeof(int64_t));
    blocks bl = {0};
    find_blocks(s, &bl, a->at, &a->apart);
    a->n_blocks = bl.n;
    a->size = place(&bl, false, s->n_step, &a->how, &a->live);
    a->host_size = place(&bl, true, s->n_step, &a->host_how, &a->host_live);
    for (int i = 0; i < s->n_step; i++)
        if (a->at[i] >= 0) a->at[i] = bl.v[a->at[i]].off;
    a->blocks = bl.v;
}

void arena_free(arena *a)
{
    free(a->at), free(a->blocks);
    memset(a, 0, sizeof *a);
}
