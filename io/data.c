/* data: see data.h. */
#include "io/data.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <png.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static float unit(uint64_t x) { return (float)((mix(x) >> 40) * 0x1.0p-24); } /* [0, 1) */

void data_synthetic(data *d, int c, int h, int w, int classes, uint64_t seed)
{
    memset(d, 0, sizeof *d);
    d->c = c, d->h = h, d->w = w, d->classes = classes, d->seed = seed, d->lh = d->lw = 1;
}

void data_synthetic_for(data *d, const net *n, uint64_t seed)
{
    const net_layer *in = &n->layers[0], *loss = &n->layers[n->n - 1];
    data_synthetic(d, in->c, in->h, in->w, loss->c, seed);
    d->lh = loss->h, d->lw = loss->w;
}

/* Class k, channel ch: sum of 2 sinusoids with frequencies 1..3 cycles per image and a phase,
 * all drawn from the class's own random stream. */
static float pattern(const data *d, int k, int ch, int y, int x)
{
    float v = 0;
    for (int t = 0; t < 2; t++) {
        uint64_t key = d->seed * 7919u + (uint64_t)k * 104729u + (uint64_t)ch * 131u + (uint64_t)t;
        float fy = 1 + 3 * unit(key * 3), fx = 1 + 3 * unit(key * 3 + 1), ph = 6.2831853f * unit(key * 3 + 2);
        v += sinf(6.2831853f * (fy * (float)y / (float)d->h + fx * (float)x / (float)d->w) + ph);
    }
    return 0.5f * v;
}

void data_batch(const data *d, int iter, int n, float *images, int64_t *labels)
{
    int64_t plane = (int64_t)d->h * d->w, img = plane * d->c;
    for (int i = 0; i < n; i++) {
        uint64_t sample = (uint64_t)iter * (uint64_t)n + (uint64_t)i;
        if (d->count) {
            int k = d->order[sample % (uint64_t)d->count];
            memcpy(images + i * img, d->images + (int64_t)k * img, (size_t)img * sizeof(float));
            labels[i] = d->labels[k];
            continue;
        }
        int k = (int)(mix(d->seed ^ (sample * 2654435761u)) % (uint64_t)d->classes);
        int64_t places = (int64_t)d->lh * d->lw;
        if (places == 1) labels[i] = k;
        for (int y = 0; places > 1 && y < d->lh; y++) /* the place's centre in the image */
            for (int x = 0; x < d->lw; x++)
                labels[i * places + (int64_t)y * d->lw + x] =
                    pattern(d, k, 0, (2 * y + 1) * d->h / (2 * d->lh), (2 * x + 1) * d->w / (2 * d->lw)) > 0 ? k : (k + 1) % d->classes;
        for (int ch = 0; ch < d->c; ch++)
            for (int y = 0; y < d->h; y++)
                for (int x = 0; x < d->w; x++) {
                    uint64_t key = ((sample * (uint64_t)d->c + (uint64_t)ch) * (uint64_t)d->h + (uint64_t)y) * (uint64_t)d->w + (uint64_t)x;
                    images[i * img + ch * plane + y * d->w + x] = pattern(d, k, ch, y, x) + (unit(key ^ (d->seed << 32)) - 0.5f);
                }
    }
}

/* The most pixels an image file may declare (16384 x 16384): decided from its header, before
 * anything is allocated for it. */
#define DATA_MAX_PIXELS (1LL << 28)

static int check_pixels(const char *path, int64_t w, int64_t h, err *e)
{
    if (w * h <= DATA_MAX_PIXELS) return 0;
    return err_set(e, "%s: a %lldx%lld image is larger than images are read here (at most 2^28 pixels)", path, (long long)w,
                   (long long)h);
}

/* Reads an 8-bit RGB image into *rgb (h x w x 3). */
static int read_image(const char *path, unsigned char **rgb, int *h, int *w, err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(e, "%s: cannot open image (%s)", path, strerror(errno));
    unsigned char magic[8] = {0};
    size_t got = fread(magic, 1, 8, f);
    if (got >= 2 && magic[0] == 'P' && magic[1] == '6') {
        int maxv = 0;
        rewind(f);
        if (fscanf(f, "P6 %d %d %d", w, h, &maxv) != 3 || *w < 1 || *h < 1 || maxv != 255 || fgetc(f) == EOF) {
            fclose(f);
            return err_set(e, "%s: not a binary 8-bit PPM (P6, maxval 255)", path);
        }
        long at = ftell(f);
        fseek(f, 0, SEEK_END);
        long end = ftell(f);
        fseek(f, at, SEEK_SET);
        size_t size = (size_t)*w * (size_t)*h * 3;
        if (check_pixels(path, *w, *h, e)) return fclose(f), -1;
        if (at < 0 || end < at || size > (size_t)(end - at)) { /* before allocating what the header declares */
            fclose(f);
            return err_set(e, "%s: truncated PPM (%dx%d declares %zu bytes of pixels; the file holds %ld)", path, *w, *h, size,
                           end - at);
        }
        *rgb = err_calloc(size, 1);
        got = fread(*rgb, 1, size, f);
        fclose(f);
        if (got != size) {
            free(*rgb);
            return err_set(e, "%s: truncated PPM (%zu of %zu bytes)", path, got, size);
        }
        return 0;
    }
    fclose(f);
    if (got < 8 || png_sig_cmp(magic, 0, 8)) return err_set(e, "%s: not a PNG or PPM image", path);
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&img, path)) return err_set(e, "%s: unreadable PNG (%s)", path, img.message);
    img.format = PNG_FORMAT_RGB;
    if (check_pixels(path, img.width, img.height, e)) return png_image_free(&img), -1;
    *h = (int)img.height, *w = (int)img.width;
    *rgb = err_calloc(PNG_IMAGE_SIZE(img), 1);
    if (!png_image_finish_read(&img, NULL, *rgb, 0, NULL)) {
        free(*rgb);
        png_image_free(&img);
        return err_set(e, "%s: unreadable PNG (%s)", path, img.message);
    }
    return 0;
}

