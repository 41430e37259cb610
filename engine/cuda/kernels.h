/* kernels: the CUDA backend's own kernels — what cuDNN and cuBLAS do not do in our contract (band
 * views with row offsets, argmax kept for max-pool backward, bit-compatible optimizers). All are
 * launched on the given stream and never allocate. Gathers rather than scatters wherever windows
 * overlap (pool backward), so results do not depend on thread timing. */
#ifndef LRCNN_CUDA_KERNELS_H
#define LRCNN_CUDA_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Written after every kernel launch in kernels.cu and codec.cu: in debug builds a launch that failed
 * (a bad configuration, no kernel image for this GPU) stops the program there, naming the launch;
 * release builds check once per step instead (ops_cuda.c), naming the step. */
#ifdef NDEBUG
#define LAUNCHED() ((void)0)
#else
#define LAUNCHED() k_launched(__FILE__, __LINE__)
#endif
void k_launched(const char *file, int line);
/* Whether this build holds a kernel image the current device can run (machine code for its
 * architecture, or PTX it can compile): cudaSuccess, or the error a launch would meet. */
cudaError_t k_image(void);

/* A band view (ops.h's ten): rows [row0, row0 + h) of maps with n images and c channels. */
typedef struct {
    float *p;
    int n, c, h, w, row0;
} kview;

typedef struct { int k, s, p, d; } kwin;

void k_copy2d(cudaStream_t st, float *d, int64_t ds, const float *s, int64_t ss, int64_t planes, int64_t len, bool acc);
void k_sgd(cudaStream_t st, float *p, const float *g, float *m, int64_t n, float lr, float mom);
void k_adam(cudaStream_t st, float *p, const float *g, float *m, float *v, int64_t n, float step, float bc2_sqrt, float eps,
            float omb1, float b2, float omb2);
/* y rows [a, b) (+)= bias per channel */
void k_bias(cudaStream_t st, kview y, int a, int b, const float *bias);
void k_add_fwd(cudaStream_t st, kview x0, kview x1, kview y, int a, int b);
/* mul, whole maps: y = a * b, a (C, 1, 1) input scaling the other's channels; dx += dy * o (+ dy * x2
 * when x2.p), summed over the plane into a per-channel dx */
void k_mul_fwd(cudaStream_t st, kview a, kview b, kview y);
void k_mul_bwd(cudaStream_t st, kview dx, kview dy, kview o, kview x2);
/* concat: y's channels [off, off + x.c) = x, rows [a, b) */
void k_concat_fwd(cudaStream_t st, kview x, kview y, int off, int a, int b);
/* slice (groups 0: channels [start, start + y.c) of in_c) and shuffle (groups > 0): net_channel_src */
typedef struct { int start, groups, in_c; } kchan;
/* fwd: y rows [a, b) = x's selected channels; else x rows [a, b) (a gradient) += y's (dy) at them */
void k_channels(cudaStream_t st, kview x, kview y, kchan m, int a, int b, bool fwd);
/* dx rows [a, b) += (store: =) dy's channels [off, off + dx.c) (add: off 0; concat: its input's place) */
void k_acc_rows(cudaStream_t st, kview dx, kview dy, int off, int a, int b, bool store);
/* elementwise activations (engine/act.h) on rows [a, b): y = f(x); dx = (or with store false +=)
 * dy * f'(m), m what the kind keeps */
void k_act_fwd(cudaStream_t st, int kind, float slope, kview x, kview y, int a, int b);
void k_act_bwd(cudaStream_t st, int kind, float slope, kview m, kview dy, kview dx, int a, int b, bool store);
/* dropout (engine/act.h) on rows [a, b) of maps full_h high (sample: one draw an image, the mask a
 * byte an image): y = x * mask * scale, the mask drawn
 * from key and written to mask (one byte an element of the rows, NULL: not kept); dx = (or +=) dy *
 * mask * scale */
