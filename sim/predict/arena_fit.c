/* arena_fit: see arena_side.h. */
#include "sim/predict/arena_side.h"

#include <stdint.h>
#include <stdlib.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* The blocks placed so far, two ways: in order of offset (their byte ranges and renumbered
 * lifetimes, in chunks of up to ARENA_CHUNK, so that a block goes in by a short move), and by time, the renumbered
 * steps in buckets of ARENA_BUCKET, each listing the placed blocks (positions) whose lifetimes
 * reach into it. A lifetime's overlapping blocks are among those its buckets list: where those
 * lists are short (on ResNet-50's vdnn-all 2% of the blocks placed overlap a lifetime) they are
 * read and sorted; where they are long (DenseNet's maps live long) the blocks in order of offset. */
enum { ARENA_BUCKET = 16, ARENA_CHUNK = 64 };
_Static_assert(ARENA_CHUNK <= 64, "a chunk's blocks are the bits of one uint64_t (best_fit)");

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
    int j = 0; /* after every block starting at or below lo: counted, then the rest moved up, so
                * that no branch waits on a comparison of offsets */
    for (int i = 0; i < k->n; i++) j += k->lo[i] <= lo;
    for (int i = k->n; i > j; i--) k->c0[i] = k->c0[i - 1], k->c1[i] = k->c1[i - 1], k->lo[i] = k->lo[i - 1], k->hi[i] = k->hi[i - 1];
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
    while (i < h && j < m) { /* without a branch on the comparison, which is as good as random */
        bool right = r[2 * j] < r[2 * i];
        int from = right ? j : i;
        tmp[2 * o] = r[2 * from], tmp[2 * o + 1] = r[2 * from + 1], o++;
        j += right, i += !right;
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

/* Which of chunk k's blocks overlap [c0, c1] in time, as bits. Without a branch (as one, it
 * mispredicted about every other block: an eighth of VGG-16 overl:8's arena), and on x86-64 four
 * blocks a compare (SSE2, which every x86-64 has). */
static inline uint64_t overlapping(const chunk *k, int c0, int c1)
{
    uint64_t in = 0;
    int j = 0;
#ifdef __SSE2__
    const __m128i lo = _mm_set1_epi32(c0 - 1), hi = _mm_set1_epi32(c1 + 1); /* c1[j] > c0 - 1 and c0[j] < c1 + 1 */
    for (; j + 4 <= k->n; j += 4) {
        __m128i a = _mm_loadu_si128((const __m128i *)(k->c1 + j)), b = _mm_loadu_si128((const __m128i *)(k->c0 + j));
        __m128i m = _mm_and_si128(_mm_cmpgt_epi32(a, lo), _mm_cmplt_epi32(b, hi));
        in |= (uint64_t)_mm_movemask_ps(_mm_castsi128_ps(m)) << j;
    }
#endif
    for (; j < k->n; j++) in |= (uint64_t)((k->c1[j] >= c0) & (k->c0[j] <= c1)) << j;
    return in;
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
            for (uint64_t in = overlapping(k, c0, c1); in; in &= in - 1) {
                int j = __builtin_ctzll(in);
                fit_range(&f, k->lo[j], k->hi[j]);
            }
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

/* An order of placement: by key1, then key2, both descending, then by position. The keys become
 * unsigned integers in the opposite order (a non-negative double's bits order as its values do;
 * a signed integer's order as unsigned once its sign bit is flipped), and the positions are sorted
 * by them least significant first: by key2, then key1, each a stable counting sort a byte at a
 * time that skips the bytes every key shares. Its passes read the keys in sequence and never
 * compare two: the merge sort it replaced, branch-free, took a fifth of VGG-16 overl:8's arena. */
typedef struct {
    uint64_t *k1, *k2; /* by position */
    int *a, *b;        /* positions, and room for a pass */
    int *by2;          /* the positions by k2 alone (orders 3 and 4 share it) */
} ranking;

static uint64_t key_double_desc(double v) /* v >= 0 */
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return ~u;
}

static uint64_t key_int_desc(int64_t v) { return ~((uint64_t)v ^ (UINT64_C(1) << 63)); }

/* Sorts the positions in *a by key (stable), through *b; the sorted ones end in *a. */
static void radix_by(int **a, int **b, const uint64_t *key, int n)
{
    uint64_t differ = 0;
    for (int i = 1; i < n; i++) differ |= key[i] ^ key[0];
    for (int shift = 0; shift < 64; shift += 8) {
        if (!((differ >> shift) & 0xff)) continue;
        int at[257] = {0};
        for (int i = 0; i < n; i++) at[((key[(*a)[i]] >> shift) & 0xff) + 1]++;
        for (int d = 0; d < 256; d++) at[d + 1] += at[d];
        for (int i = 0; i < n; i++) (*b)[at[(key[(*a)[i]] >> shift) & 0xff]++] = (*a)[i];
        int *t = *a;
        *a = *b, *b = t;
    }
}

/* rk->by2 <- the positions by k2 (then position). */
static void rank_k2(ranking *rk, int n)
{
    for (int p = 0; p < n; p++) rk->a[p] = p;
    radix_by(&rk->a, &rk->b, rk->k2, n);
    memcpy(rk->by2, rk->a, (size_t)n * sizeof(int));
}

/* order[0..n) <- the positions by k1, then as rk->by2 has them. */
static void rank_order(ranking *rk, int n, int *order)
{
    memcpy(rk->a, rk->by2, (size_t)n * sizeof(int));
    radix_by(&rk->a, &rk->b, rk->k1, n);
    memcpy(order, rk->a, (size_t)n * sizeof(int));
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

/* Where the walk from the live peak misses it: the best-fit orders, crowded first, and the repair, as
 * they run on their own (nothing found before cuts them short, so the repair starts from the best of
 * them); their best into fit. */
void arena_place_best_fit(side *sd, bool host, int n_step, int64_t lower, found *fit)
{
    int n = sd->n;
    int64_t *crowd = err_calloc((size_t)n + 1, sizeof(int64_t));
    ranking rk = {err_calloc((size_t)n + 1, sizeof(uint64_t)), err_calloc((size_t)n + 1, sizeof(uint64_t)),
                  err_calloc((size_t)n + 1, sizeof(int)), err_calloc((size_t)n + 1, sizeof(int)),
                  err_calloc((size_t)n + 1, sizeof(int))};
    int *order = err_calloc((size_t)n + 1, sizeof(int)), *best_order = err_calloc((size_t)n + 1, sizeof(int));
    bool *hard = err_calloc((size_t)n + 1, sizeof(bool));
    crowding(sd, host, n_step, crowd);
    sd->pl = err_calloc(1, sizeof *sd->pl);
    placed_open(sd->pl, n, sd->n_time);
    for (int o = 2; o < ARENA_ORDERS && (fit->size < 0 || fit->size > lower); o++) {
        for (int p = 0; p < n; p++) {
            const block *b = &sd->bl->v[sd->idx[p]];
            /* 2: crowded first, late ends lower; 3: crowded first, early starts lower; 4: big and crowded
             * first, then as 3 */
            rk.k1[p] = o == 4 ? key_double_desc((double)sd->size[p] * (double)crowd[p]) : key_int_desc(crowd[p]);
            rk.k2[p] = key_int_desc(o == 2 ? b->t1 : -(int64_t)b->t0);
        }
        if (o != 4) rank_k2(&rk, n);
        rank_order(&rk, n, order);
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
    placed_close(sd->pl), free(sd->pl), sd->pl = NULL;
    free(crowd), free(rk.k1), free(rk.k2), free(rk.a), free(rk.b), free(rk.by2), free(order), free(best_order), free(hard);
}