/* Bilinear resize (align_corners=False) and ImageNet normalization into dst (c, h, w). */
static void resize_into(const unsigned char *rgb, int sh, int sw, float *dst, int c, int h, int w)
{
    static const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            float fy = ((float)y + 0.5f) * (float)sh / (float)h - 0.5f, fx = ((float)x + 0.5f) * (float)sw / (float)w - 0.5f;
            fy = fy < 0 ? 0 : fy, fx = fx < 0 ? 0 : fx;
            int y0 = (int)fy, x0 = (int)fx, y1 = y0 + 1 < sh ? y0 + 1 : y0, x1 = x0 + 1 < sw ? x0 + 1 : x0;
            float wy = fy - (float)y0, wx = fx - (float)x0;
            for (int ch = 0; ch < c; ch++) {
                int k = c == 3 ? ch : -1; /* one channel: luminance */
                float v[4];
                const int ys[2] = {y0, y1}, xs[2] = {x0, x1};
                for (int q = 0; q < 4; q++) {
                    const unsigned char *p = rgb + ((size_t)ys[q / 2] * (size_t)sw + (size_t)xs[q % 2]) * 3;
                    v[q] = k >= 0 ? p[k] : 0.299f * p[0] + 0.587f * p[1] + 0.114f * p[2];
                }
                float val = ((1 - wy) * ((1 - wx) * v[0] + wx * v[1]) + wy * ((1 - wx) * v[2] + wx * v[3])) / 255.0f;
                int m = k >= 0 ? k : 0;
                dst[((size_t)ch * (size_t)h + (size_t)y) * (size_t)w + (size_t)x] = (val - mean[m]) / std[m];
            }
        }
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted entries of dir that are directories (want_dirs) or files. */
static int list_dir(const char *dir, bool want_dirs, char ***out, int *count, err *e)
{
    DIR *d = opendir(dir);
    if (!d) return err_set(e, "%s: cannot open image directory (%s)", dir, strerror(errno));
    *out = NULL, *count = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        DIR *sub = opendir(path);
        if (sub) closedir(sub);
        if ((sub != NULL) != want_dirs) continue;
        *out = err_realloc(*out, ((size_t)*count + 1) * sizeof(char *));
        (*out)[(*count)++] = strdup(de->d_name);
    }
    closedir(d);
    if (*count > 1) qsort(*out, (size_t)*count, sizeof(char *), cmp_str); /* never qsort(NULL, 0) */
    return 0;
}

static void free_list(char **l, int n)
{
    for (int i = 0; i < n; i++) free(l[i]);
    free(l);
}

int data_open_dir(data *d, const char *dir, int c, int h, int w, int classes, uint64_t seed, err *e)
{
    memset(d, 0, sizeof *d);
    d->c = c, d->h = h, d->w = w, d->classes = classes, d->seed = seed, d->lh = d->lw = 1;
    if (c != 3 && c != 1) return err_set(e, "%s: images have 1 or 3 channels, the net's input has %d", dir, c);
    char **cls;
    int ncls, rc = 0;
    if (list_dir(dir, true, &cls, &ncls, e)) return -1;
    if (ncls == 0) rc = err_set(e, "%s: no class subdirectories (expected DIR/<class>/<image>.png)", dir);
    if (!rc && ncls > classes) rc = err_set(e, "%s: %d class directories but the net has %d classes", dir, ncls, classes);
    int64_t img = (int64_t)c * h * w;
    int cap = 0;
    for (int k = 0; k < ncls && !rc; k++) {
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", dir, cls[k]);
        char **files;
        int nf;
        if (list_dir(sub, false, &files, &nf, e)) { rc = -1; break; }
        for (int i = 0; i < nf && !rc; i++) {
            char path[8192];
            snprintf(path, sizeof path, "%s/%s", sub, files[i]);
            unsigned char *rgb = NULL;
            int ih, iw;
            if (read_image(path, &rgb, &ih, &iw, e)) { rc = -1; break; }
            if (d->count == cap) { /* doubling: a folder of many images is not copied over and over */
                cap = cap ? 2 * cap : 64;
                d->images = err_realloc(d->images, (size_t)cap * (size_t)img * sizeof(float));
                d->labels = err_realloc(d->labels, (size_t)cap * sizeof(int64_t));
            }
            resize_into(rgb, ih, iw, d->images + (int64_t)d->count * img, c, h, w);
            d->labels[d->count++] = k;
            free(rgb);
        }
        free_list(files, nf);
    }
    free_list(cls, ncls);
    if (!rc && d->count == 0) rc = err_set(e, "%s: no images in the class directories", dir);
    if (rc) {
        data_free(d);
        return -1;
    }
    d->order = err_calloc((size_t)d->count, sizeof(int));
    for (int i = 0; i < d->count; i++) d->order[i] = i;
    for (int i = d->count - 1; i > 0; i--) { /* Fisher-Yates with the seed */
        int j = (int)(mix(seed * 31u + (uint64_t)i) % (uint64_t)(i + 1)), t = d->order[i];
        d->order[i] = d->order[j], d->order[j] = t;
    }
    return 0;
}

void data_free(data *d)
{
    free(d->images);
    free(d->labels);
    free(d->order);
    memset(d, 0, sizeof *d);
}

static void fill(const void *d, int iter, int n, float *images, int64_t *labels) { data_batch(d, iter, n, images, labels); }

run_batches data_batches(const data *d) { return (run_batches){fill, d}; }
