/* enc: how a kept tensor is stored between its last forward use and its first backward use.
 *
 * A plan says *which* tensors are kept (layer, checkpoint, rows, offload); its modifiers say *how*
 * (docs/plans.md): `+gist` (Jain et al., ISCA 2018, lossless), `+dpr:FORMAT` (Gist's delayed
 * precision reduction) and `+zfp:rate=R|acc=E` (error-bounded lossy compression with ZFP, as
 * COMET does with SZ). The lowering (sim/lower/stash.c) picks an encoding for every kept map, replaces
 * the map by its encoding after its last forward use (ENCODE) and rebuilds an fp32 copy before its
 * first backward use (DECODE); the engine's codecs do the work (engine/cpu/codec_cpu.c).
 *
 * Every encoding works image by image (an image's slice of the kept rows: C x rows x W values), so
 * images encode and decode in parallel. Fixed-size encodings store image i at i x the image's
 * size; the data-dependent ones (sparse, ZFP fixed-accuracy) start with a header (ZFP: the error
 * bound used, a double; then each image's encoded bytes, an int64 each) and their size is a
 * prediction from the modifier's density or ratio, which the engine measures.
 * Not done here: touching any value. */
#ifndef LRCNN_ENC_H
#define LRCNN_ENC_H

#include "sim/base/err.h"
#include "sim/net/net.h"

typedef enum {
    ENC_NONE,
    ENC_SIGN,     /* gist binarize: 1 bit per value (> 0), for maps whose backward readers need only that */
    ENC_ARGMAX,   /* gist binarize: a max-pool's argmax as the winner's place in its window, in the fewest bits */
    ENC_SPARSE,   /* gist sparse storage: a bitmap of the nonzero values, then those values (fp32) */
    ENC_FP16,     /* dpr: IEEE half, round to nearest even */
    ENC_BF16,     /* dpr: bfloat16, round to nearest even */
    ENC_FP8,      /* dpr: 8-bit float E4M3 (OCP FP8: no infinities, saturating at +-448), nearest even */
    ENC_ZFP_RATE, /* ZFP fixed-rate: R bits per value, a guaranteed size */
    ENC_ZFP_ACC,  /* ZFP fixed-accuracy: |error| <= E x (the map's value range), a data-dependent size */
    ENC_NKIND
} enc_kind;

const char *enc_name(enc_kind k);
/* The kind enc_name names; ENC_NKIND for none. */
enc_kind enc_kind_named(const char *name);
/* Decoding gives back every bit the backward reads (gradients are bit-identical to the plan's). */
bool enc_lossless(enc_kind k);
/* The encoded size depends on the values (predicted from a density or ratio, measured by the engine). */
bool enc_data_sized(enc_kind k);

typedef enum { ENC_MOD_GIST, ENC_MOD_DPR, ENC_MOD_ZFP } enc_mod_kind;

/* One plan modifier, as parsed from "+gist", "+dpr:bf16", "+zfp:acc=1e-3:ratio=6" (arguments are
 * separated by ':', as commas separate the plans of a list). */
typedef struct {
    enc_mod_kind kind;
    bool binarize, sparse;  /* gist: which of its encodings (both when bare) */
    double density;         /* gist sparse: predicted fraction of nonzero values (default 0.5) */
    enc_kind format;        /* dpr: ENC_FP16, ENC_BF16 or ENC_FP8; zfp: ENC_ZFP_RATE or ENC_ZFP_ACC */
    double rate;            /* zfp rate: bits per value, 1..32 */
    double acc;             /* zfp acc: error bound relative to each map's value range, (0, 1] */
    double ratio;           /* zfp acc: predicted compression ratio against fp32 (default 4) */
    double adapt;           /* zfp acc: COMET's adaptive bound (engine/adapt.h): the relative weight-gradient
                               error to aim at, (0, 1]; 0 keeps acc fixed */
    int every;              /* ... adapted every this many iterations (default 10) */
} enc_mod;

#define ENC_MAX_MODS 3
#define ENC_DEFAULT_DENSITY 0.5
#define ENC_DEFAULT_RATIO 4.0
#define ENC_DEFAULT_EVERY 10

