/* kind: the one table of layer-kind facts. Everything that is true of a kind of layer, whatever the
 * net, plan or backend — the keys its net-file line takes, how many inputs it reads, whether it
 * reads a window of rows, whether it can run on a band of rows or in place, what its backward
 * keeps (input, output, an auxiliary and its bytes), its parameter tensors and how they start,
 * its FLOPs and how its output shape follows from its inputs — is a row of kind_table, read by
 * the parser (load.c), the lowering (sim/lower/), the closed form (closed.c), the executor (exec.c),
 * the weights files (io/weights.c) and the backends. A new kind is one row here, its shape
 * function, and its kernels in each backend (engine/cpu/ops_cpu.c, engine/cuda/ops_cuda.c).
 * Not done here: kernels, or anything that depends on a plan. */
#ifndef LRCNN_KIND_H
#define LRCNN_KIND_H

#include "sim/net/net.h"
#include "sim/net/load.h"

/* The auxiliary a layer's forward writes and its backward reads. */
typedef enum {
    KIND_AUX_NONE,
    KIND_AUX_ARGMAX, /* int64 per output element computed: the input element that won (max-pool) */
    KIND_AUX_STATS,  /* fp32 mean and inverse std per channel (bn: 2 * C values), or per image and channel
                        group (gnorm: 2 * N * groups), whatever the rows */
    KIND_AUX_PROBS,  /* fp32 softmax probabilities per image (loss): N * C values */
    KIND_AUX_MASK,   /* one byte per output element computed: kept or dropped (dropout, PyTorch's bool mask) */
    KIND_AUX_PLACE,  /* fp32 mean and inverse std per place computed (lnorm): 2 * N * rows * W values */
} kind_aux;

/* What a backward reads of the maps it keeps (keeps_x, keeps_y): their values (the default), only
 * their sign (relu's mask: y > 0), or only their shape (max-pool, whose argmax says where the
 * gradient goes). Gist's binarize stores a kept map whose backward readers need no more than its
 * sign in one bit a value (sim/lower/stash.c). */
typedef enum { KIND_READS_VALUES, KIND_READS_SIGN, KIND_READS_SHAPE } kind_reads;

/* A key of the net format: `name=value` fills the int or float at byte `off` of a net_layer. */
typedef enum { KIND_KEY_COUNT, KIND_KEY_SIZE, KIND_KEY_BOOL, KIND_KEY_FLOAT } kind_key_type;
typedef struct {
    const char *name;
    kind_key_type type;   /* COUNT: integer >= 1; SIZE: integer >= 0; BOOL: 0 or 1; FLOAT: >= 0 */
    size_t off;
    bool required;
    double def;           /* the default when not given (and not required) */
    const char *def_key;  /* or: defaults to this other key's value (a pool's stride is its kernel) */
    size_t off_w;         /* nonzero: a pair along H and W, `A` (both) or `AxB` (H, then W into off_w) */
} kind_key;

#define KIND_MAX_KEYS 8

/* How a parameter tensor starts (PyTorch's defaults). */
typedef enum { KIND_INIT_FAN_IN, KIND_INIT_ONE, KIND_INIT_ZERO } kind_init;

/* One of a layer's parameter tensors, PyTorch's name and shape, at `offset` floats into the layer's
 * parameter buffer (or its running-statistics buffer when `running`). */
typedef struct {
    const char *name;     /* "weight", "bias", "running_mean", "running_var" */
    int rank;
    int64_t dims[4];
    int64_t offset;
    bool running;
    kind_init init;       /* FAN_IN: uniform in +-1/sqrt(fan_in) */
    int64_t fan_in;
} kind_tensor;

#define KIND_MAX_TENSORS 4

