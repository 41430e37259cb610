/* syntax: the custom plan syntax (PLANS.md) — "mode@first..last; ...", rows(policy, fp=R, bp=R),
 * offload lists with their timings — parsed into a plan's segments, and the small pieces of text
 * every part of the plan language shares. Below the presets (preset.h) and plan_parse (plan.h),
 * which validates what this builds against the net. */
#ifndef LRCNN_SYNTAX_H
#define LRCNN_SYNTAX_H

#include "sim/plan/plan.h"

/* The segment modes' names, by plan_mode. */
extern const char *const syntax_mode_names[];

/* Appends a segment of mode m over layers [first, last]. */
plan_seg *syntax_seg_push(plan *p, plan_mode m, int first, int last);
/* t without its leading and trailing blanks (in place). */
char *syntax_trim(char *t);
/* A band or segment count, 1..PLAN_MAX_BANDS; -1 otherwise. */
int syntax_count(const char *s, int *out);
/* The custom plan in buf (modifiers and bn= already taken off) into p's segments. */
int syntax_custom(plan *p, const net *n, char *buf, err *e);

#endif