/* Parses one modifier (the text after a '+'); at most one lossy modifier (dpr or zfp) and one gist
 * per plan, checked by the caller. */
int enc_mod_parse(enc_mod *m, const char *text, err *e);
/* "gist", "dpr:bf16", "zfp:acc=0.001:ratio=4" (canonical, for plan descriptions). */
void enc_mod_describe(const enc_mod *m, char *buf, size_t len);

/* A kept map as the codecs see it, per image: an nx x ny field of fp32 values (W by C x rows) or
 * int64 argmax places; `bits`: the argmax encoding's bits per value. `mask`: a lossy encoding of a
 * relu's output (whose backward reads its sign) also keeps the sign bitmap, after the images, and
 * decodes zeros as zeros and positives as positive (at least FLT_MIN), so no relu mask flips. */
typedef struct {
    int images;
    int64_t nx, ny;
    int bits;
    bool mask;
} enc_shape;

/* Bits an argmax takes for pool layer l's window (k x k places): ceil(log2(k * k)), at least 1. */
int enc_argmax_bits(const net_layer *l);
/* Bytes of one image's encoding (exact for the fixed-size kinds; a prediction from m for the
 * data-sized ones), and of a whole map's: the images and the header. */
int64_t enc_image_bytes(enc_kind k, const enc_mod *m, enc_shape s);
int64_t enc_header_bytes(enc_kind k, enc_shape s);
int64_t enc_bytes(enc_kind k, const enc_mod *m, enc_shape s);
/* Bytes of scratch encoding a map takes: ZFP fixed-accuracy compresses the images into a buffer of
 * its worst case (zfp_stream_maximum_size, which the codec checks), then keeps exactly what it
 * wrote; 0 for the others, which write in place (sparse counts its nonzeros first). */
int64_t enc_scratch_bytes(enc_kind k, enc_shape s);
/* ZFP's worst case for one image's stream (no header written). */
int64_t enc_zfp_max_bytes(enc_shape s);
/* ZFP's bits per 4x4 block at `rate` bits per value (its fixed-rate mode for 2-d fp32 fields). */
int enc_zfp_block_bits(double rate);

/* The factor a data-sized encoding's prediction takes (gist sparse: the density of nonzero values;
 * ZFP fixed-accuracy: the compression ratio against fp32), as stated by its modifier; and the
 * factor that `bytes` measured for the whole map imply (the inverse of enc_bytes: predicting with
 * it gives back exactly those bytes). 0 for the fixed-size kinds. */
double enc_factor(enc_kind k, const enc_mod *m);
double enc_measured_factor(enc_kind k, enc_shape s, int64_t bytes);
/* m with its factor for kind k replaced by f. */
enc_mod enc_with_factor(const enc_mod *m, enc_kind k, double f);

/* A calibration: the factors data-sized encodings measured, per layer, in earlier engine runs (an
 * HDF5 result file's measured/encoded tables, read by io/calib.h). A layer's sparse density
 * applies to every plan and bound; a ZFP ratio only to the same bound (acc), since the ratio is a
 * property of the values *and* the bound. Maps the calibration lacks keep the modifier's factor. */
typedef struct {
    char layer[NET_NAME_LEN];
    enc_kind kind;                /* ENC_SPARSE or ENC_ZFP_ACC */
    double acc;                   /* ENC_ZFP_ACC: the bound it was measured at */
    double values, stored;        /* sums over the maps measured: fp32 values, and the nonzero values
                                     (sparse) or the fp32 bytes over the ratio (zfp), so the factor
                                     is their ratio, weighted by map size */
} enc_calib_entry;

typedef struct {
    int n, cap;
    enc_calib_entry *e;
    char source[256];             /* where it came from, for messages */
    int maps;                     /* measured maps it was built from */
} enc_calib;

/* Adds one measured map of layer `layer` to c: its fp32 values and measured factor. */
void enc_calib_add(enc_calib *c, const char *layer, enc_kind k, double acc, double values, double factor);
/* The calibrated factor of kind k for layer `layer` (at bound acc for ZFP), or 0 if c has none. */
double enc_calib_factor(const enc_calib *c, const char *layer, enc_kind k, double acc);
void enc_calib_free(enc_calib *c);

#endif
