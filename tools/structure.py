#!/usr/bin/env python3
"""The tree's structure as a reader meets it: files, functions, who calls whom, and the rules.

    python3 tools/structure.py [--check] [--rooms] [--circles] [--walk FUNCTION [--follow NAME]] [ROOT]

Reads every C and CUDA file the project tracks (git ls-files; tests and tools included), strips
comments and strings, and finds each top-level function definition and the calls inside it
(identifiers followed by a parenthesis that name a function defined in the tree). From these:

  --check    the house rules, each offender named: no source file over 600 lines (C, CUDA, Python,
             shell), no C function over 100 lines, and no circle of files that call each other
             (the files of a strongly connected component of the file call graph, with one call
             each way as the evidence). Exit 1 when any rule is broken.
  --rooms    each folder of sim/ with its files and lines, and which rooms it calls: a room may call
             only rooms below it, so the list is in order, lowest first.
  --circles  the circles alone.
  --walk F   the walk through the calls from function F, depth first, each function once (with
             --follow NAME only into functions that take a parameter named NAME): the files it stops
             in, in order, how often it returns to a file it had left, and the same by room (folder).

Limits: a heuristic reader, not a compiler. Function pointers (ops tables, qsort) are not calls
it sees; macros are not expanded; static functions of the same name in two files are told apart by
file, a call resolving to the caller's own file first.
"""
import argparse
import os
import re
import subprocess
import sys
from collections import defaultdict

MAX_FILE, MAX_FUNC = 600, 100
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "do", "else", "case", "defined", "__attribute__",
            "__typeof__", "typeof", "_Alignof", "alignof", "offsetof"}


def tracked(root, patterns):
    """The project's files matching patterns: git's list, or (no git) every file outside build trees."""
    r = subprocess.run(["git", "-C", root, "ls-files", *patterns], capture_output=True, text=True)
    if r.returncode == 0:
        return [f for f in r.stdout.split() if os.path.exists(os.path.join(root, f))]
    import fnmatch
    out = []
    for d, subdirs, names in os.walk(root):
        subdirs[:] = [s for s in subdirs if not s.startswith((".", "build"))]
        out += [os.path.relpath(os.path.join(d, n), root) for n in names if any(fnmatch.fnmatch(n, p) for p in patterns)]
    return sorted(out)


