/* load: parser, topological order and shape inference for the format of nets/FORMAT.md.
 * Parsing happens in two passes: lines become raw layers (names, keys, input names), then names
 * are resolved, layers are sorted topologically (Kahn, stable in file order) and shapes are
 * inferred, each kind by its row of the kinds table (sim/net/kind.h). Every user error carries
 * "path:line:". */
#include "sim/net/load.h"

#include "sim/net/kind.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <strings.h>

/* A parsed line before names are resolved. */
typedef struct {
    net_layer l;
    char in_names[NET_MAX_IN][NET_NAME_LEN];
    bool in_given;
} raw_layer;

static bool name_ok(const char *s)
{
    if (!*s) return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '.' && *s != '-') return false;
    return true;
}

static int parse_int(const char *v, int lo, int *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > INT_MAX / 4) return -1;
    *out = (int)x;
    return 0;
}

/* The key called name among the kind's, or -1. */
static int key_index(const kind_traits *t, const char *name)
{
    for (int k = 0; k < KIND_MAX_KEYS && t->keys[k].name; k++)
        if (!strcmp(t->keys[k].name, name)) return k;
    return -1;
}

/* "c k s p d bias": the kind's keys, for messages. */
static const char *key_list(const kind_traits *t, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    for (int k = 0; k < KIND_MAX_KEYS && t->keys[k].name && at < len; k++)
        at += (size_t)snprintf(buf + at, len - at, "%s%s", k ? " " : "", t->keys[k].name);
    return buf;
}

static void key_store(net_layer *l, const kind_key *k, double v)
{
    char *field = (char *)l + k->off;
    if (k->type == KIND_KEY_FLOAT) *(float *)field = (float)v;
    else if (k->type == KIND_KEY_BOOL) *(bool *)field = v != 0;
    else *(int *)field = (int)v;
    if (k->off_w) *(int *)((char *)l + k->off_w) = (int)v; /* a pair: both axes */
}

static double key_load(const net_layer *l, const kind_key *k)
{
    const char *field = (const char *)l + k->off;
    if (k->type == KIND_KEY_FLOAT) return *(const float *)field;
    if (k->type == KIND_KEY_BOOL) return *(const bool *)field;
    return *(const int *)field;
}

/* Parses value text v for key k into l. */
static int key_parse(net_layer *l, const kind_key *k, const char *v, const char *where, err *e)
{
    char *end;
    if (k->type == KIND_KEY_FLOAT) {
        float f = strtof(v, &end);
        if (*end || end == v || !(f >= 0.0f)) return err_set(e, "%s: bad value '%s' for %s (a number >= 0)", where, v, k->name);
        key_store(l, k, f);
        return 0;
    }
    int lo = k->type == KIND_KEY_COUNT ? 1 : 0, x = 0;
    const char *cross = k->off_w ? strchr(v, 'x') : NULL;
    if (cross) { /* AxB: along H, then W */
        char hv[32];
        size_t len = (size_t)(cross - v);
        int y = 0;
        bool fits = len < sizeof hv;
        if (fits) memcpy(hv, v, len), hv[len] = 0;
        if (!fits || parse_int(hv, lo, &x) || parse_int(cross + 1, lo, &y))
            return err_set(e, "%s: bad value '%s' for %s (%s, or HxW)", where, v, k->name, lo ? "an integer >= 1" : "an integer >= 0");
        key_store(l, k, x);
        *(int *)((char *)l + k->off_w) = y;
        return 0;
    }
    if (parse_int(v, lo, &x) || (k->type == KIND_KEY_BOOL && x > 1))
        return err_set(e, "%s: bad value '%s' for %s (%s)", where, v, k->name,
                       k->type == KIND_KEY_BOOL ? "0 or 1" : lo ? "an integer >= 1" : "an integer >= 0");
    key_store(l, k, x);
    return 0;
}

/* Splits one line into kind, name and key=value pairs; fills r. Returns 1 for a layer line,
 * 0 for a blank/comment/`net` line, -1 on error. */
