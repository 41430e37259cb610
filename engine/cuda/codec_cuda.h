/* codec_cuda: the encodings of kept maps on the GPU (ops.h's encode and decode; the formats are
 * engine/cpu/codec_cpu.c's, byte for byte): gist's sign bits and argmax places, sparse relu outputs,
 * fp16, bf16 and fp8, through the kernels of codec.cu. ZFP has no CUDA policy in Debian's libzfp:
 * refused. A sparse encoding's bytes depend on the values, so its sizes are read back to the host
 * (the one download inside an iteration), into offsets reserved before the run. */
#ifndef LRCNN_CODEC_CUDA_H
#define LRCNN_CODEC_CUDA_H

#include <cuda_runtime.h>

#include "engine/ops.h"

void codec_cuda_init(cudaStream_t compute);
void codec_cuda_close(void);
/* Before a run: room for the offsets of a sparse encoding of `images` images (grows between runs). */
void codec_cuda_reserve(int images);
/* Device bytes it holds (reported beside the pool). */
int64_t codec_cuda_bytes(void);
bool codec_cuda_encodes(enc_kind k);
int64_t codec_cuda_encode(const ops_codec *m, const void *x, void *out, void *scratch);
void codec_cuda_decode(const ops_codec *m, const void *in, void *x);

#endif
