/* ops_case: the harness of tests/test_ops.c — one layer under test inside a small net (its shapes
 * from the loader, as everywhere else), random inputs kept away from kinks, the call on whole maps,
 * the objective J = sum(y * r) and its central differences, the analytic backward, and the one
 * comparison every check prints through. The tolerances of every check live here, each with why. */
#ifndef LRCNN_OPS_CASE_H
#define LRCNN_OPS_CASE_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/ops.h"

/* --- tolerances (all of them) ----------------------------------------------------------------
 * Finite differences run the fp32 kernels and difference J in double, with the step the floats
 * actually took ((x + e) - (x - e) after rounding). Every kind but bn and loss is linear or
 * piecewise linear in what is perturbed, so a large step costs no truncation error while it
 * divides the fp32 rounding noise of the few outputs a perturbation changes (~1e-7 relative each)
 * by more; for bn and the loss the O(e^2) truncation at e = 1e-2 stays near 1e-4 relative. The
 * inputs of relu and maxpool keep more than e away from their kinks (zero, ties). An element passes
 * when |oc_analytic - fd| <= FD_RTOL * |fd| + FD_ATOL * max|fd| (the absolute part is the noise floor
 * for gradients near zero, scaled by the tensor's own magnitude). */
#define FD_EPS 1e-2f
#define FD_RTOL 1e-2
#define FD_ATOL 1e-3
/* Bands do the same arithmetic on the same values, so forward rows are bitwise equal except
 * through sgemm: OpenBLAS 0.3.21's SkylakeX kernel runs a small product (M*N*K small, as a band of
 * these small layers' is) through its small-matrix kernels, which sum in another order than the
 * blocked kernel a whole map's product takes (measured: an 8 x 200 x 576 product against the same
 * columns of the 8 x 2304 x 576 one, 1478 of 1600 entries differ; 64 x 100 x 576 and larger, and
 * every shape under the Sandybridge kernel, none; Haswell's differs on large ones too). Those
 * elements differ in the last bits: relative to the element, or to the tensor's largest value
 * where the element is a sum that cancels. */
#define BAND_FWD_TOL 1e-6
/* Backward over bands adds per-band partial sums (dw, and dx where windows overlap) in another
 * order than one whole-map product: fp32 reassociation, relative to the element and, for sums
 * that cancel, to the tensor's largest value. */
#define BAND_BWD_TOL 1e-5
/* Optimizers: the same fp32 formulas as PyTorch, up to a few ulps of evaluation order. Adam's
 * moments differ more: ops.h passes beta1 and beta2 as floats, so 1 - beta is 1 - 0.999f
 * (0.000999987) where PyTorch rounds the double 1 - 0.999 (0.00100000005), 1.3e-5 apart relative. */
#define OPT_TOL 2e-6
/* Batch-norm statistics against a double reference: a double sum rounded once, then a few fp32
 * operations (the running-average update). */
#define STAT_TOL 1e-6
/* A convolution against a direct double-precision reference: fp32 sums of a few hundred products
 * (K = C_in * k * k), each rounded ~1e-7 relative, in sgemm's order; relative to the element and,
 * for sums that cancel, to the tensor's largest value. */
#define REF_TOL 1e-5
#define OPT_MOMENT_TOL 3e-5

/* Worst differences seen per test family, for the summary. */
typedef struct { double abs, rel; } worst;

/* --- one layer under test -------------------------------------------------------------------------
 * A layer is tested inside a net text (IN, the layer called "t", END), so its shapes and window come
 * from the loader (sim/net/load.c) as everywhere else. */

#define IN "input x c=3 h=9 w=8\n"
#define KEY 0x5eedULL /* dropout's masks */
#define END "loss end\n"

typedef struct {
    net net;
    const net_layer *l;
    int L, n_in;
    ten x[NET_MAX_IN], y, dx[NET_MAX_IN], dy; /* whole maps: (N, C, H, W) */
    float *r;                                  /* J's weights, (N, C_out, H_out, W_out); also dy */
    float *w, *dw;                             /* parameters and their gradient */
    int64_t nw;
    int64_t *argmax;
    uint8_t *mask; /* dropout's, drawn with KEY */
    float *stats, *running, *probs, loss;
    int64_t *labels;
    float *ws;
    int64_t ws_bytes; /* its size: what sched_workspace_bytes() budgets */
    ops_bn bn;
} lcase;

/* Checks that failed so far, and the worst differences per family. */
extern int oc_failures;
extern worst oc_w_fd, oc_w_band_fwd, oc_w_band_bwd, oc_w_ref, oc_w_opt;

/* Fails where |got - want| > rtol * |want| + atol * max|want|; prints one line either way. */
void oc_compare(worst *acc, const char *what, const float *got, const float *want, int64_t n, double atol, double rtol);
void oc_expect(bool ok, const char *what);
double oc_urand(void); /* [0, 1), a fixed sequence */
float oc_frand(float lo, float hi);
int64_t oc_ten_len(const ten *t);
ten oc_ten_new(int n, int c, int h, int w, int row0);
/* The net `text` with its layer "t" under test, batch N, bn mode bn; inputs, weights and r random. */
void oc_init(lcase *k, const char *text, int N, ops_bn bn);
void oc_free(lcase *k);
/* The call on whole maps, output rows [0, h). */
ops_call oc_call(lcase *k);
/* J = sum(y * r) (the loss layer: the loss). */
double oc_objective(lcase *k);
/* Central differences of J over every element of p (n values). */
void oc_fd_grad(lcase *k, float *p, int64_t n, float *fd);
/* Backward on whole maps into dx views full of garbage (!dx_acc must overwrite) and a zeroed dw. */
void oc_analytic(lcase *k);
bool oc_same_bits(const float *a, const float *b, int64_t n);
/* Test 2 of test_ops.c (ops_band.c): layer `text` at batch N on bands of its output rows, an
 * uneven partition and then a row a band, each against the whole maps. */
void oc_band_case(const char *name, const char *text, ops_bn bn, int N);
/* A view shaped like whole-map `like` holding rows [lo, hi): copied from the whole-map values
 * src_full, or filled with `fill` when src_full is NULL. */
ten oc_band_view(const ten *like, const float *src_full, int lo, int hi, float fill);

#endif
