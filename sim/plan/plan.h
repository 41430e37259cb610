/* plan: the strategy for one training iteration, as a value.
 *
 * A plan cuts the network's layers 1..n-1 into contiguous segments, each with a mode:
 *   layer    keep what backward needs (PyTorch autograd's rules; liveness frees the rest)
 *   ckpt     keep only the segment input; recompute the segment in backward
 *   offload  layer, but stashed activations go to host memory after their last forward use and
 *            come back one backward step before they are needed (vDNN)
 *   rows     run the segment band by band (2PS or OverL), FP and BP band counts may differ
 * Presets (layer, ckpt-sqrt, ckpt:K, vdnn-all, vdnn-conv, 2ps:R, overl:R, 2ps-h[:R], overl-h[:R])
 * and the custom syntax are documented in docs/plans.md. A plan is resolved against a net (layer
 * names become indices), so it is only valid for that net and input size. */
#ifndef LRCNN_PLAN_H
#define LRCNN_PLAN_H

#include "sim/geometry/band.h"
#include "sim/plan/enc.h"

typedef enum { PLAN_LAYER, PLAN_CKPT, PLAN_OFFLOAD, PLAN_ROWS } plan_mode;
typedef enum { PLAN_OFFLOAD_ALL, PLAN_OFFLOAD_CONV, PLAN_OFFLOAD_PICK } plan_offload;
/* offload(ITEMS) (PLAN_OFFLOAD_PICK): the kept maps of one layer that a list names — which maps
 * and when, Beaumont et al.'s choice (sim/planner/offsel.h). They are released `free` forward steps after
 * their last forward use (0: at once, as vDNN) and prefetched `fetch` backward steps ahead of
 * their first backward use (1: as vDNN). named: written alone in the list, not inside a
 * FIRST..LAST range, so it must keep something for the backward. */
typedef struct {
    int layer, free, fetch;
    bool named;
} plan_pick;
/* BatchNorm: train = batch statistics over the whole batch and map, as PyTorch in train mode —
 * inside a row segment gathered exactly in stages over its bands, one per level of bns, each
 * keeping the whole maps a later stage reads (`exact` is a synonym; plan_passes); train-offload = the
 * same stages, their kept maps moved to the host after their last forward use and prefetched
 * before their first backward use; train-rebuild = the same stages, their kept maps dropped after
 * their last forward use and rebuilt band by band in the backward from the nearest map still kept
 * below them (or the segment input); train-recompute =
 * the same statistics with nothing whole kept inside the segment: every level's pass recomputes
 * its bands from the segment input (least memory, work quadratic in the levels); frozen = running
 * statistics everywhere; per-band = each band normalizes with its own rows' statistics inside row
 * segments (the LR-CNN prototype's approximation: gradients differ), train elsewhere; auto (the
 * default) = train: an approximation is never chosen silently. */
typedef enum { PLAN_BN_AUTO, PLAN_BN_TRAIN, PLAN_BN_FROZEN, PLAN_BN_PERBAND, PLAN_BN_RECOMPUTE, PLAN_BN_OFFLOAD, PLAN_BN_REBUILD } plan_bn;
/* ... in stages (plan_passes.staged). */
static inline bool plan_bn_staged(plan_bn b) { return b == PLAN_BN_TRAIN || b == PLAN_BN_OFFLOAD || b == PLAN_BN_REBUILD; }
/* Batch statistics, whichever way a row segment gathers them. */
static inline bool plan_bn_batch(plan_bn b) { return plan_bn_staged(b) || b == PLAN_BN_RECOMPUTE; }
/* A choice per level of the stages' kept maps (bn=MODE:K takes a count of levels). */
static inline bool plan_bn_per_level(plan_bn b) { return b == PLAN_BN_OFFLOAD || b == PLAN_BN_REBUILD; }
/* Layrub-style migration (`+migrate[:weights][:grads][:optim]`, all three when bare): which
 * persistent tensors leave the device between their uses. Any of them makes the optimizer step
 * layer by layer, right after a layer's last backward use of its weights (docs/plans.md):
 *   grads   a weight gradient lives from its layer's first backward write to its update;
 *   weights parameters live on the host, prefetched for each pass that reads them and written back;
 *   optim   optimizer state lives on the host, prefetched for its layer's update and written back. */
enum { PLAN_MIGRATE_WEIGHTS = 1, PLAN_MIGRATE_GRADS = 2, PLAN_MIGRATE_OPTIM = 4, PLAN_MIGRATE_ALL = 7 };

#define PLAN_MAX_BANDS 4096
#define PLAN_BN_PICKS 128   /* letters of bn=train:LETTERS, one a level of statistics */
#define PLAN_BN_TEXT_LEN (PLAN_BN_PICKS + 32) /* room for plan_bn_text */
#define PLAN_TEXT_LEN 8192  /* a plan's text, modifiers and bn= included (the planner's can be long:
                             an offload list names up to every kept map of ResNet-50) */

