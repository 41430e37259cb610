/* preset: the named plans (plan_presets: layer, ckpt-sqrt, ckpt:K, vdnn-*, 2ps:R, overl:R, the
 * hybrids, the LR-CNN authors' configurations, torch and torch2) turned into segments for a net, at
 * clean cuts and band counts derived from its layers, never hand-written offsets. Above the custom
 * syntax (syntax.h), which the authors' presets are written in. */
#ifndef LRCNN_PRESET_H
#define LRCNN_PRESET_H

#include "sim/plan/plan.h"

/* The preset named in buf into p's segments; -1 with e set for a name that is none, or a net that
 * lacks what the preset needs. */
int preset_parse(plan *p, const net *n, const char *buf, err *e);

#endif
