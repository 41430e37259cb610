/* Encodings of kept maps (sim/plan/enc.h) run by the engine, against the same plan without them.
 *
 *   lossless  +gist, +gist:binarize and +gist:sparse: the loss and every parameter gradient equal
 *             the plain plan's bit for bit (memcmp), on layer, checkpoint, offload and both row
 *             policies. With only fixed-size encodings (binarize) the measured peak equals the
 *             replay's, byte for byte per category; with sparse the measured encoded bytes
 *             replace the predicted density, and the test prints both.
 *   lossy     +dpr (fp16, bf16, fp8) and +zfp (rate, acc): the relative gradient deviation from
 *             the plain plan per parameter tensor (the worst printed per encoding, every layer
 *             with -v). Where nothing is recomputed from an encoded map (layer, vdnn-all) it must
 *             stay under a bound per encoding (fp16 1e-2, bf16 5e-2, fp8 0.5, zfp:rate=16 1e-2,
 *             rate=8 0.2, acc=1e-4 1e-2, acc=1e-2 0.2, the loosest finite) and grow as an
 *             encoding loosens (fp16 < bf16 < fp8; zfp rate 16 < 8 < 4; acc 1e-4 < 1e-2 < 0.5).
 *             Where the backward recomputes from an encoded checkpoint or 2PS boundary (ckpt-sqrt,
 *             2ps:3) an error moves recomputed relu masks and pool winners, a discrete change, so
 *             only finiteness and the ends of each family (loosest >= tightest) are required;
 *             the deviations are printed for the report. With the fixed-size encodings (dpr,
 *             zfp:rate) the measured peak equals the replay's.
 * A plan with nothing its modifier can encode is refused at lowering (exit 2 in the commands);
 * here such a pairing is skipped and counted, and each net must leave at least one pairing run.
 * Usage: test_encode lossless NET IMAGE BATCH
 *        test_encode lossy NET IMAGE BATCH [-v] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/blas_cpu.h"
#include "engine/threads.h"
#include "sim/net/kind.h"
#include "sim/net/load.h"
#include "tests/harness.h"

static int failures, skipped;
static bool verbose;

/* One SGD iteration of `text` (seed 3's weights, synthetic batch 0 of seed 7), gradients kept;
 * 1 when the plan's modifier encodes nothing here (skipped), -1 on any other error. */
static int run_one(const net *n, const char *text, int batch, outcome *o)
{
    err e;
    if (!harness_run(n, text, batch, &ops_cpu, o, &e)) return 0;
    const char *nothing = strstr(e.msg, "encodes nothing");
    printf(nothing ? "skip %-40s %s\n" : "FAIL %s: %s\n", text, nothing ? nothing : e.msg);
    return nothing ? 1 : -1;
}

/* Whether every encoding of the schedule has a fixed size, and the encoded bytes it predicted and
 * the engine measured (data-sized ones differ). */
static bool fixed_sizes(const outcome *o, int64_t *predicted, int64_t *measured)
{
    bool fixed = true;
    *predicted = *measured = 0;
    for (int b = 0; b < o->r.s.n_buf; b++) {
        const sched_buf *sb = &o->r.s.bufs[b];
        if (sb->kind != BUF_ENC) continue;
        fixed &= !enc_data_sized(sb->enc);
        *predicted += sb->bytes, *measured += o->r.x.bytes[b];
    }
    return fixed;
}

/* Relative deviation ||g - ref|| / ||ref|| of each parameter tensor (layer by layer, as run.grads),
 * into dev[layer]; returns the worst. */
static double deviations(const net *n, const float *g, const float *ref, double *dev, int *worst)
{
    double max = 0;
    int64_t at = 0;
    *worst = -1;
    for (int L = 0; L < n->n; L++) {
        kind_tensor t[KIND_MAX_TENSORS];
        int nt = kind_tensors(n, L, t);
        dev[L] = 0;
        for (int k = 0; k < nt; k++) {
            if (t[k].running) continue;
            int64_t count = 1;
            for (int d = 0; d < t[k].rank; d++) count *= t[k].dims[d];
            double num = 0, den = 0;
            for (int64_t i = 0; i < count; i++) {
                double x = (double)g[at + i] - ref[at + i];
                num += x * x, den += (double)ref[at + i] * ref[at + i];
            }
            double r = den > 0 ? sqrt(num / den) : sqrt(num);
            if (!isfinite(r)) r = INFINITY;
            if (r > dev[L]) dev[L] = r;
            at += count;
        }
        if (nt && (*worst < 0 || dev[L] > max)) max = dev[L], *worst = L;
    }
    return max;
}

