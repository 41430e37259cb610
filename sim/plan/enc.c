/* enc: see enc.h. Sizes follow the codecs' formats (engine/cpu/codec_cpu.c) and ZFP's own rules
 * for 2-d fp32 fields (zfp_stream_set_rate, zfp_stream_maximum_size in ZFP 1.0). */
#include "sim/plan/enc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *names[ENC_NKIND] = {"none", "sign", "argmax", "sparse", "fp16", "bf16", "fp8", "zfp-rate", "zfp-acc"};
const char *enc_name(enc_kind k) { return names[k]; }

enc_kind enc_kind_named(const char *name)
{
    for (int k = 0; k < ENC_NKIND; k++)
        if (!strcmp(names[k], name)) return (enc_kind)k;
    return ENC_NKIND;
}

bool enc_lossless(enc_kind k) { return k == ENC_NONE || k == ENC_SIGN || k == ENC_ARGMAX || k == ENC_SPARSE; }
bool enc_data_sized(enc_kind k) { return k == ENC_SPARSE || k == ENC_ZFP_ACC; }

/* A number in [lo, hi] (hi inclusive), finite. */
static int parse_real(const char *what, const char *v, double lo, bool lo_open, double hi, double *out, err *e)
{
    char *end;
    double x = strtod(v, &end);
    if (!*v || *end || !isfinite(x) || x > hi || x < lo || (lo_open && x == lo))
        return err_set(e, "%s=%s is not a number in %s%g, %g]", what, v, lo_open ? "(" : "[", lo, hi);
    *out = x;
    return 0;
}

static int parse_gist(enc_mod *m, char *args, err *e)
{
    bool named = false;
    for (char *at, *a = strtok_r(args, ":", &at); a; a = strtok_r(NULL, ":", &at)) {
        if (!strcmp(a, "binarize")) m->binarize = named = true;
        else if (!strcmp(a, "sparse")) m->sparse = named = true;
        else if (!strncmp(a, "density=", 8)) {
            if (parse_real("density", a + 8, 0, true, 1, &m->density, e)) return -1;
        } else
            return err_set(e, "gist takes binarize, sparse and density=D, not '%s'", a);
    }
    if (!named) m->binarize = m->sparse = true;
    return 0;
}

static int parse_zfp(enc_mod *m, char *args, err *e)
{
    for (char *at, *a = strtok_r(args, ":", &at); a; a = strtok_r(NULL, ":", &at)) {
        if (!strncmp(a, "rate=", 5)) {
            if (parse_real("rate", a + 5, 1, false, 32, &m->rate, e)) return -1;
        } else if (!strncmp(a, "acc=", 4)) {
            if (parse_real("acc", a + 4, 0, true, 1, &m->acc, e)) return -1;
        } else if (!strncmp(a, "ratio=", 6)) {
            if (parse_real("ratio", a + 6, 1, false, 1e6, &m->ratio, e)) return -1;
        } else if (!strncmp(a, "adapt=", 6)) {
            if (parse_real("adapt", a + 6, 0, true, 1, &m->adapt, e)) return -1;
        } else if (!strncmp(a, "every=", 6)) {
            double w = 0;
            if (parse_real("every", a + 6, 1, false, 1e6, &w, e)) return -1;
            if (w != floor(w)) return err_set(e, "every=%s is not a whole number of iterations", a + 6);
            m->every = (int)w;
        } else
            return err_set(e, "zfp takes rate=R or acc=E (and with acc: ratio=X, adapt=T, every=W), not '%s'", a);
    }
    if ((m->rate > 0) == (m->acc > 0)) return err_set(e, "zfp needs exactly one of rate=R (bits per value) and acc=E (error bound)");
    if (m->rate > 0 && m->ratio != ENC_DEFAULT_RATIO) return err_set(e, "zfp: ratio= predicts acc= sizes; rate=R fixes the size itself");
    if (m->rate > 0 && (m->adapt > 0 || m->every != ENC_DEFAULT_EVERY))
        return err_set(e, "zfp: adapt= and every= adapt an error bound (acc=E); rate=R has none");
    if (m->every != ENC_DEFAULT_EVERY && !(m->adapt > 0)) return err_set(e, "zfp: every=W says how often adapt=T adapts; give adapt=T");
    m->format = m->rate > 0 ? ENC_ZFP_RATE : ENC_ZFP_ACC;
    return 0;
}

