/* ops: the per-backend table of layer kernels, and the one call record every kernel receives.
 *
 * Tensors are NCHW fp32 views that may hold a band of rows: `row0` is the first row of the full
 * map held, `h` how many. A kernel computing output rows [a, b) reads input row i (of a map of
 * `in_h[j]` rows) at offset i - x.row0; rows i < 0 or i >= in_h[j] are the layer's zero padding
 * (image borders); any other row must lie inside the view (band geometry guarantees it).
 * Accumulation: weight and bias gradients are always += (bands add up); an input gradient is +=
 * when dx_acc[j], otherwise the kernel overwrites the *whole* dx view (zeros where it writes
 * nothing), so the first writer of a gradient defines it. The exception is an in-place relu
 * backward (dx[0].p == dy.p): it rewrites rows [a, b) and leaves every other row alone, because
 * the buffer may be a whole map's gradient shared by bands that own the other rows.
 * Kernels never allocate: scratch comes in `ws`, sized by the schedule (sched_cfg_workspace; the CPU's model is sched_workspace_bytes()). */
#ifndef LRCNN_OPS_H
#define LRCNN_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/alloc.h"
#include "engine/algo_book.h"
#include "sim/plan/enc.h"
#include "sim/net/net.h"

typedef struct {
    float *p;        /* (n, c, h, w), contiguous */
    int n, c, h, w;
    int row0;        /* the first row of the full map held */
} ten;

/* BatchNorm: TRAIN normalizes with the statistics of the rows it is given (a whole map outside
 * row segments; a band's own under bn=per-band); FROZEN with the running ones; MAP with the whole
 * map's, gathered over the bands beforehand (`stats`), and its backward takes the whole map's
 * gradient sums from `sums` and subtracts their mean terms on rows [own_a, own_b) only. */
typedef enum { OPS_BN_TRAIN, OPS_BN_FROZEN, OPS_BN_MAP } ops_bn;

/* What a `stats` call does (sched.h: STATS, STATS_END), sums in fp64 per channel:
 *   X    sums += (sum of x, sum of x^2) over rows [a, b)
 *   DY   sums += (sum of dy, sum of dy * xhat) over rows [a, b), xhat from x and `stats`
 *   END  stats = (mean, 1 / sqrt(var + eps)) from the X sums over `count` values per channel, and
 *        the running statistics move toward them (the unbiased variance, as PyTorch) */
typedef enum { OPS_STATS_X, OPS_STATS_DY, OPS_STATS_END } ops_stats;

typedef struct {
    const net_layer *l;        /* kind and parameters (the tagged union of net.h); l->h is the full output height */
    int layer;                 /* l's index in its net (per-layer records) */
    int in_h[NET_MAX_IN];      /* full heights of the inputs */
    int in_c[NET_MAX_IN];      /* and their channels (concat: where each input's channels start) */
    int a, b;                  /* output rows [a, b) computed (forward) or back-propagated (backward) */
    ten x[NET_MAX_IN], y;      /* activations; y may alias x[0] (in-place relu) */
    ten dx[NET_MAX_IN], dy;    /* gradients; dx[j].p == NULL: not wanted (e.g. the image) */
    bool dx_acc[NET_MAX_IN];
    float *w, *dw;             /* conv: weight (c_out, c_in, k, k) then bias; fc: weight (out, in) then bias;
                                  bn: gamma (c) then beta (c) */
    int64_t *argmax;           /* maxpool: per output element, the input element (row * in_w + col) */
    uint8_t *mask;             /* dropout: per output element of rows [a, b), 1 kept, 0 dropped (NULL:
                                  not kept; the forward draws it from `key` either way) */
    uint64_t key;              /* dropout: the mask's key (engine/act.h: drop_key) */
    float *stats;              /* bn: mean (c) then inverse std (c) of the rows used; gnorm: (n * groups) each;
                                  lnorm: (n, b - a, w) each, per place */
    float *running;            /* bn: running mean (c) then running variance (c) */
    ops_bn bn;                 /* bn: which statistics (above) */
    double *sums;              /* bn MAP backward and stats calls: per-channel sums (2 * c) */
    int own_a, own_b;          /* bn MAP backward: the rows this call owns of the map's partition */
    int64_t count;             /* bn MAP: values per channel over the whole map (N * H * W) */
    bool update_running;       /* bn train forward: update running statistics (not when recomputing) */
    const int64_t *labels;     /* loss: (n) class indices */
    float *probs;              /* loss: (n, classes) softmax output */
    float *loss;               /* loss forward: mean cross-entropy written here (host memory) by the
                                  backend's next sync at the latest */
    float *ws;                 /* workspace */
    int64_t ws_bytes;          /* its size (what the backend's workspace model asked for) */
} ops_call;

/* The rows [lo, hi) of input 0 that output rows [a, b) read (net_window_rows of the layer's window),
 * clipped to the map: what a band must hold of it. */