static int parse_line(char *s, int lineno, const char *path, net *n, raw_layer *r, err *e)
{
    char where[320];
    snprintf(where, sizeof where, "%s:%d", path, lineno);
    char *hash = strchr(s, '#');
    if (hash) *hash = 0;
    char *tok[64];
    int nt = 0;
    for (char *at, *t = strtok_r(s, " \t\r\n", &at); t; t = strtok_r(NULL, " \t\r\n", &at)) {
        if (nt == 64) return err_set(e, "%s: too many fields", where);
        tok[nt++] = t;
    }
    if (nt == 0) return 0;
    if (!strcmp(tok[0], "net")) {
        if (nt != 2 || !name_ok(tok[1]) || strlen(tok[1]) >= NET_NAME_LEN)
            return err_set(e, "%s: expected 'net NAME'", where);
        snprintf(n->name, sizeof n->name, "%s", tok[1]);
        return 0;
    }
    int kind = kind_find(tok[0]);
    if (kind < 0) return err_set(e, "%s: unknown layer kind '%s' (known: %s)", where, tok[0], kind_names());
    const kind_traits *t = &kind_table[kind];
    if (nt < 2 || strchr(tok[1], '='))
        return err_set(e, "%s: %s layer needs a name after the kind", where, tok[0]);
    if (!name_ok(tok[1]) || strlen(tok[1]) >= NET_NAME_LEN)
        return err_set(e, "%s: bad layer name '%s' (letters, digits, _ . - ; at most %d chars)", where,
                       tok[1], NET_NAME_LEN - 1);
    memset(r, 0, sizeof *r);
    r->l.kind = (net_kind)kind;
    r->l.line = lineno;
    snprintf(r->l.name, sizeof r->l.name, "%s", tok[1]);
    r->l.win = r->l.win_w = (net_window){1, 1, 0, 1};
    for (int k = 0; k < KIND_MAX_KEYS && t->keys[k].name; k++) key_store(&r->l, &t->keys[k], t->keys[k].def);
    unsigned seen = 0;
    char keys[64];
    for (int i = 2; i < nt; i++) {
        char *eq = strchr(tok[i], '=');
        if (!eq || eq == tok[i]) return err_set(e, "%s: expected key=value, got '%s'", where, tok[i]);
        *eq = 0;
        const char *key = tok[i];
        char *val = eq + 1;
        if (!strcmp(key, "in")) {
            if (r->in_given) return err_set(e, "%s: key 'in' given twice", where);
            r->in_given = true;
            if (!*val) return err_set(e, "%s: empty in=", where);
            for (char *in = val, *next; in; in = next) {
                next = strchr(in, ',');
                if (next) *next++ = 0;
                if (r->l.n_in == NET_MAX_IN)
                    return err_set(e, "%s: %s takes at most %d inputs", where, tok[0], NET_MAX_IN);
                if (!name_ok(in) || strlen(in) >= NET_NAME_LEN) return err_set(e, "%s: bad input name '%s'", where, in);
                snprintf(r->in_names[r->l.n_in++], NET_NAME_LEN, "%s", in);
            }
            continue;
        }
        int k = key_index(t, key);
        if (k < 0)
            return err_set(e, "%s: unknown key '%s' for %s (keys: %s%s)", where, key, tok[0],
                           t->keys[0].name ? key_list(t, keys, sizeof keys) : "none", t->max_in ? " in" : "");
        if (seen & (1u << k)) return err_set(e, "%s: key '%s' given twice", where, key);
        seen |= 1u << k;
        if (key_parse(&r->l, &t->keys[k], val, where, e)) return -1;
    }
    for (int k = 0; k < KIND_MAX_KEYS && t->keys[k].name; k++) {
        const kind_key *key = &t->keys[k];
        if (key->required && !(seen & (1u << k)))
            return err_set(e, "%s: %s '%s' needs key '%s'", where, tok[0], r->l.name, key->name);
        if (key->def_key && !(seen & (1u << k))) key_store(&r->l, key, key_load(&r->l, &t->keys[key_index(t, key->def_key)]));
    }
    if (!t->max_in && r->in_given) return err_set(e, "%s: the input layer takes no in=", where);
    if (t->min_in > 1 && r->l.n_in < t->min_in) /* a single input may be implicit (the line before) */
        return err_set(e, "%s: %s '%s' needs %s", where, tok[0], r->l.name,
                       t->max_in == 2 ? "two inputs (in=a,b)" : "two or more inputs (in=a,b,...)");
    if (r->l.n_in > t->max_in)
        return err_set(e, "%s: %s takes %s", where, tok[0], t->max_in == 1 ? "one input" : t->max_in == 2 ? "two inputs" : "fewer inputs");
    return 1;
}

/* Layer names in sorted order (file indices, ties by file order), so that a net of 100,000 layers
 * checks duplicates and resolves inputs in O(n log n) rather than comparing every pair. */
static const raw_layer *sort_raw;
static int by_name(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b, c = strcmp(sort_raw[x].l.name, sort_raw[y].l.name);
    return c ? c : (x > y) - (x < y);
}