void k_dropout_fwd(cudaStream_t st, uint64_t key, float p, bool sample, kview x, kview y, uint8_t *mask, int a, int b, int full_h);
void k_dropout_bwd(cudaStream_t st, float p, bool sample, const uint8_t *mask, kview dy, kview dx, int a, int b, bool store);
void k_maxpool_fwd(cudaStream_t st, kview x, kview y, int64_t *argmax, kwin w, int in_h, int a, int b);
void k_maxpool_bwd(cudaStream_t st, kview dx, kview dy, const int64_t *argmax, kwin w, int in_h, int a, int b);
void k_avgpool_fwd(cudaStream_t st, kview x, kview y, kwin w, int in_h, int a, int b);
void k_avgpool_bwd(cudaStream_t st, kview dx, kview dy, kwin w, int in_h, int a, int b);
/* nearest upsampling by u, output rows [a, b); backward dx += (a gather of each value's copies) */
void k_upsample_fwd(cudaStream_t st, kview x, kview y, int u, int a, int b);
void k_upsample_bwd(cudaStream_t st, kview dx, kview dy, int u, int a, int b);
/* transposed convolution of window w (its own: k, s, p, d), q channel groups, weight (C_in, C_out / q,
 * k, k): forward output rows [a, b) of an input in_h rows high (y =, bias bs or NULL); backward dx
 * rows [lo, hi) += and dw, db (NULL: no bias) += the share of dy's rows [a, b). Gathers: slow, exact. */
void k_convt_fwd(cudaStream_t st, kview x, kview y, const float *wt, const float *bs, kwin w, int q, int in_h, int a, int b);
void k_convt_bwd_data(cudaStream_t st, kview dx, kview dy, const float *wt, kwin w, int q, int lo, int hi, int a, int b);
void k_convt_bwd_filter(cudaStream_t st, kview x, kview dy, float *dw, float *db, kwin w, int q, int lo, int hi, int a, int b);
/* bilinear upsampling by s (engine/act.h: lerp_taps) of an in_h-row map to out_h rows: output rows
 * [a, b); backward dx rows [lo, hi) += the share of dy's rows [a, b) */
void k_bilinear_fwd(cudaStream_t st, kview x, kview y, int s, bool align, int in_h, int out_h, int a, int b);
void k_bilinear_bwd(cudaStream_t st, kview dx, kview dy, int s, bool align, int in_h, int out_h, int lo, int hi, int a, int b);
/* group normalization (G groups, whole maps; scratch: 2 * N * G doubles) and layer normalization
 * over the channels (rows [a, b)): engine/cpu/bn_cpu.c's formulas; w: gamma then beta, dw likewise
 * (+=, NULL: not wanted); backward dx += (lnorm: = when store) */
void k_gnorm_fwd(cudaStream_t st, kview x, kview y, float *stats, const float *w, int G, float eps);
void k_gnorm_bwd(cudaStream_t st, kview x, kview dy, kview dx, const float *stats, const float *w, float *dw, int G, double *scratch);
void k_lnorm_fwd(cudaStream_t st, kview x, kview y, float *stats, const float *w, float eps, int a, int b);
void k_lnorm_bwd(cudaStream_t st, kview x, kview dy, kview dx, const float *stats, const float *w, float *dw, int a, int b, bool store);
/* scale: y = x * w[c] on rows [a, b); backward dx += dy * w[c] (dx.p NULL: not wanted), dw += (NULL: not wanted) */
void k_scale_fwd(cudaStream_t st, kview x, kview y, const float *w, int a, int b);
void k_scale_bwd(cudaStream_t st, kview x, kview dy, kview dx, const float *w, float *dw, int a, int b);
void k_apool_fwd(cudaStream_t st, kview x, kview y, int o);
void k_apool_bwd(cudaStream_t st, kview dx, kview dy, int o);
/* Batch norm: `part` is room for the passes' partial sums, bn_part_doubles(c, n * (b - a) * w)
 * doubles (bn_chunks.h), used where sums or dw are asked for.
 * frozen batch norm backward: dx += gamma * invstd * dy; dgamma/dbeta += sums (dw may be NULL) */