static inline void ops_in_rows(const ops_call *c, int *lo, int *hi)
{
    net_window_rows(c->l->win, c->a, c->b, lo, hi);
    if (*lo < 0) *lo = 0;
    if (*hi > c->in_h[0]) *hi = c->in_h[0];
}

/* A product of a tensor with itself (mul of x and x): the scheduler gives it no dx[1], so dx[0]
 * takes both inputs' gradients. (add and concat, of any number of inputs: net_input_first.) */
static inline bool ops_reads_twice(const ops_call *c) { return c->l->n_in == 2 && c->l->in[0] == c->l->in[1] && !c->dx[1].p; }

/* A kept map's encoding as a codec sees it (sim/plan/enc.h): its kind, the modifier that chose it, its
 * shape per image; for an argmax, the pool's window and input width, and the first of the rows
 * held (the argmax of output row o, column ow is stored as its place in that window). */
typedef struct {
    enc_kind kind;
    const enc_mod *mod;
    enc_shape shape;
    int row0, c, w, in_w;
    net_window win;
    double bound;              /* ZFP fixed-accuracy: the absolute error bound; 0: acc x the map's range */
} ops_codec;

/* What a backend saw of the device itself during the measured (last) iteration, beyond the
 * accounting allocator: for CUDA, the device's memory as the driver, the stream-ordered pool and
 * CUPTI report it, and what the libraries chose. Plain data (it crosses run_forked's pipe). */
typedef struct {
    char name[96];                /* "NVIDIA H100 80GB HBM3" */
    char capability[8];           /* compute capability, "9.0" */
    char driver[16], runtime[16], dnn[16], blas[16]; /* versions: CUDA driver and runtime, cuDNN, cuBLAS */
    char conv_policy[96];         /* how convolutions were run: "heuristic within 256 MiB, forward slices staged"
                                     (engine/cuda/conv_cuda.h: LRCNN_CUDNN_FIND, _WS_MB, _DETERMINISTIC, _PACK_FWD) */
    int64_t context_bytes;        /* device bytes in use once the context, cuDNN and cuBLAS were up,
                                     before the first allocation (other processes' bytes included) */
    int64_t device_peak;          /* cudaMemGetInfo's bytes in use, the most at any step's end */
    int64_t pool_reserved_peak;   /* the pool's reserved high-water mark (cudaMemPoolAttrReservedMemHigh) */
    int64_t pool_used_peak;       /* the pool's in-use high-water mark (cudaMemPoolAttrUsedMemHigh): the
                                     bytes the engine allocated, so equal to the accounting's peak */
    int64_t outside_pool;         /* device bytes the backend holds beside the pool, for the run: cuBLAS's
                                     workspace, its scratch (the loss's block sums, normalization sums,
                                     codec offsets), the staged batch (stage) */
    int64_t host_arena;           /* pinned host bytes reserved for offloaded maps (one arena) */
    int64_t host_outside;         /* pinned bytes that did not fit the arena and were allocated apart (0) */
    bool profiled;                /* CUPTI ran (the fields below, and device_peak; else -1): off with --no-cupti */
    int64_t cupti_reserved_peak;  /* CUPTI: the pool's reservation plus direct allocations (engine/cuda/cuprof.h) */
    int64_t cupti_suballoc_peak;  /* CUPTI: bytes allocated from pools, as pool_used_peak */
    int64_t dropped;              /* CUPTI records dropped since the process started: not 0, its figures are incomplete */
    double kernel_us;             /* CUPTI: summed kernel time (overlapping kernels count twice) */
} ops_device;

/* Per layer, the same iteration. */
typedef struct {
    double kernel_us[2];          /* CUPTI kernel time of its forward and backward steps (recomputation and
                                     statistics included); -1 when not profiled */
    int algo[3];                  /* cuDNN algorithms (enum values): forward, backward data, backward filter; -1 none */
    int64_t ws[3];                /* their workspace bytes */
} ops_device_layer;

/* A backend: its layer kernels, where its tensors live (mem), and the few things the executor
 * does to tensors itself. Pointers the executor passes are the backend's own (device memory for
 * CUDA) except where a parameter is called host. Calls may run asynchronously; sync waits for
 * all of them. */
