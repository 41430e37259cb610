/* data: batches for training. Two sources:
 *   synthetic  a deterministic, learnable dataset: each class is a fixed smooth pattern (a few
 *              sinusoids per channel with class-specific frequencies and phases) under uniform
 *              noise, so a CNN can separate the classes and the loss falls;
 *   directory  DIR/<class>/<image>.png|.ppm (ImageFolder layout: classes are the sorted
 *              subdirectory names), read with libpng or as binary PPM, resized bilinearly to the
 *              net's input and normalized with ImageNet's mean and std. Every image is read and
 *              checked when the directory is opened, so a bad file stops the run before it starts.
 * Batches are deterministic functions of (seed, iteration). */
#ifndef LRCNN_DATA_H
#define LRCNN_DATA_H

#include <stdint.h>

#include "engine/run.h"
#include "sim/net/net.h"
#include "sim/base/err.h"

typedef struct {
    int c, h, w, classes;
    int lh, lw;         /* labels per image: 1 x 1, or a map of lh x lw places (a per-pixel loss) */
    uint64_t seed;
    int count;          /* directory: images; synthetic: 0 (unbounded) */
    float *images;      /* directory: (count, c, h, w) */
    int64_t *labels;    /* directory: (count) */
    int *order;         /* directory: a seeded permutation */
} data;

void data_synthetic(data *d, int c, int h, int w, int classes, uint64_t seed);
int data_open_dir(data *d, const char *dir, int c, int h, int w, int classes, uint64_t seed, err *e);
/* Synthetic batches shaped for net n: its input, its loss's classes and, under a per-pixel loss, a
 * label for each of the loss's places — the class of the image where its pattern's first channel
 * is above zero, the next class elsewhere (a segmentation a CNN can learn). */
void data_synthetic_for(data *d, const net *n, uint64_t seed);
/* Fills images (n, c, h, w) and labels (n, lh, lw) for iteration `iter`. */
void data_batch(const data *d, int iter, int n, float *images, int64_t *labels);
void data_free(data *d);
/* d's batches for the run driver (d must outlive the run). */
run_batches data_batches(const data *d);

#endif