void k_bn_frozen_bwd(cudaStream_t st, kview x, kview dx, kview dy, int a, int b, const float *gamma, const float *stats,
                     float *dw, double *part);
/* frozen batch norm forward's statistics: stats = running mean, 1 / sqrt(running var + eps) */
void k_bn_frozen_stats(cudaStream_t st, const float *running, float *stats, int c, float eps);
/* batch norm with whole-map statistics gathered over bands (ops.h OPS_BN_MAP): forward with the
 * given statistics; backward with the map's gradient sums (count values per channel), the mean
 * terms on rows [own_a, own_b) only, dgamma/dbeta += this call's sums (dw may be NULL, dx.p too) */
void k_bn_map_fwd(cudaStream_t st, kview x, kview y, int a, int b, const float *w, const float *stats);
void k_bn_map_bwd(cudaStream_t st, kview x, kview dx, kview dy, int a, int b, int own_a, int own_b, const float *gamma,
                  const float *stats, const double *sums, int64_t count, float *dw, double *part);
/* sums += per channel (sum x, sum x^2) over rows [a, b), or with dy.p (sum dy, sum dy * xhat) */
void k_bn_sums(cudaStream_t st, kview x, kview dy, int a, int b, const float *stats, double *sums, double *part);
/* stats from the sums; running statistics moved toward them when update */
void k_bn_sums_end(cudaStream_t st, const double *sums, float *stats, float *running, int c, int64_t count, float eps,
                   float momentum, bool update);
/* fully connected bias gradient: db[o] += sum over n of dy[n * out + o], in image order */
void k_fc_bias_grad(cudaStream_t st, const float *dy, int n, int out, float *db);
/* softmax + cross-entropy over K = c*h*w logits per image; loss_dev receives the batch mean,
 * scratch (n doubles) each image's loss */
/* softmax cross-entropy over K classes at each of P places an image (P = 1: classification);
 * scratch: k_loss_scratch(N * P) doubles (one a block of places) */
int64_t k_loss_scratch(int64_t places);
void k_loss_fwd(cudaStream_t st, kview x, int64_t K, int64_t P, const int64_t *labels, float *probs, float *loss_dev, double *scratch);
void k_loss_bwd(cudaStream_t st, kview dx, int64_t K, int64_t P, const float *probs, const int64_t *labels, const float *dy);

/* The encodings of kept maps (codec.cu; formats: engine/cpu/codec_cpu.c). kind: which; n values an
 * image; bits: an argmax place's; mask: a lossy relu output's sign bitmaps follow the images;
 * row0, c, w, in_w, win: an argmax's window geometry (ops.h's ops_codec). */
enum { KC_SIGN, KC_ARGMAX, KC_SPARSE, KC_FP16, KC_BF16, KC_FP8 };
typedef struct {
    int kind, images, bits;
    bool mask;
    int64_t n;
    int row0, c, w, in_w;
    kwin win;
} kcodec;
/* Sparse: each image's encoded bytes into sizes (device, m->images values). */
void k_codec_sparse_sizes(cudaStream_t st, const kcodec *m, const float *x, int64_t *sizes);
/* Encodes x into out (at_dev: sparse images' offsets in out, on the device; masks_at: where the
 * sign masks start), and back. */
void k_codec_encode(cudaStream_t st, const kcodec *m, const void *x, uint8_t *out, const int64_t *at_dev, int64_t masks_at);
void k_codec_decode(cudaStream_t st, const kcodec *m, const uint8_t *in, void *x, const int64_t *at_dev, int64_t masks_at);

#ifdef __cplusplus
}
#endif

#endif