def strip(text):
    """Comments and string/char literals replaced by spaces (newlines kept, so lines still count)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j]) + c)
            i = j + 1
        elif c == "#" and (i == 0 or text[i - 1] == "\n"):  # preprocessor lines (continued with backslash)
            j = i
            while True:
                k = text.find("\n", j)
                if k < 0:
                    k = n
                    break
                if text[k - 1] != "\\":
                    break
                j = k + 1
            out.append(re.sub(r"[^\n]", " ", text[i:k]))
            i = k
        else:
            out.append(c)
            i += 1
    return "".join(out)


DEF = re.compile(r"([A-Za-z_]\w*)\s*\(([^;{}]*)\)\s*(?:__attribute__\s*\(\(.*?\)\)\s*)?$", re.S)
CALL = re.compile(r"(?<![\w.>])([A-Za-z_]\w*)\s*\(")  # not a member (x.f(, x->f(): a pointer


def functions(path, text):
    """[(name, params, first line, last line, body, static)] of the top-level function definitions."""
    s = strip(text)
    found, depth, start, i = [], 0, 0, 0
    head_from = 0
    while i < len(s):
        c = s[i]
        if c == "{":
            if depth == 0:
                head = s[head_from:i].rstrip()
                m = DEF.search(head)
                before = head[:m.start()] if m else ""
                if m and m.group(1) not in KEYWORDS and not re.search(r"\b(struct|enum|union)\s*\w*\s*$", before) \
                        and "=" not in head[max(0, head.rfind(";")):] and re.search(r"\w", before.split(";")[-1]):
                    start = i
                    name, params = m.group(1), m.group(2)
                    static = re.search(r"\bstatic\b", before.split(";")[-1].split("}")[-1]) is not None
                else:
                    name = None
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                if name:
                    first = s.count("\n", 0, s.rfind("\n", 0, start) + 1) + 1
                    head_line = s.count("\n", 0, head_from) + 1
                    last = s.count("\n", 0, i) + 1
                    found.append((name, params, max(head_line, first - 3), last, s[start:i + 1], static))
                name = None
                head_from = i + 1
        elif c == ";" and depth == 0:
            head_from = i + 1
        i += 1
    return found


def read_tree(root):
    files = tracked(root, ["*.c", "*.h", "*.cu", "*.cuh"])
    defs = defaultdict(list)  # name -> [file] where it is visible from other files
    local = defaultdict(set)  # file -> its static functions
    funcs = {}  # (file, name) -> (params, first, last, body)
    for f in files:
        with open(os.path.join(root, f), errors="replace") as h:
            text = h.read()
        for name, params, first, last, body, static in functions(f, text):
            funcs[(f, name)] = (params, first, last, body)
            if static:
                local[f].add(name)
            else:
                defs[name].append(f)
    calls = defaultdict(list)  # (file, name) -> [(file, name)] in order
    for key, (_, _, _, body) in funcs.items():
        seen = set()
        for m in CALL.finditer(body):
            callee = m.group(1)
            if callee in KEYWORDS or callee in seen or (callee not in defs and callee not in local[key[0]]):
                continue
            seen.add(callee)
            where = key[0] if callee in local[key[0]] or key[0] in defs[callee] else defs[callee][0]
            calls[key].append((where, callee))
    return files, funcs, calls


def file_graph(funcs, calls):
    g, why = defaultdict(set), {}
    for caller, callees in calls.items():
        for callee in callees:
            if callee[0] != caller[0]:
                g[caller[0]].add(callee[0])
                why.setdefault((caller[0], callee[0]), (caller[1], callee[1]))
    return g, why


def circles(g):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    nodes = set(g) | {v for vs in g.values() for v in vs}

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def lines_of(root, patterns):
    out = []
    for f in tracked(root, patterns):
        with open(os.path.join(root, f), errors="replace") as h:
            out.append((sum(1 for _ in h), f))
    return out


def check(root, funcs, g, why):
    bad = 0
    for n, f in sorted(lines_of(root, ["*.c", "*.h", "*.cu", "*.cuh", "*.py", "*.sh"]), reverse=True):
        if n > MAX_FILE:
            print("file over %d lines: %s (%d)" % (MAX_FILE, f, n))
            bad += 1
    for (f, name), (_, first, last, _) in sorted(funcs.items()):
        if last - first + 1 > MAX_FUNC:
            print("function over %d lines: %s in %s:%d (%d)" % (MAX_FUNC, name, f, first, last - first + 1))
            bad += 1
    for comp in circles(g):
        print("files that call each other: %s" % ", ".join(comp))
        for a in comp:
            for b in comp:
                if (a, b) in why:
                    print("    %s: %s calls %s (%s)" % (a, why[(a, b)][0], why[(a, b)][1], b))
        bad += 1
    print("%s: %d broken" % ("house rules" if bad else "house rules hold", bad))
    return bad


def rooms(root, g):
    per = defaultdict(list)
    for n, f in lines_of(root, ["sim/*.c", "sim/*.h"]):
        per[os.path.dirname(f)].append((f, n))
    uses = defaultdict(set)
    for a, bs in g.items():
        for b in bs:
            ra, rb = os.path.dirname(a), os.path.dirname(b)
            if ra.startswith("sim") and rb.startswith("sim") and ra != rb:
                uses[ra].add(rb)
    order, done = [], set()

    def place(r, path=()):
        if r in done or r in path:
            return
        for u in sorted(uses[r]):
            place(u, path + (r,))
        done.add(r)
        order.append(r)

    for r in sorted(per):
        place(r)
    for r in order:
        total = sum(n for _, n in per[r])
        print("%-16s %5d lines  calls: %s" % (r + "/", total, ", ".join(sorted(u + "/" for u in uses[r])) or "-"))
        for f, n in sorted(per[r]):
            print("    %-32s %5d" % (os.path.basename(f), n))


def walk(funcs, calls, start, follow):
    starts = [k for k in funcs if k[1] == start]
    if not starts:
        sys.exit("structure: no function %s" % start)
    seen, stops, trail = set(), [], []

    def takes(key):
        return follow is None or re.search(r"\b%s\b" % re.escape(follow), funcs[key][0] or "") is not None

    def go(key):
        seen.add(key)
        if not trail or trail[-1] != key[0]:
            trail.append(key[0])
        for callee in calls.get(key, ()):
            if callee in seen or callee not in funcs or not takes(callee):
                continue
            go(callee)
            if trail[-1] != key[0]:
                trail.append(key[0])

    go(starts[0])
    def report(what, t):
        back = sum(1 for i, f in enumerate(t) if f in t[:i])
        print("walk from %s%s: %d stops in %d %s, %d returns to one already left" % (
            start, " following " + follow if follow else "", len(t), len(set(t)), what, back))
        print("  " + " -> ".join(t))

    report("files", trail)
    rooms_t = []
    for f in trail:
        r = os.path.dirname(f)
        if not rooms_t or rooms_t[-1] != r:
            rooms_t.append(r)
    report("rooms", rooms_t)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root", nargs="?", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--rooms", action="store_true")
    ap.add_argument("--circles", action="store_true")
    ap.add_argument("--walk")
    ap.add_argument("--follow", default=None)
    a = ap.parse_args()
    files, funcs, calls = read_tree(a.root)
    g, why = file_graph(funcs, calls)
    rc = 0
    if a.check:
        rc = 1 if check(a.root, funcs, g, why) else 0
    if a.rooms:
        rooms(a.root, g)
    if a.circles:
        for comp in circles(g):
            print(", ".join(comp))
    if a.walk:
        walk(funcs, calls, a.walk, a.follow)
    if not (a.check or a.rooms or a.circles or a.walk):
        print("%d files, %d functions; --check, --rooms, --circles or --walk F" % (len(files), len(funcs)))
    return rc


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # a reader that stopped early (head)
        sys.exit(0)
