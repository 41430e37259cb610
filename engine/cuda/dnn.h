/* dnn: every cuDNN call the CUDA backend makes for one convolution step, decided on the host as
 * data — which rows, which descriptor (sizes and strides), which pointer, which copies around it —
 * so that a CPU test can build the calls of every step of every plan and check them against the
 * rules cuDNN 9 enforces, without a GPU (tests/test_dnn.c). ops_cuda.c only executes a plan.
 *
 * The rules (seen on an H200 with cuDNN 9.14, and the limits of its descriptor API):
 *   - forward convolution takes strided views: a band's rows inside a larger map, read and written
 *     in place (observed on VGG-16 and ResNet-50 bands), but at stride 1 far slower than on packed
 *     tensors, so by default its slices are staged too (DNN_PACK_FWD below);
 *   - backward-data, backward-filter and bias backward take only tensors packed per image (C
 *     stride H*W, H stride W): on a slice of a map's rows every algorithm answered
 *     CUDNN_STATUS_NOT_SUPPORTED. An operand that is such a slice is copied into a packed staging
 *     buffer (x and dy), or computed into one and then added into its rows (dx, beta = 0 there);
 *     where the buffer holds a few rows below the slice that no window reads (ResNet's 1x1
 *     stride-2 convolution reads 13 of a 14-row map), the view is widened to them instead;
 *   - a descriptor has at most 2^31 - 1 elements and its largest offset fits an int: a step over
 *     more is split into runs of images (its staging is then a run's).
 * Rows: conv_split.h cuts a band into pieces cuDNN can compute with its one symmetric padding; a
 * piece that computes more rows than the band's writes them to staging first (forward) or takes
 * its gradient zero-padded (backward). Staging lives at the end of the step's workspace, each
 * operand 256-byte aligned; the workspace model (ops_cuda.c) adds it to the algorithm's, so the
 * schedule accounts for every byte.
 * Accumulation (engine/ops.h): forward writes y's rows (beta 0); backward adds into dw and db (beta
 * 1) and into dx (beta 1, or a staged dx added row by row), after zeroing dx's whole buffer unless
 * the step accumulates into it; a step that does not, and whose one backward-data call writes the
 * whole dx in place (a `layer` step, most bands), takes beta 0 there instead of the zeros.
 * Not here: cuDNN itself, algorithms (ops_cuda.c), bias forward (a kernel of ours). */
#ifndef LRCNN_DNN_H
#define LRCNN_DNN_H

#include <stdbool.h>
#include <stdint.h>

#include "sim/lower/sched.h"

/* A 4-d fp32 tensor as a cuDNN descriptor states it: sizes, and strides in elements (W's is 1). */
typedef struct {
    int n, c, h, w;
    int64_t ns, cs, hs;
} dnn_tensor;

/* Where an operand starts: elements from the first element of one of the step's buffers (the views
 * the executor passes: x, y, dx, dy) or of the staging area. */
typedef enum { DNN_X, DNN_Y, DNN_DX, DNN_DY, DNN_STAGE, DNN_NBASE } dnn_base;
typedef struct {
    dnn_base base;
    int64_t at;
} dnn_ref;

typedef enum {
    DNN_ZERO,            /* dst: planes x len floats, dst_stride apart, = 0 */
    DNN_COPY,            /* dst (+= when acc) src: planes x len floats, each side its own stride */
    DNN_CONV_FWD,        /* y = conv(x) */
    DNN_CONV_BWD_DATA,   /* x-side (dx) (+)= conv^T(dy) */
    DNN_CONV_BWD_FILTER, /* dw += x (*) dy */
    DNN_CONV_BWD_BIAS    /* db += sum of dy */
} dnn_op;

typedef struct {
    dnn_op op;
    dnn_ref dst, src;                /* ZERO, COPY */
    int64_t planes, len, dst_stride, src_stride;
    bool acc;                        /* COPY: add; BWD_DATA: beta = 1 */
    dnn_tensor xt, yt;               /* convolutions: the input side (x or dx) and the output side (y or dy) */
    dnn_ref xr, yr;
    int pad;                         /* the piece's row padding (the W padding is the layer's) */
} dnn_call;

typedef struct {
    dnn_call *call;
    int n, cap;
    int64_t stage_bytes;             /* the staging area the calls use, a multiple of 256 */
    int images;                      /* images per run of calls (the batch, unless split) */
} dnn_plan;

/* One convolution step as the executor sees it: the layer, its input map, the output rows, and the
 * rows each buffer holds (sim/lower/sched.h's sched_ws_query says the same of a schedule's step). */