int enc_mod_parse(enc_mod *m, const char *text, err *e)
{
    memset(m, 0, sizeof *m);
    m->density = ENC_DEFAULT_DENSITY, m->ratio = ENC_DEFAULT_RATIO, m->every = ENC_DEFAULT_EVERY;
    char buf[128];
    if (strlen(text) >= sizeof buf) return err_set(e, "modifier '%.40s...' is too long", text);
    snprintf(buf, sizeof buf, "%s", text);
    char *colon = strchr(buf, ':'), *args = colon ? colon + 1 : NULL;
    if (colon) *colon = 0;
    if (colon && !*args) return err_set(e, "modifier '%s' has an empty argument list after ':'", text);
    if (!strcmp(buf, "gist")) {
        m->kind = ENC_MOD_GIST;
        return args ? parse_gist(m, args, e) : (m->binarize = m->sparse = true, 0);
    }
    if (!strcmp(buf, "dpr")) {
        m->kind = ENC_MOD_DPR;
        static const struct { const char *name; enc_kind k; } formats[] = {{"fp16", ENC_FP16}, {"bf16", ENC_BF16}, {"fp8", ENC_FP8}};
        m->format = ENC_FP16;
        if (!args) return 0;
        for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
            if (!strcmp(args, formats[i].name)) return m->format = formats[i].k, 0;
        return err_set(e, "dpr:%s is not one of fp16 bf16 fp8", args);
    }
    if (!strcmp(buf, "zfp")) {
        m->kind = ENC_MOD_ZFP;
        if (!args) return err_set(e, "zfp needs rate=R (bits per value) or acc=E (error bound), e.g. zfp:rate=8");
        return parse_zfp(m, args, e);
    }
    return err_set(e, "unknown modifier '+%s' (known: gist, dpr, zfp)", buf);
}

void enc_mod_describe(const enc_mod *m, char *buf, size_t len)
{
    switch (m->kind) {
    case ENC_MOD_GIST: {
        const char *which = m->binarize && m->sparse ? "" : m->binarize ? "binarize" : "sparse";
        if (m->sparse && m->density != ENC_DEFAULT_DENSITY)
            snprintf(buf, len, "gist:%s%sdensity=%g", which, *which ? ":" : "", m->density);
        else
            snprintf(buf, len, "gist%s%s", *which ? ":" : "", which);
        break;
    }
    case ENC_MOD_DPR: snprintf(buf, len, "dpr:%s", enc_name(m->format)); break;
    case ENC_MOD_ZFP:
        if (m->format == ENC_ZFP_RATE) snprintf(buf, len, "zfp:rate=%g", m->rate);
        else if (m->adapt > 0) snprintf(buf, len, "zfp:acc=%g:ratio=%g:adapt=%g:every=%d", m->acc, m->ratio, m->adapt, m->every);
        else snprintf(buf, len, "zfp:acc=%g:ratio=%g", m->acc, m->ratio);
        break;
    }
}

int enc_argmax_bits(const net_layer *l)
{
    int places = l->win.k * l->win.k, bits = 1;
    while ((1 << bits) < places) bits++;
    return bits;
}

int enc_zfp_block_bits(double rate)
{
    int bits = (int)floor(16 * rate + 0.5);
    return bits < 9 ? 9 : bits;
}

static int64_t zfp_blocks(enc_shape s) { return ((s.nx + 3) / 4) * ((s.ny + 3) / 4); }

/* bits rounded up to ZFP's 64-bit stream words, in bytes */
static int64_t words(int64_t bits) { return (bits + 63) / 64 * 8; }

int64_t enc_image_bytes(enc_kind k, const enc_mod *m, enc_shape s)
{
    int64_t n = s.nx * s.ny, bitmap = (n + 7) / 8;
    switch (k) {
    case ENC_NONE: return n * 4;
    case ENC_SIGN: return bitmap;
    case ENC_ARGMAX: return (n * s.bits + 7) / 8;
    case ENC_SPARSE: return bitmap + 4 * (int64_t)ceil(m->density * (double)n);
    case ENC_FP16:
    case ENC_BF16: return n * 2;
    case ENC_FP8: return n;
    case ENC_ZFP_RATE: return words(zfp_blocks(s) * enc_zfp_block_bits(m->rate));
    case ENC_ZFP_ACC: return (int64_t)ceil((double)(n * 4) / m->ratio);
    default: CHECK(0); return 0;
    }
}

int64_t enc_header_bytes(enc_kind k, enc_shape s)
{
    return k == ENC_SPARSE ? 8 * (int64_t)s.images : k == ENC_ZFP_ACC ? 8 + 8 * (int64_t)s.images : 0;
}