/* The file index of the layer called name, or -1 (sorted: by_name's order over raw). */
static int find_raw(const raw_layer *raw, const int *sorted, int nraw, const char *name)
{
    int lo = 0, hi = nraw;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(raw[sorted[mid]].l.name, name);
        if (!c) return sorted[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* A min-heap of file indices: Kahn's algorithm takes the earliest ready line, so file order is kept
 * when it is a valid order. */
typedef struct {
    int *v, n;
} heap_min;

static void heap_push(heap_min *h, int x)
{
    int i = h->n++;
    for (; i && h->v[(i - 1) / 2] > x; i = (i - 1) / 2) h->v[i] = h->v[(i - 1) / 2];
    h->v[i] = x;
}

static int heap_pop(heap_min *h)
{
    int top = h->v[0], x = h->v[--h->n], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && h->v[c + 1] < h->v[c]) c++;
        if (h->v[c] >= x) break;
        h->v[i] = h->v[c], i = c;
    }
    if (h->n) h->v[i] = x;
    return top;
}

/* Resolves input names, then sorts topologically. raw is in file order. */
static int resolve(net *n, raw_layer *raw, int nraw, const char *path, err *e)
{
    int *in_idx = err_calloc((size_t)nraw * NET_MAX_IN, sizeof(int));
    int *indeg = err_calloc((size_t)nraw, sizeof(int));
    int *order = err_calloc((size_t)nraw, sizeof(int));
    int *sorted = err_calloc((size_t)nraw, sizeof(int));
    int *start = err_calloc((size_t)nraw + 1, sizeof(int)), *users = NULL; /* consumers of each layer (CSR) */
    heap_min ready = {err_calloc((size_t)nraw, sizeof(int)), 0};
    int rc = -1;
    int n_input = 0;
    for (int i = 0; i < nraw; i++) sorted[i] = i;
    sort_raw = raw;
    qsort(sorted, (size_t)nraw, sizeof *sorted, by_name);
    int dup = -1; /* the first line, in file order, that repeats an earlier name */
    for (int k = 1; k < nraw; k++)
        if (!strcmp(raw[sorted[k]].l.name, raw[sorted[k - 1]].l.name) && (dup < 0 || sorted[k] < sorted[dup])) dup = k;
    if (dup >= 0) {
        int first = dup - 1;
        while (first > 0 && !strcmp(raw[sorted[first - 1]].l.name, raw[sorted[dup]].l.name)) first--;
        err_set(e, "%s:%d: duplicate layer name '%s' (first on line %d)", path, raw[sorted[dup]].l.line, raw[sorted[dup]].l.name,
                raw[sorted[first]].l.line);
        goto out;
    }
    for (int i = 0; i < nraw; i++) {
        raw_layer *r = &raw[i];
        if (r->l.kind == NET_INPUT) {
            if (n_input++) { err_set(e, "%s:%d: a second input layer", path, r->l.line); goto out; }
            continue;
        }
        if (!r->in_given) {
            if (i == 0) { err_set(e, "%s:%d: '%s' has no input (first layer, no in=)", path, r->l.line, r->l.name); goto out; }
            r->l.n_in = 1;
            snprintf(r->in_names[0], NET_NAME_LEN, "%s", raw[i - 1].l.name);
        }
        for (int j = 0; j < r->l.n_in; j++) {
            int found = find_raw(raw, sorted, nraw, r->in_names[j]);
            if (found < 0) { err_set(e, "%s:%d: '%s' reads unknown layer '%s'", path, r->l.line, r->l.name, r->in_names[j]); goto out; }
            if (found == i) { err_set(e, "%s:%d: '%s' reads itself (a cycle)", path, r->l.line, r->l.name); goto out; }
            in_idx[i * NET_MAX_IN + j] = found;
            indeg[i]++;
            start[found + 1]++;
        }
    }
    if (!n_input) { err_set(e, "%s: no input layer", path); goto out; }
    for (int i = 0; i < nraw; i++) start[i + 1] += start[i];
    users = err_calloc((size_t)start[nraw] + 1, sizeof(int));
    {
        int *next = sorted; /* reuse: the next free slot of each producer's consumers */
        memcpy(next, start, (size_t)nraw * sizeof(int));
        for (int i = 0; i < nraw; i++)
            for (int j = 0; j < raw[i].l.n_in; j++) users[next[in_idx[i * NET_MAX_IN + j]]++] = i;
    }
    /* Kahn's algorithm, always taking the earliest ready line so file order is kept when valid. */
    for (int i = 0; i < nraw; i++)
        if (!indeg[i]) heap_push(&ready, i);
    for (int pos = 0; pos < nraw; pos++) {
        if (!ready.n) {
            int first = -1;
            for (int i = 0; i < nraw && first < 0; i++)
                if (indeg[i] > 0) first = i;
            err_set(e, "%s:%d: cycle through layer '%s'", path, raw[first].l.line, raw[first].l.name);
            goto out;
        }
        int pick = heap_pop(&ready);
        order[pos] = pick;
        for (int k = start[pick]; k < start[pick + 1]; k++)
            if (!--indeg[users[k]]) heap_push(&ready, users[k]);
    }
    if (raw[order[0]].l.kind != NET_INPUT) {
        err_set(e, "%s:%d: '%s' does not depend on the input", path, raw[order[0]].l.line, raw[order[0]].l.name);
        goto out;
    }
    n->n = nraw;
    n->layers = err_calloc((size_t)nraw, sizeof(net_layer));
    int *pos_of = indeg; /* reuse: file index -> topological index */
    for (int p = 0; p < nraw; p++) pos_of[order[p]] = p;
    for (int p = 0; p < nraw; p++) {
        n->layers[p] = raw[order[p]].l;
        for (int j = 0; j < n->layers[p].n_in; j++) n->layers[p].in[j] = pos_of[in_idx[order[p] * NET_MAX_IN + j]];
    }
    rc = 0;
out:
    free(in_idx), free(indeg), free(order), free(sorted), free(start), free(users), free(ready.v);
    return rc;
}