/* The statistics passes of a row segment that gathers whole-map statistics (a bn in train mode;
 * sim/lower/rows.h explains them), indexed by segment layer (layer - first): pass 1 gathers the
 * statistics of the layers whose inputs depend on none with statistics, pass 2 the next, ...;
 * backward, pass 1 the gradient sums of the layers with none after them. fwd_need[(pass - 1) * nl
 * + i]: the forward pass computes layer first + i (an ancestor of a layer it gathers for);
 * bwd_set likewise: the backward pass back-propagates it (a descendant); bwd_need: the backward
 * pass recomputes it (plan_need: what bwd_set's steps keep, and the inputs of the layers it
 * gathers for). n_fwd = n_bwd = 0 for any other segment.
 *
 * staged (bn=train): each pass is a stage that computes each layer once. fst[i]: the forward
 * pass computing layer first + i (1..n_fwd, n_fwd + 1: the forward proper); bst[i]: the backward
 * pass back-propagating it (n_bwd + 1: the backward proper). keep_act[i]: its whole output map is
 * kept, a later forward stage reads it (and the backward recomputes from it); keep_grad[i]: its
 * whole gradient map is kept, a consumer back-propagated in an earlier backward stage adds to it
 * (a bn's: its statistics pass's dy); rebuilt[i] (bn=train-rebuild): kept for the forward stages
 * only, the backward recomputes it from the maps kept below it; offloaded[i] (bn=train-offload):
 * kept on the host between its last forward and first backward use. Each kept map's level (the
 * stage that computes it) takes one choice (plan_bn_level), so at most one of the two holds.
 * Not staged (bn=train-recompute): every pass recomputes from the segment input, nothing whole is
 * kept inside the segment. */
typedef struct {
    int nl, n_fwd, n_bwd;
    int *fwd, *bwd;                     /* [nl]: the pass gathering the layer's statistics, 0 none */
    bool *fwd_need, *bwd_set, *bwd_need; /* [n_fwd * nl], [n_bwd * nl], [n_bwd * nl] */
    bool staged;
    int *fst, *bst;                     /* [nl], staged only */
    bool *keep_act, *keep_grad;         /* [nl], staged only */
    bool *rebuilt, *offloaded;          /* [nl], staged only */
} plan_passes;

typedef struct {
    plan_mode mode;
    int first, last;          /* layer indices, inclusive */
    plan_offload offload;     /* PLAN_OFFLOAD */
    plan_pick *picks;         /* PLAN_OFFLOAD_PICK: n_pick of them, by layer; a layer at most once */
    int n_pick;
    band_policy policy;       /* PLAN_ROWS */
    int fp, bp;               /* band counts forward / backward */
    int *cuts;                /* PLAN_ROWS with explicit forward cuts: fp + 1 values, else NULL */
    /* PLAN_ROWS: the segment's band geometry, built once by plan_parse for the lowering and the
     * closed form to read. bwd is fwd itself unless the backward band count differs (OverL). */
    band_seg band;
    band_geom *fwd, *bwd;
    plan_passes passes;
} plan_seg;

/* The torch presets: `layer` executed as PyTorch's autograd does, to predict the bytes PyTorch
 * allocates. Both keep what autograd saves, which is what our backward reads plus the input of
 * average pooling (kind_torch_keeps_x: in 2.x not a pooling to 1x1); backward allocates a fresh
 * input gradient at every layer (no in-place ReLU backward); without an engine's workspace model
 * steps take no scratch.
 * torch (1.13, the version the LR-CNN authors used): .grad persists between iterations
 * (zero_grad fills it with zeros), so each layer's weight gradient is a temporary added to it.
 * torch2 (2.x): zero_grad frees .grad, so a weight gradient lives from its layer's backward to the
 * optimizer step, and is written in place.
 * The modifiers +torch and +torch2 give any plan the same rules: the plan as python/lrcnn_torch
 * runs it in PyTorch (a ckpt segment under torch.utils.checkpoint, bands as checkpointed
 * functions, offload and encodings through saved-tensor hooks), whose saved bytes it predicts. */
typedef enum { PLAN_TORCH_NONE, PLAN_TORCH_1, PLAN_TORCH_2 } plan_torch;