static void lossless(const net *n, int batch)
{
    const char *plans[] = {"layer", "ckpt-sqrt", "vdnn-all", "vdnn-conv", "2ps:2", "2ps:3", "overl:2", "overl:3", "2ps-h"};
    const char *mods[] = {"gist", "gist:binarize", "gist:sparse"};
    int ran = 0;
    for (size_t i = 0; i < sizeof plans / sizeof *plans; i++) {
        outcome ref;
        if (run_one(n, plans[i], batch, &ref)) { failures++; continue; }
        for (size_t m = 0; m < sizeof mods / sizeof *mods; m++) {
            char text[128];
            snprintf(text, sizeof text, "%s+%s", plans[i], mods[m]);
            outcome o;
            int rc = run_one(n, text, batch, &o);
            if (rc) { rc > 0 ? skipped++ : failures++; continue; }
            ran++;
            int64_t np = net_params(n), pred, meas;
            bool same = o.r.sum.loss0 == ref.r.sum.loss0 && !memcmp(o.r.grads, ref.r.grads, (size_t)np * sizeof(float));
            bool fixed = fixed_sizes(&o, &pred, &meas), mem = !fixed || harness_mem_equal(&o);
            bool lower = o.r.sum.peak <= ref.r.sum.peak || !fixed;
            printf("%s %-14s %-28s gradients %-9s peak %11lld (plain %11lld) = replay %-3s encoded %lld predicted %lld\n",
                   same && mem && lower ? "ok  " : "FAIL", n->name, text, same ? "identical" : "DIFFER", (long long)o.r.sum.peak,
                   (long long)ref.r.sum.peak, !fixed ? "n/a" : mem ? "yes" : "NO", (long long)meas, (long long)pred);
            failures += !(same && mem && lower);
            harness_drop(&o);
        }
        harness_drop(&ref);
    }
    if (!ran) printf("FAIL %s: no plan had anything gist encodes\n", n->name), failures++;
}

typedef struct {
    const char *mod;
    double bound; /* the worst relative deviation allowed (INFINITY: finite is enough) */
} lossy_case;

static void lossy(const net *n, int batch)
{
    /* in three families, each from tightest to loosest: deviations must not decrease along one */
    const lossy_case cases[] = {{"dpr:fp16", 1e-2}, {"dpr:bf16", 5e-2},       {"dpr:fp8", 0.5},
                                {"zfp:rate=16", 1e-2}, {"zfp:rate=8", 0.2},    {"zfp:rate=4", INFINITY},
                                {"zfp:acc=1e-4", 1e-2}, {"zfp:acc=1e-2", 0.2}, {"zfp:acc=0.5", INFINITY}};
    const char *plans[] = {"layer", "vdnn-all", "2ps:3", "ckpt-sqrt"};
    const bool recomputes[] = {false, false, true, true};
    double *dev = calloc((size_t)n->n, sizeof(double));
    for (size_t i = 0; i < sizeof plans / sizeof *plans; i++) {
        outcome ref;
        if (run_one(n, plans[i], batch, &ref)) { failures++; continue; }
        double prev = 0, first = 0;
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            char text[128];
            snprintf(text, sizeof text, "%s+%s", plans[i], cases[c].mod);
            outcome o;
            int rc = run_one(n, text, batch, &o);
            if (rc) { rc > 0 ? skipped++ : failures++; continue; }
            int worst;
            double d = deviations(n, o.r.grads, ref.r.grads, dev, &worst);
            int64_t pred, meas;
            bool fixed = fixed_sizes(&o, &pred, &meas), mem = !fixed || harness_mem_equal(&o);
            if (c % 3 == 0) first = d;
            bool bounded = recomputes[i] ? isfinite(d) : d <= cases[c].bound || (isinf(cases[c].bound) && isfinite(d));
            bool monotone = c % 3 == 0 || (recomputes[i] ? c % 3 != 2 || d >= first : d >= prev);
            bool ok = bounded && mem && monotone;
            printf("%s %-14s %-24s worst gradient deviation %.2e (%s)  encoded %lld bytes%s  peak %lld = replay %s  loss %+.2e\n",
                   ok ? "ok  " : "FAIL", n->name, text, d, worst >= 0 ? n->layers[worst].name : "-", (long long)meas,
                   fixed ? "" : " (predicted differently)", (long long)o.r.sum.peak, !fixed ? "n/a" : mem ? "yes" : "NO",
                   (double)o.r.sum.loss0 - ref.r.sum.loss0);
            if (!monotone) printf("     deviation fell from %.2e as the encoding loosened\n", recomputes[i] ? first : prev);
            if (verbose)
                for (int L = 0; L < n->n; L++)
                    if (kind_tensors(n, L, (kind_tensor[KIND_MAX_TENSORS]){0})) printf("       %-16s %.3e\n", n->layers[L].name, dev[L]);
            failures += !ok;
            prev = d;
            harness_drop(&o);
        }
        harness_drop(&ref);
    }
    free(dev);
}

int main(int argc, char **argv)
{
    engine_env_reexec(argv); /* the engine as lrcnn runs it (engine/threads.h) */
    if (argc < 5 || (strcmp(argv[1], "lossless") && strcmp(argv[1], "lossy"))) {
        fprintf(stderr, "usage: test_encode lossless|lossy NET IMAGE BATCH [-v]\n");
        return 2;
    }
    verbose = argc > 5 && !strcmp(argv[5], "-v");
    net n;
    err e;
    int image = atoi(argv[3]);
    if (net_load_named(&n, argv[2], &e) || (image && net_set_input(&n, image, image, &e))) {
        fprintf(stderr, "FAIL %s\n", e.msg);
        return 1;
    }
    if (!strcmp(argv[1], "lossless")) lossless(&n, atoi(argv[4]));
    else lossy(&n, atoi(argv[4]));
    net_free(&n);
    printf("%s (%d pairings skipped: nothing to encode)\n", failures ? "FAILED" : "all encodings as required", skipped);
    return failures != 0;
}