typedef struct {
    const char *backend;
    void (*forward)(const ops_call *c);
    void (*backward)(const ops_call *c);
    void (*stats)(const ops_call *c, ops_stats what); /* whole-map statistics over bands (bn) */
    const alloc_mem *mem;
    const sched_ws_model *ws;  /* workspace sizes to lower schedules with (NULL: the CPU's) */
    void (*upload)(void *dst, const void *host, int64_t bytes);
    void (*download)(void *host, const void *src, int64_t bytes);
    /* The batch on the device before an iteration's timer starts, as a framework's training loop
     * holds it (NULL: LOAD uploads from the host inside the iteration, as the CPU's memcpy does at
     * no extra cost): stage copies `bytes` of host memory into the backend's room for `slot` (0:
     * the images, 1: the labels), made before the first iteration and counted beside the pool, waits
     * for the copy and returns where the bytes are; LOAD then takes them
     * from there with copy, in order with the steps. */
    const void *(*stage)(int slot, const void *host, int64_t bytes);
    void (*copy)(void *dst, const void *src, int64_t bytes);
    void (*zero)(void *p, int64_t bytes);
    /* planes x len floats: d[i * d_stride + j] (+)= s[i * s_stride + j] (row copies between bands) */
    void (*copy2d)(float *d, int64_t d_stride, const float *s, int64_t s_stride, int64_t planes, int64_t len, bool acc);
    void (*sgd)(float *p, const float *g, float *state, int64_t n, double lr, double momentum);
    void (*adam)(float *p, const float *g, float *state, int64_t n, double lr, double beta1, double beta2, double eps, int t);
    void (*sync)(void);
    /* Marks the kernels launched until the next call as step `tag`'s (profiling); may be NULL. */
    void (*tag)(int tag);
    /* The encodings of kept maps (NULL: none in this backend, which then refuses plans with
     * modifiers). encode with out NULL returns the bytes the map's encoding takes (data-sized
     * kinds: the executor allocates exactly that; the codec may leave its work in scratch for the
     * call that follows), else writes it to out and returns the same count. x: fp32 values, or
     * int64 places for ENC_ARGMAX. */
    int64_t (*encode)(const ops_codec *m, const void *x, void *out, void *scratch);
    /* Which kinds encode and decode handles (NULL: all; a plan needing another is refused). */
    bool (*encodes)(enc_kind k);
    /* The sum of squares of planes x len floats at p[i * stride + j] (COMET's adaptive bound reads
     * gradient norms; NULL: the backend refuses adapt=). */
    double (*sumsq)(const float *p, int64_t stride, int64_t planes, int64_t len);
    void (*decode)(const ops_codec *m, const void *in, void *x);
    /* Before a run's first iteration, with its schedule (NULL: nothing to do): the backend sets up
     * what it keeps beside the schedule's buffers, so that no step allocates, and refuses what it
     * cannot run, -1 with e set (CUDA: its scratch and pinned host arena sized from the schedule; a
     * map past cuDNN's 2^31-element descriptors refused). */
    int (*prepare)(const net *n, const sched *s, err *e);
    /* A backend that sees the device itself (NULL: none, as the CPU): device_mark, before the
     * iteration measured, restarts its peaks; device_report, after it, fills d and layers[0 ..
     * n_layers) with what it saw since. tag(-1), which ends every layer step, is where such a
     * backend samples the device's memory. device_mark returns whether the backend profiles that
     * iteration (CUDA: CUPTI's launch records, the per-step tags and samples, which cost host time
     * on every call): then it is the profiled pass, not one of the timed ones (run.h). */
    bool (*device_mark)(void);
    void (*device_report)(ops_device *d, ops_device_layer *layers, int n_layers);
    /* A backend that measures its algorithm choices (NULL: none, as the CPU; engine/algo_book.h):
     * algos_made, the book of those measured or taken so far in this process (NULL when none);
     * algos_take, a book of earlier ones to take in place of measuring the same calls, before
     * the first schedule is lowered: -1 with e saying why where its format or device is not this
     * backend's (nothing is taken then). */
    const algo_book *(*algos_made)(void);
    int (*algos_take)(const algo_book *b, err *e);
} ops_table;

extern const ops_table ops_cpu;

/* The backend called `name` ("cpu", "cuda"), or NULL with a reason in e (not built, no device).
 * profile: let the backend watch the device (CUDA: CUPTI, device_report); the CPU has nothing to watch. */
const ops_table *ops_find(const char *name, bool profile, err *e);
/* Whether opening backend `name` opens a device: then a process that forks runs must not open it
 * itself (a CUDA context does not survive fork; engine/run.h: run_isolated). */
bool ops_on_device(const char *name);
/* 0 if backend `name` opens on this machine, else -1 with why; a device backend is opened in a
 * child process, which leaves this one free to fork. */
int ops_opens(const char *name, err *e);
/* Backend `name`'s workspace model as far as it is known without its device: the CPU's exactly;
 * CUDA's staging (engine/cuda/dnn.h) without cuDNN's algorithm workspaces. Lowering with it checks
 * a plan and predicts its host bytes exactly; a device's own predictions come from run_isolated. */
const sched_ws_model *ops_ws_estimate(const char *name);

/* Optimizers, PyTorch semantics (no weight decay). t is the 1-based step count (Adam's bias
 * correction). state: SGD momentum buffer (n); Adam first then second moment (2n).
 * Hyperparameters are doubles, as Python floats are in PyTorch: 1 - beta is formed in double and
 * only then rounded to fp32 (1 - 0.999f would differ by 1.3e-5 relative). */
void ops_sgd_step(float *p, const float *g, float *state, int64_t n, double lr, double momentum);
void ops_adam_step(float *p, const float *g, float *state, int64_t n, double lr, double beta1, double beta2, double eps,
                   int t);

#endif
