/* algo_book: a backend's measured algorithm choices, kept from one run to the next in the device
 * profile (io/profile.h). On cuda with LRCNN_CUDNN_FIND=1 each convolution call shape's algorithm
 * is measured once (engine/cuda/conv_cuda.h); `lrcnn calibrate` stores what it measured, and a run
 * given that profile (train --profile, a spec's profile =) takes the stored choice for every call
 * shape it finds there instead of measuring it again.
 *
 * A choice is keyed by its call in the backend's own words: ALGO_KEY_WORDS integers, the words
 * of a key format the book names (a backend takes no book of another format). The book names the
 * device and library it was measured on too; a backend takes no book of another device. A choice
 * taken is still checked before use (engine/cuda/conv_cuda.h): a stored algorithm the library now
 * refuses, or that needs more workspace than the limit, is measured again. */
#ifndef LRCNN_ALGO_BOOK_H
#define LRCNN_ALGO_BOOK_H

#include <stdint.h>

#include "sim/base/err.h"

enum { ALGO_KEY_WORDS = 32, ALGO_TEXT = 320 };

typedef struct {
    int64_t key[ALGO_KEY_WORDS];
    int32_t algo;         /* the backend's algorithm number (cuDNN's enum value) */
    int64_t ws;           /* its workspace bytes */
    double ms;            /* its measured time, milliseconds (-1: not measured) */
    char what[ALGO_TEXT]; /* the call in words: "layer 'conv1' forward, x 8x3x224x224, ..." */
} algo_choice;

typedef struct {
    char format[32];      /* the key format: "cudnn-conv 1" */
    char device[ALGO_TEXT]; /* what it was measured on: "NVIDIA H200 (9.0), cuDNN 9.14.0" */
    algo_choice *v;
    int n, cap;
} algo_book;

/* Adds c, or replaces the choice of the same key. */
void algo_book_put(algo_book *b, const algo_choice *c);
/* The choice for key, or NULL. */
const algo_choice *algo_book_find(const algo_book *b, const int64_t key[ALGO_KEY_WORDS]);
/* b's choices copied into an empty book `to` (format and device too). */
void algo_book_copy(algo_book *to, const algo_book *b);
void algo_book_free(algo_book *b);

/* A key as text: its words in decimal, one space apart; and back (-1 with e naming the word that
 * is not an integer, or a count other than ALGO_KEY_WORDS). */
void algo_key_format(const int64_t key[ALGO_KEY_WORDS], char *out, size_t len);
int algo_key_parse(const char *text, int64_t key[ALGO_KEY_WORDS], err *e);

#endif