int net_parse(net *n, const char *text, const char *path, err *e)
{
    memset(n, 0, sizeof *n);
    snprintf(n->path, sizeof n->path, "%s", path);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(n->name, sizeof n->name, "%.*s", (int)strcspn(base, "."), base);
    int cap = 64, nraw = 0, lineno = 0, rc = -1;
    raw_layer *raw = err_calloc((size_t)cap, sizeof(raw_layer));
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        lineno++;
        if (len >= NET_LINE_MAX) { err_set(e, "%s:%d: line too long (%zu characters; at most %d)", path, lineno, len, NET_LINE_MAX - 1); goto out; }
        char line[NET_LINE_MAX];
        memcpy(line, p, len);
        line[len] = 0;
        if (nraw == cap) raw = err_realloc(raw, (size_t)(cap *= 2) * sizeof(raw_layer));
        int got = parse_line(line, lineno, path, n, &raw[nraw], e);
        if (got < 0) goto out;
        nraw += got > 0; /* duplicate names: resolve() */
        p += len + (nl ? 1 : 0);
    }
    if (!nraw) { err_set(e, "%s: no layers", path); goto out; }
    if (resolve(n, raw, nraw, path, e)) goto out;
    if (net_set_input(n, n->layers[0].u.input.h, n->layers[0].u.input.w, e)) goto out;
    rc = 0;
out:
    free(raw);
    if (rc) net_free(n);
    return rc;
}