typedef struct {
    const char *name;
    kind_key keys[KIND_MAX_KEYS];
    int min_in, max_in;   /* inputs it reads (in=a,b) */
    bool rowwise;         /* can run on a band of rows; else it needs whole maps (fc, gap, loss) */
    bool inplace;         /* overwrites its input when nothing else reads it (and it is not the image) */
    bool keeps_x;         /* backward reads its inputs (autograd's saved tensors) */
    bool keeps_y;         /* backward reads its output */
    kind_reads reads;     /* of what it keeps */
    kind_aux aux;
    bool aux_optional;    /* the forward writes the auxiliary only when a backward will read it */
    bool aux_rebuilt;     /* a recompute rebuilds the auxiliary, so a checkpointed or banded layer is
                             recomputed for it (argmax, bn statistics); the loss's probabilities are
                             kept from the forward instead */
    bool running;         /* keeps running statistics (bn): a persistent 2 * C fp32 buffer */
    bool map_stats;       /* train mode normalizes with statistics over whole maps (bn), which row
                             segments gather in extra passes over their bands */
    bool labels;          /* reads the batch's labels (loss) */
    bool fwd_value;       /* counted by net_forward_values (cs231n's convention: input, conv, pools, fc) */
    /* Output shape, parameters and MACs of layer i from its inputs' (already inferred) shapes; on a
     * bad shape, -1 with "where: what" in e. */
    int (*infer)(net *n, int i, const char *where, err *e);
    /* Forward FLOPs of layer i on `rows` output rows of a batch (a multiply-add counts 2). */
    double (*flops)(const net *n, int i, int rows, int batch);
    /* A product (conv, fc): backward computes the weight gradient and the input gradient, each as
     * costly as the forward, so 2x forward, or 1x where no input gradient is wanted (the image).
     * Other kinds' backward costs one forward. */
    bool product;
    /* Its parameter tensors, in the order of its parameter buffer; NULL: none. */
    int (*tensors)(const net *n, int i, kind_tensor *out);
} kind_traits;

extern const kind_traits kind_table[NET_NKIND];

/* The row of l's kind (inline: the lowering asks it of every step). */
static inline const kind_traits *kind_of(const net_layer *l) { return &kind_table[l->kind]; }
/* The kind's name (kind_table), "?" out of range. */
const char *kind_name(net_kind k);
/* Whether PyTorch's autograd saves l's input although our backward does not read it (the torch
 * plan keeps it until l's backward): average pooling, fixed or adaptive (gap being torchvision's
 * AdaptiveAvgPool2d(1)), whose PyTorch backward takes the input (avg_pool2d_backward,
 * _adaptive_avg_pool2d_backward), and kind_torch_copies_x's. PyTorch pools to 1x1 as a mean over
 * H and W, whose backward in 1.13 keeps its input too but in 2.x only its sizes (torch2: measured
 * with saved-tensor hooks on 2.5.1), so there gap and an adaptive pool to 1x1 keep nothing. */
bool kind_torch_keeps_x(const net_layer *l, bool torch2);
/* Whether PyTorch runs l in place but keeps a copy of its input for the backward: an in-place
 * relu6 (F.relu6(inplace=True), hardtanh_, whose backward reads the input as it was: PyTorch 1.13
 * and 2.5.1 save a clone of it, measured with saved-tensor hooks). The torch plans then run it out
 * of place, its backward reading that input, not its output (which lives only as long as another
 * reader keeps it; sim/lower/lower.c). */
bool kind_torch_copies_x(const net_layer *l);
/* Whether python/lrcnn_torch runs l in a band at the map's border on a padded copy of its input
 * rows (its Bordered: a convolution or a pool pads past the border itself only along W), made in
 * the forward and again in the backward and freed when the step returns. */
bool kind_torch_pads_x(const net_layer *l);

/* The kind called name, or -1. */
int kind_find(const char *name);
/* "input conv relu ..." (every kind, for messages). */
const char *kind_names(void);

/* Bytes of layer L's auxiliary for `rows` output rows of a batch (0: none). */
int64_t kind_aux_bytes(const net *n, int L, int rows, int batch);
/* Bytes of the running statistics of a kind with `running` (mean and variance, fp32 per channel),
 * and of one statistics pass's sums of a kind with `map_stats` (two fp64 per channel). */
int64_t kind_running_bytes(const net_layer *l);
int64_t kind_sums_bytes(const net_layer *l);
/* Layer L's parameter tensors (none for most kinds); returns how many. */
int kind_tensors(const net *n, int L, kind_tensor out[KIND_MAX_TENSORS]);

#endif
