/* codec_cuda: see codec_cuda.h. */
#include "engine/cuda/codec_cuda.h"

#include <stdlib.h>
#include <string.h>

#include "engine/cuda/cucheck.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/mem_cuda.h"

static struct {
    cudaStream_t compute;
    int64_t *codec_dev;         /* sparse encodings: each image's bytes, then offsets (device) */
    int codec_cap;
} c;

void codec_cuda_init(cudaStream_t compute) { c.compute = compute; }

void codec_cuda_close(void)
{
    if (c.codec_dev) CUDA_CHECK(cudaFree(c.codec_dev));
    memset(&c, 0, sizeof c);
}

void codec_cuda_reserve(int images)
{
    if (2 * images + 1 <= c.codec_cap) return;
    if (c.codec_dev) CUDA_CHECK(cudaFree(c.codec_dev));
    c.codec_cap = 2 * images + 1;
    CUDA_CHECK(cudaMalloc((void **)&c.codec_dev, (size_t)c.codec_cap * sizeof(int64_t)));
}

int64_t codec_cuda_bytes(void) { return c.codec_cap * (int64_t)sizeof(int64_t); }

bool codec_cuda_encodes(enc_kind k) { return k != ENC_ZFP_RATE && k != ENC_ZFP_ACC; }

static kcodec kc_of(const ops_codec *m)
{
    static const int kinds[ENC_NKIND] = {[ENC_SIGN] = KC_SIGN, [ENC_ARGMAX] = KC_ARGMAX, [ENC_SPARSE] = KC_SPARSE,
                                         [ENC_FP16] = KC_FP16, [ENC_BF16] = KC_BF16, [ENC_FP8] = KC_FP8};
    CHECK(codec_cuda_encodes(m->kind) && m->kind != ENC_NONE);
    return (kcodec){.kind = kinds[m->kind], .images = m->shape.images, .bits = m->shape.bits, .mask = m->shape.mask,
                    .n = m->shape.nx * m->shape.ny, .row0 = m->row0, .c = m->c, .w = m->w, .in_w = m->in_w, .win = {m->win.k, m->win.s, m->win.p, m->win.d}};
}

/* Sparse images' offsets in the encoding (host, images + 1 values) from their sizes on the device
 * (the header, or the codec's own buffer for a size call); the header comes first. */
static int64_t *sparse_offsets(int images, const int64_t *sizes)
{
    int64_t *at = err_calloc((size_t)images + 1, sizeof(int64_t));
    mem_cuda_download(at + 1, sizes, (int64_t)images * 8);
    at[0] = 8 * (int64_t)images;
    for (int i = 0; i < images; i++) at[i + 1] += at[i];
    return at;
}

/* Room for a sparse encoding's sizes and offsets: reserved by prepare for the batch. */
static void codec_room(int images)
{
    if (2 * images + 1 > c.codec_cap) cu_fatal("encoding a map", "more images than prepare reserved offsets for", __FILE__, __LINE__);
}

int64_t codec_cuda_encode(const ops_codec *m, const void *x, void *out, void *scratch)
{
    (void)scratch;
    kcodec k = kc_of(m);
    int64_t masks = m->shape.mask ? (int64_t)k.images * ((k.n + 7) / 8) : 0;
    if (m->kind != ENC_SPARSE) {
        int64_t bytes = enc_bytes(m->kind, m->mod, m->shape); /* exact for the fixed-size kinds */
        if (out) k_codec_encode(c.compute, &k, x, out, NULL, bytes - masks);
        return bytes;
    }
    codec_room(k.images);
    int64_t *sizes = out ? (int64_t *)out : c.codec_dev;
    k_codec_sparse_sizes(c.compute, &k, x, sizes);
    int64_t *at = sparse_offsets(k.images, sizes), end = at[k.images];
    if (out) {
        mem_cuda_upload(c.codec_dev + k.images, at, ((int64_t)k.images + 1) * 8);
        k_codec_encode(c.compute, &k, x, out, c.codec_dev + k.images, end);
    }
    free(at);
    return end + masks;
}

void codec_cuda_decode(const ops_codec *m, const void *in, void *x)
{
    kcodec k = kc_of(m);
    int64_t *at = NULL, masks_at = 0;
    if (m->kind == ENC_SPARSE) {
        codec_room(k.images);
        at = sparse_offsets(k.images, in);
        mem_cuda_upload(c.codec_dev + k.images, at, ((int64_t)k.images + 1) * 8);
        masks_at = at[k.images];
    } else {
        masks_at = enc_bytes(m->kind, m->mod, m->shape) - (m->shape.mask ? (int64_t)k.images * ((k.n + 7) / 8) : 0);
    }
    k_codec_decode(c.compute, &k, in, x, at ? c.codec_dev + k.images : NULL, masks_at);
    free(at);
}