typedef struct {
    const net_layer *l;              /* NET_CONV */
    int c_in, in_h, in_w;            /* its input map */
    int batch;
    bool backward;
    band_rows out;                   /* output rows computed, or whose gradient is taken */
    band_rows x;                     /* rows input 0's buffer holds */
    band_rows y;                     /* forward: the output's; backward: its gradient's */
    band_rows dx;                    /* backward: input 0's gradient's ({0, 0}: not wanted) */
    bool dw;                         /* backward: the weight (and bias) gradient wanted */
    bool dx_acc;                     /* backward: dx is added to (else its whole buffer is zeroed first) */
    int64_t limit;                   /* the most elements (and largest offset) a descriptor may have; 0:
                                        cuDNN's, DNN_MAX_ELEMS (tests set less to split small steps) */
} dnn_step;

/* What the calls do with an operand that is a slice of a larger map (flags):
 *   DNN_PACK      widen or copy the slices that backward refuses (always, but for the contract
 *                 test's negative control, which must then fail);
 *   DNN_PACK_FWD  a forward piece's x or y that is such a slice goes through packed staging too (x
 *                 copied in; y computed there and copied out), as backward's operands do. cuDNN
 *                 takes the slices, but slowly: on the H200 (cuDNN 9.14, ff062c3's campaign) a row
 *                 plan's forward convolutions took 3.1x `layer`'s kernel time at the same FLOPs on
 *                 ResNet-50 b32 `2ps:4`, while its backward ones, all packed, took 1.2x; by layer,
 *                 a band call writing a slice took 8-17x its share of `layer`'s time on the 1x1
 *                 stride-1 convolutions, 3-6x on the 3x3 ones, 1.1-1.5x on the stride-2 ones,
 *                 VGG-16's conv1_1 26x. The copies cost a pass over each band's x and y, and no
 *                 peak of VGG-16, ResNet-50, MobileNetV2 or the U-Net at batch 8 and 32 under the
 *                 row presets moves (the staging sits beside forward steps; backward's is larger).
 *                 Inferred from that profile, not yet timed on a GPU. */
enum { DNN_PACK = 1, DNN_PACK_FWD = 2 };

/* The flags runs and the workspace model plan with, so that both stage the same bytes: DNN_PACK |
 * DNN_PACK_FWD, or DNN_PACK alone where the environment has LRCNN_CUDNN_PACK_FWD=0 (the forward
 * on slices as cuDNN takes them: to time one against the other). */
int dnn_pack_policy(void);

/* Whether t is packed per image (C stride H*W, H stride W, N stride C*H*W): not a slice. */
bool dnn_packed(const dnn_tensor *t);

/* The calls of step s, in order, under the pack flags above. -1 with why (one line) when a single
 * image of one operand is past cuDNN's 2^31 limit. */
int dnn_conv_plan(const dnn_step *s, int pack, dnn_plan *p, char *why, size_t len);
void dnn_plan_free(dnn_plan *p);

/* Checks plan p of step s against the rules above and against itself (every operand inside its
 * buffer or the staging area, sizes agreeing with the convolution's arithmetic, no two staged
 * operands of a call overlapping); 0, or -1 with the first broken rule in why (one line). */
int dnn_check(const dnn_plan *p, const dnn_step *s, char *why, size_t len);

/* The steps a workspace query of net n stands for (sim/lower/sched.h): the step itself where its buffers
 * are known (q->held), else the band at its first, middle and last place, every operand holding
 * just the rows it reads or writes. Returns how many (0: not a convolution). */
int dnn_query_steps(const net *n, const sched_ws_query *q, dnn_step out[3]);

/* The step that schedule s's convolution step t (FWD or BWD of a NET_CONV) hands the backend: the
 * rows of the buffers the executor passes (engine/exec.c's views). */
dnn_step dnn_step_of(const net *n, const sched *s, const sched_step *t);

/* The most `bytes` answers for the plans of q's steps (0 where none can be planned). */
int64_t dnn_query_most(const net *n, const sched_ws_query *q, int64_t (*bytes)(const dnn_step *s, const dnn_plan *p));
/* The staging bytes of q: the most any of its steps' plans uses. */
int64_t dnn_query_stage_bytes(const net *n, const sched_ws_query *q);

/* One tensor as printed in messages: "8x512x13x28 (strides 401408,784,28)". */
void dnn_tensor_str(const dnn_tensor *t, char *out, size_t len);

/* The largest element count and offset a descriptor may have. */
#define DNN_MAX_ELEMS ((int64_t)INT32_MAX)

#endif
