/* algo_book: see algo_book.h. A book holds at most a few hundred choices (a net's call shapes), so a
 * lookup is a scan. */
#include "engine/algo_book.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static algo_choice *find(const algo_book *b, const int64_t key[ALGO_KEY_WORDS])
{
    for (int i = 0; i < b->n; i++)
        if (!memcmp(b->v[i].key, key, sizeof b->v[i].key)) return &b->v[i];
    return NULL;
}

void algo_book_put(algo_book *b, const algo_choice *c)
{
    algo_choice *at = find(b, c->key);
    if (!at) {
        if (b->n == b->cap) b->cap = b->cap ? 2 * b->cap : 64, b->v = err_realloc(b->v, (size_t)b->cap * sizeof *b->v);
        at = &b->v[b->n++];
    }
    *at = *c;
}

const algo_choice *algo_book_find(const algo_book *b, const int64_t key[ALGO_KEY_WORDS]) { return b ? find(b, key) : NULL; }

void algo_book_copy(algo_book *to, const algo_book *b)
{
    memset(to, 0, sizeof *to);
    memcpy(to->format, b->format, sizeof to->format), memcpy(to->device, b->device, sizeof to->device);
    for (int i = 0; i < b->n; i++) algo_book_put(to, &b->v[i]);
}

void algo_book_free(algo_book *b)
{
    free(b->v);
    memset(b, 0, sizeof *b);
}

void algo_key_format(const int64_t key[ALGO_KEY_WORDS], char *out, size_t len)
{
    size_t at = 0;
    out[0] = 0;
    for (int i = 0; i < ALGO_KEY_WORDS && at < len; i++) at += (size_t)snprintf(out + at, len - at, "%s%lld", i ? " " : "", (long long)key[i]);
}

int algo_key_parse(const char *text, int64_t key[ALGO_KEY_WORDS], err *e)
{
    const char *p = text;
    int n = 0;
    for (;;) {
        while (*p == ' ') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || (*end && *end != ' ')) return err_set(e, "word %d ('%.20s') is not an integer", n + 1, p);
        if (n == ALGO_KEY_WORDS) return err_set(e, "more than %d words", ALGO_KEY_WORDS);
        key[n++] = v, p = end;
    }
    if (n != ALGO_KEY_WORDS) return err_set(e, "%d words, expected %d", n, ALGO_KEY_WORDS);
    return 0;
}