/* Bytes of a map's encoding that do not depend on its values: the header, and per image the sign
 * mask of a lossy encoding of a relu output and sparse storage's bitmap. */
static int64_t fixed_bytes(enc_kind k, enc_shape s)
{
    int64_t bitmap = (s.nx * s.ny + 7) / 8;
    return enc_header_bytes(k, s) + s.images * ((s.mask ? bitmap : 0) + (k == ENC_SPARSE ? bitmap : 0));
}

/* The whole count a fraction of a total predicts: rounded up, unless it is a whole number up to
 * the rounding of the division that made it (a measured factor gives back the measured count). */
static int64_t count_of(double x)
{
    double r = nearbyint(x);
    return fabs(x - r) <= 1e-6 * (r > 1 ? r : 1) ? (int64_t)r : (int64_t)ceil(x);
}

int64_t enc_bytes(enc_kind k, const enc_mod *m, enc_shape s)
{
    double values = (double)s.images * (double)(s.nx * s.ny);
    /* the data-sized kinds are predicted for the whole map, so a measured factor reproduces it */
    if (k == ENC_SPARSE) return fixed_bytes(k, s) + 4 * count_of(m->density * values);
    if (k == ENC_ZFP_ACC) return fixed_bytes(k, s) + count_of(4 * values / m->ratio);
    return fixed_bytes(k, s) + s.images * enc_image_bytes(k, m, s);
}

double enc_factor(enc_kind k, const enc_mod *m) { return k == ENC_SPARSE ? m->density : k == ENC_ZFP_ACC ? m->ratio : 0; }

enc_mod enc_with_factor(const enc_mod *m, enc_kind k, double f)
{
    enc_mod r = *m;
    if (k == ENC_SPARSE) r.density = f;
    if (k == ENC_ZFP_ACC) r.ratio = f;
    return r;
}

double enc_measured_factor(enc_kind k, enc_shape s, int64_t bytes)
{
    double values = (double)s.images * (double)(s.nx * s.ny), data = (double)(bytes - fixed_bytes(k, s));
    if (k == ENC_SPARSE) return data / 4 / values;
    if (k == ENC_ZFP_ACC) return data > 0 ? 4 * values / data : 0;
    return 0;
}

void enc_calib_add(enc_calib *c, const char *layer, enc_kind k, double acc, double values, double f)
{
    if (!enc_data_sized(k) || !(f > 0) || !(values > 0)) return; /* a map of zeros says nothing of a ratio */
    enc_calib_entry *x = NULL;
    for (int i = 0; i < c->n && !x; i++)
        if (c->e[i].kind == k && c->e[i].acc == acc && !strcmp(c->e[i].layer, layer)) x = &c->e[i];
    if (!x) {
        if (c->n == c->cap) {
            c->cap = c->cap ? 2 * c->cap : 16;
            c->e = err_realloc(c->e, (size_t)c->cap * sizeof *c->e);
        }
        x = &c->e[c->n++];
        *x = (enc_calib_entry){.kind = k, .acc = k == ENC_ZFP_ACC ? acc : 0};
        snprintf(x->layer, sizeof x->layer, "%s", layer);
    }
    x->values += values;
    x->stored += k == ENC_SPARSE ? f * values : values / f;
    c->maps++;
}

double enc_calib_factor(const enc_calib *c, const char *layer, enc_kind k, double acc)
{
    for (int i = 0; c && i < c->n; i++) {
        const enc_calib_entry *x = &c->e[i];
        if (x->kind != k || (k == ENC_ZFP_ACC && x->acc != acc) || strcmp(x->layer, layer)) continue;
        return k == ENC_SPARSE ? x->stored / x->values : x->values / x->stored;
    }
    return 0;
}

void enc_calib_free(enc_calib *c)
{
    free(c->e);
    memset(c, 0, sizeof *c);
}

/* ZFP's worst case for an fp32 block of 16 values: 1 + 8 exponent bits, 15 group tests, 16 x 32
 * bit planes; plus its largest header (148 bits) */
int64_t enc_zfp_max_bytes(enc_shape s) { return words(148 + zfp_blocks(s) * (1 + 8 + 15 + 16 * 32)); }

int64_t enc_scratch_bytes(enc_kind k, enc_shape s)
{
    return k == ENC_ZFP_ACC ? enc_header_bytes(k, s) + s.images * enc_zfp_max_bytes(s) : 0;
}