int net_load(net *n, const char *path, err *e)
{
    memset(n, 0, sizeof *n);
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(e, "%s: cannot open net file (%s)", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (size < 0 || size > (1 << 24)) { fclose(f); return err_set(e, "%s: not a net file (size)", path); }
    char *text = err_calloc((size_t)size + 1, 1);
    size_t got = fread(text, 1, (size_t)size, f);
    fclose(f);
    text[got] = 0;
    if (memchr(text, 0, got)) { free(text); return err_set(e, "%s: not a text file", path); }
    int rc = net_parse(n, text, path, e);
    free(text);
    return rc;
}

static int by_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* "unknown net 'VGG16' (did you mean vgg16? nets: ...)": the shipped nets of dir, and the one whose
 * name equals name but for case, if any. */
static int unknown_net(const char *name, const char *dir, err *e)
{
    char list[900] = "", *names[128];
    const char *close = NULL;
    int count = 0;
    DIR *d = opendir(dir);
    for (struct dirent *x; d && (x = readdir(d)) && count < 128;) {
        size_t len = strlen(x->d_name);
        if (len > 4 && !strcmp(x->d_name + len - 4, ".net")) names[count++] = strndup(x->d_name, len - 4);
    }
    if (d) closedir(d);
    qsort(names, (size_t)count, sizeof *names, by_str);
    size_t at = 0;
    for (int k = 0; k < count; k++) {
        if (!close && !strcasecmp(names[k], name)) close = names[k];
        if (at < sizeof list - 64) at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", k ? " " : "", names[k]);
    }
    int rc = err_set(e, "unknown net '%s'%s%s%s (shipped: %s; or a path to a .net file)", name, close ? " (did you mean " : "",
                     close ? close : "", close ? "?)" : "", count ? list : "none found");
    for (int k = 0; k < count; k++) free(names[k]);
    return rc;
}

int net_load_named(net *n, const char *name, err *e)
{
    size_t len = strlen(name);
    if (strchr(name, '/') || (len > 4 && !strcmp(name + len - 4, ".net"))) return net_load(n, name, e);
    const char *dir = getenv("LRCNN_NETS");
    char path[512];
    snprintf(path, sizeof path, "%s/%s.net", dir && *dir ? dir : LRCNN_SOURCE_DIR "/nets", name);
    FILE *f = fopen(path, "rb");
    if (!f) return unknown_net(name, dir && *dir ? dir : LRCNN_SOURCE_DIR "/nets", e);
    fclose(f);
    return net_load(n, path, e);
}

int net_set_input(net *n, int h, int w, err *e)
{
    if (h < 1 || w < 1) return err_set(e, "%s: image size %dx%d must be positive", n->path, h, w);
    int64_t values = 0, params = 0; /* the net's so far, per image */
    for (int i = 0; i < n->n; i++) n->layers[i].n_out = 0;
    for (int i = 0; i < n->n; i++)
        for (int j = 0; j < n->layers[i].n_in; j++) n->layers[n->layers[i].in[j]].n_out++;
    for (int i = 0; i < n->n; i++) {
        net_layer *l = &n->layers[i];
        const kind_traits *t = kind_of(l);
        char where[320];
        snprintf(where, sizeof where, "%s:%d: %s '%s'", n->path, l->line, t->name, l->name);
        l->params = l->macs = 0;
        l->rowwise = t->rowwise;
        if (l->kind == NET_INPUT) l->u.input.h = h, l->u.input.w = w;
        if (t->infer(n, i, where, e)) return -1;
        if ((int64_t)l->c * l->h > NET_MAX_LAYER_VALUES / l->w)
            return err_set(e, "%s: output %dx%dx%d per image is more than 2^36 values (at %dx%d input)", where, l->c, l->h, l->w, h, w);
        values += net_layer_values(l), params += l->params;
        if (values > NET_MAX_VALUES || params > NET_MAX_PARAMS)
            return err_set(e, "%s: the net reaches %s per image here (at %dx%d input; at most 2^%d)", where,
                           values > NET_MAX_VALUES ? "more than 2^40 output values" : "more than 2^36 parameters", h, w,
                           values > NET_MAX_VALUES ? 40 : 36);
        const net_layer *x = l->n_in ? &n->layers[l->in[0]] : NULL;
        l->inplace = t->inplace && x->n_out == 1 && x->kind != NET_INPUT;
        l->inplace_by = -1;
        if (l->inplace) n->layers[l->in[0]].inplace_by = i;
    }
    if (n->layers[n->n - 1].kind != NET_LOSS)
        return err_set(e, "%s: the last layer must be a loss (layer '%s' is not)", n->path, n->layers[n->n - 1].name);
    for (int i = 0; i + 1 < n->n; i++)
        if (!n->layers[i].n_out)
            return err_set(e, "%s:%d: layer '%s' is never used (only the loss may have no consumer)", n->path,
                           n->layers[i].line, n->layers[i].name);
    /* A cut before layer i is clean when exactly one tensor produced before i is read at or after
     * i: count, for each i, the producers p < i whose last consumer is >= i. */
    int *last = err_calloc((size_t)n->n, sizeof(int)), crossing = 0;
    for (int c = 0; c < n->n; c++)
        for (int j = 0; j < n->layers[c].n_in; j++) last[n->layers[c].in[j]] = c;
    for (int i = 1; i < n->n; i++) {
        crossing += 1; /* layer i-1 is read later (every layer but the loss has a consumer) */
        const net_layer *l = &n->layers[i - 1];
        for (int j = 0; j < l->n_in; j++)
            if (last[l->in[j]] == i - 1 && !net_input_repeats(l, j)) crossing--;
        /* never between a layer and the relu that overwrites its output in place: the next segment
         * would overwrite the tensor the previous one hands over */
        n->layers[i].cut_before = crossing == 1 && !n->layers[i].inplace;
    }
    free(last);
    n->layers[0].cut_before = false;
    return 0;
}

int64_t net_forward_values(const net *n)
{
    int64_t s = 0;
    for (int i = 0; i < n->n; i++) {
        if (kind_of(&n->layers[i])->fwd_value) s += net_layer_values(&n->layers[i]);
    }
    return s;
}
