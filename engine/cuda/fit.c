/* fit: see fit.h. Gaps and blocks are kept sorted by offset in arrays: a schedule holds a few
 * hundred offloaded maps at most, so linear scans cost nothing beside the copies themselves. */
#include "engine/cuda/fit.h"

#include <stdbool.h>
#include <string.h>

#include "sim/base/err.h"

static void insert(int64_t **at, int64_t **len, int *n, int *cap, int i, int64_t a, int64_t l)
{
    if (*n == *cap) {
        *cap = *cap * 2 + 16;
        *at = err_realloc(*at, (size_t)*cap * sizeof **at);
        *len = err_realloc(*len, (size_t)*cap * sizeof **len);
    }
    memmove(*at + i + 1, *at + i, (size_t)(*n - i) * sizeof **at);
    memmove(*len + i + 1, *len + i, (size_t)(*n - i) * sizeof **len);
    (*at)[i] = a, (*len)[i] = l, (*n)++;
}

static void erase(int64_t *at, int64_t *len, int *n, int i)
{
    memmove(at + i, at + i + 1, (size_t)(*n - i - 1) * sizeof *at);
    memmove(len + i, len + i + 1, (size_t)(*n - i - 1) * sizeof *len);
    (*n)--;
}

void fit_init(fit *f, int64_t size, int64_t align)
{
    memset(f, 0, sizeof *f);
    f->align = align > 0 ? align : 1;
    f->size = size / f->align * f->align;
    if (f->size > 0) insert(&f->gap_at, &f->gap_len, &f->n_gap, &f->cap_gap, 0, 0, f->size);
}

void fit_free(fit *f)
{
    free(f->gap_at), free(f->gap_len), free(f->blk_at), free(f->blk_len);
    memset(f, 0, sizeof *f);
}

int64_t fit_get(fit *f, int64_t bytes)
{
    int64_t need = (bytes > 0 ? bytes : 1) + f->align - 1;
    need -= need % f->align;
    for (int i = 0; i < f->n_gap; i++) {
        if (f->gap_len[i] < need) continue;
        int64_t at = f->gap_at[i];
        if (f->gap_len[i] == need) erase(f->gap_at, f->gap_len, &f->n_gap, i);
        else f->gap_at[i] += need, f->gap_len[i] -= need;
        int j = 0;
        while (j < f->n_blk && f->blk_at[j] < at) j++;
        insert(&f->blk_at, &f->blk_len, &f->n_blk, &f->cap_blk, j, at, need);
        f->used += need;
        if (f->used > f->high) f->high = f->used;
        return at;
    }
    return -1;
}

bool fit_put(fit *f, int64_t at)
{
    int j = 0;
    while (j < f->n_blk && f->blk_at[j] < at) j++;
    if (j == f->n_blk || f->blk_at[j] != at) return false;
    int64_t len = f->blk_len[j];
    erase(f->blk_at, f->blk_len, &f->n_blk, j);
    f->used -= len;
    int i = 0; /* the gap goes before gap i; it merges with the one before and the one after */
    while (i < f->n_gap && f->gap_at[i] < at) i++;
    bool left = i > 0 && f->gap_at[i - 1] + f->gap_len[i - 1] == at, right = i < f->n_gap && at + len == f->gap_at[i];
    if (left && right) {
        f->gap_len[i - 1] += len + f->gap_len[i];
        erase(f->gap_at, f->gap_len, &f->n_gap, i);
    } else if (left) {
        f->gap_len[i - 1] += len;
    } else if (right) {
        f->gap_at[i] = at, f->gap_len[i] += len;
    } else {
        insert(&f->gap_at, &f->gap_len, &f->n_gap, &f->cap_gap, i, at, len);
    }
    return true;
}