typedef struct {
    char text[PLAN_TEXT_LEN]; /* the plan as the user wrote it */
    char preset[16];          /* the preset it came from ("2ps-h"), "" for a custom plan */
    int preset_count;         /* the preset's R or K, defaults resolved ("2ps-h" -> 4); 0 if it has none */
    int n_seg;
    plan_seg *segs;
    plan_bn bn;               /* resolved: never AUTO after plan_parse */
    int bn_levels;            /* bn=train-offload:K, bn=train-rebuild:K: only the maps of each row
                                 segment's first K levels of statistics are offloaded or rebuilt (K >= 1;
                                 all of a segment's where it has fewer); 0: every level's */
    int bn_keep_every;        /* bn=train-rebuild/M (or :K/M): of those levels, every M-th (M, 2M, ...)
                                 is kept, so a level is rebuilt from at most M - 1 below it; 0: none */
    char bn_pick[PLAN_BN_PICKS + 1]; /* bn=train:LETTERS: level q's kept maps by letter q: k kept, o
                                 offloaded, r rebuilt; levels past the letters kept ("": none given) */
    /* How kept maps are stored (sim/plan/enc.h): at most one gist and one lossy modifier (dpr or zfp);
     * gist's lossless encodings take the maps they apply to, the lossy one every other kept map. */
    int n_mod;
    enc_mod mods[ENC_MAX_MODS];
    int migrate;              /* PLAN_MIGRATE_* bits; 0: parameters, gradients and state stay on the device */
    plan_torch torch;         /* the torch presets: layer as PyTorch runs it (PLAN_TORCH_*), a prediction
                                 of PyTorch's own memory */
} plan;

/* Parses a preset or custom plan for net n (at its current input size), then its modifiers
 * ("+gist", "+dpr:fp16", "+zfp:rate=8", "+migrate"). Text may end with " bn=MODE" (auto, train,
 * exact, train[:LETTERS], train-offload[:K], train-rebuild[:K][/M], train-recompute, frozen, per-band). */
int plan_parse(plan *p, const net *n, const char *text, err *e);
void plan_free(plan *p);

/* One line describing the plan's segments, e.g. "rows(2ps,fp=6,bp=6)@conv1_1..pool3; layer@conv4_1..loss". */
void plan_describe(const plan *p, const net *n, char *buf, size_t len);
/* Its segments over layers [a, b] alone, each clipped to them, in the custom syntax ("" for none;
 * no modifiers, no bn=): a pipeline stage's share of the plan. */
void plan_describe_range(const plan *p, const net *n, int a, int b, char *buf, size_t len);

const char *plan_bn_name(plan_bn b);
/* The plan's BatchNorm mode as bn= takes it: its name, the levels offloaded or rebuilt and one kept
 * in M ("train-offload:3", "train-rebuild/2"). */
const char *plan_bn_text(const plan *p, char *buf, size_t len);
/* The choice for the kept maps of level q (1, 2, ...: the stage that computes them) of a row
 * segment's statistics: 'k' kept on the device, 'o' offloaded, 'r' rebuilt. */
char plan_bn_level(const plan *p, int q);
/* The plan's gist modifier, and its lossy one (dpr or zfp); NULL where it has none. */
const enc_mod *plan_gist(const plan *p);
const enc_mod *plan_lossy(const plan *p);
/* s is a row segment holding a layer with whole-map statistics in train mode: the lowering adds
 * statistics passes over its bands. */
static inline bool plan_seg_map_stats(const plan_seg *s) { return s->passes.n_fwd > 0; }
/* The plan has what the closed form does not model yet — modifiers (encodings, migration), the
 * torch plans, or an offload list (whose timing places each move) — so the replay is its
 * prediction. */
bool plan_modified(const plan *p);
/* The plan approximates BatchNorm (per-band statistics in some row segment): say so to the user. */
bool plan_bn_approximate(const plan *p, const net *n);


/* Which layers of [first, last] a backward recomputes: those whose output (or rebuilt auxiliary)
 * a backward step of `bwd` (NULL: every layer of the range) keeps, those in `extra` (NULL: none),
 * and those a needed layer reads; a layer whose output only feeds the next segment is not, nor
 * one in `avail` (NULL: none; its whole output is kept) unless its backward rebuilds its
 * auxiliary. All arrays are indexed by layer. With map_stats, a whole-map-statistics layer's
 * statistics come from its segment's passes, so they alone are no reason to recompute it. */
void plan_need(const net *n, int first, int last, const bool *bwd, const bool *extra, const bool *avail, bool map_stats,
               bool *need);
const char *plan_mode_name(plan_mode m);

/* The pick of layer L in an offload(ITEMS) segment of p, or NULL. */
const plan_pick *plan_pick_of(const plan *p, int L);

/* The plan's family, from its segments: "layer", "ckpt", "vdnn" (offload), "2ps" or "overl" (one
 * row segment, the rest layer), "hybrid" (rows with checkpointing, offload or a second row stage). */
const char *plan_family(const plan *p);

/* The preset names, for --help and sweeps. */
extern const char *const plan_presets[];

/* Expands a list like "layer,2ps:2..8,overl:4" into single plan texts (caller frees with
 * plan_list_free). Ranges apply to the last number of an item. At most PLAN_LIST_MAX plans; on an
 * error nothing is left allocated. */
#define PLAN_LIST_MAX 65536
int plan_list_expand(const char *list, char ***out, int *count, err *e);
void plan_list_free(char **items, int count);

#endif
