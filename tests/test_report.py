#!/usr/bin/python3
"""The report PDF renders: paper/report.pdf, as committed, drawn page by page (pdftoppm).

    /usr/bin/python3 tests/test_report.py [paper/report.pdf]

Checks that the PDF has between MIN_PAGES and MAX_PAGES pages, that no page is blank (ink on at
least 1% of it), that nothing is drawn in the page's right and bottom margins (a figure or table
wider than the text is cut off there), that every figure the report's source embeds is in it (as
many images as ![](...) in paper/README.md), and that the source speaks of the work, not of the
sessions that made it. And what a reader of a figure needs: each figure's caption is on the page
its image is on; no figure's own text names a file path (paper/figures/*.pdf keep their text);
each caption names its source (a spec or a result file), the optimizer, the batch and whether its
numbers are measured or predicted, and the BatchNorm mode where a net of its specs has BatchNorm;
the stylesheet keeps table rows whole across page breaks, and a table's caption ("Table: ...") or
label line ("resnet50 at 224x224, batch 8, sgd:") is on the page its header row starts. Exit status 0 when all hold, 1
otherwise, a line per check.
"""

import functools
import glob
import os
import re
import subprocess
import sys
import tempfile

from PIL import Image

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIN_PAGES, MAX_PAGES = 5, 30
DPI = 30
MARGIN = 0.035  # of the page's width or height: inside the 15-18 mm margins of paper/report.css

fails = 0


def check(cond, msg):
    global fails
    print(("ok   " if cond else "FAIL ") + msg)
    fails += not cond


def ink(im, box):
    """Fraction of the box's pixels that are not near-white."""
    px = im.crop(box).convert("L").getdata()
    return sum(1 for v in px if v < 235) / max(1, len(px))


@functools.lru_cache(maxsize=None)
def bn_nets():
    """Nets (by file name) with a BatchNorm layer (read once)."""
    out = set()
    for f in os.listdir(os.path.join(SRC, "nets")):
        if f.endswith(".net"):
            with open(os.path.join(SRC, "nets", f), encoding="utf-8") as h:
                if any(line.split()[:1] == ["bn"] for line in h):
                    out.add(f[:-4])
    return out


def spec_nets(path):
    """The nets a spec file runs, or none."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            key, _, value = line.partition("=")
            if key.strip() == "nets":
                return {v.strip() for v in value.split("#")[0].split(",") if v.strip()}
    return set()


def caption_settings(caption):
    """(what, present) for each setting a figure's caption must state."""
    specs = re.findall(r"([\w*-]+\.spec)", caption)
    nets = set()
    for s in specs:
        for f in glob.glob(os.path.join(SRC, "experiments", s)):
            nets |= spec_nets(f)
    return [("source (spec or result file)", bool(specs) or ".h5" in caption or re.search(r"results/\w+\.txt", caption) is not None),
            ("optimizer", re.search(r"\b(Adam|SGD)\b", caption) is not None),
            ("batch", re.search(r"\bbatch|\bb\d+\b", caption) is not None),
            ("measured or predicted", re.search(r"measured|predicted|simulated", caption) is not None),
            ("BatchNorm mode", not (nets & bn_nets()) or re.search(r"\bBN\b|BatchNorm", caption) is not None)]


def main():
    pdf = sys.argv[1] if len(sys.argv) > 1 else os.path.join(SRC, "paper", "report.pdf")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["pdftoppm", "-r", str(DPI), "-png", pdf, os.path.join(tmp, "p")], check=True)
        pages = sorted(f for f in os.listdir(tmp) if f.endswith(".png"))
        check(MIN_PAGES <= len(pages) <= MAX_PAGES, "%d pages (between %d and %d)" % (len(pages), MIN_PAGES, MAX_PAGES))
        for name in pages:
            im = Image.open(os.path.join(tmp, name))
            w, h = im.size
            n = int(re.search(r"(\d+)", name).group(1))
            full = ink(im, (0, 0, w, h))
            right = ink(im, (int(w * (1 - MARGIN)), 0, w, h))
            bottom = ink(im, (0, int(h * (1 - MARGIN / 2)), w, h))
            check(full > 0.01, "page %d is not blank (ink %.1f%%)" % (n, 100 * full))
            check(right < 0.001 and bottom < 0.001, "page %d: nothing in the right or bottom margin (%.2f%%, %.2f%%)"
                  % (n, 100 * right, 100 * bottom))
        images = subprocess.run(["pdfimages", "-list", pdf], capture_output=True, text=True, check=True).stdout
        image_pages = [int(line.split()[0]) for line in images.splitlines()[2:] if line.split() and line.split()[2] == "image"]
        n_images = len(image_pages)
        for k, page in enumerate(image_pages, 1):  # the k-th image is Figure k: its caption on its page
            text = subprocess.run(["pdftotext", "-f", str(page), "-l", str(page), "-layout", pdf, "-"], capture_output=True,
                                  text=True, check=True).stdout
            check("Figure %d." % k in text, "Figure %d's caption is on its page (%d)" % (k, page))
        label = re.compile(r"^\s*(?:\S+ at \d+x\d+, batch \d+, \w+:|Table: .*)$")
        for page in range(1, len(pages) + 1):  # a table's caption or label line and its header row, one page
            lines = subprocess.run(["pdftotext", "-f", str(page), "-l", str(page), "-layout", pdf, "-"], capture_output=True,
                                   text=True, check=True).stdout.splitlines()
            for i, line in enumerate(lines):
                if label.match(line):
                    header = any(re.match(r"^\s*plan\s", rest) for rest in lines[i + 1:])
                    check(header, "page %d: '%s' is on its table's page" % (page, line.strip()[:60]))
    md = open(os.path.join(SRC, "paper", "README.md"), encoding="utf-8").read()
    for k, caption in enumerate(re.findall(r"^\*\*Figure \d+\..*?(?=\n\n|\Z)", md, re.S | re.M), 1):
        missing = [what for what, ok in caption_settings(caption) if not ok]
        check(not missing, "Figure %d's caption says its settings%s" % (k, "" if not missing else ": no " + ", ".join(missing)))
    for fig in sorted(f for f in os.listdir(os.path.join(SRC, "paper", "figures")) if f.endswith(".pdf")):
        text = subprocess.run(["pdftotext", os.path.join(SRC, "paper", "figures", fig), "-"], capture_output=True, text=True,
                              check=True).stdout
        path = re.search(r"(?:/\w[\w.-]*){2,}|\b[\w-]+/[\w.-]+\.(?:h5|spec|py|tsv|txt)\b", text)
        check(not path, "%s names no file path%s" % (fig, "" if not path else ": " + path.group(0)))
    css = open(os.path.join(SRC, "paper", "report.css"), encoding="utf-8").read()
    check(re.search(r"\btr\s*\{[^}]*break-inside:\s*avoid", css) is not None, "report.css keeps table rows whole (tr: break-inside avoid)")
    figures = len(re.findall(r"!\[[^\]]*\]\(figures/[^)]+\.png\)", md))
    check(figures > 0 and n_images >= figures, "%d images in the PDF for the %d figures of paper/README.md" % (n_images, figures))
    internal = re.findall(r"[^.\n]*\b(?:this session|sessions?\b|issue #?\d+|tracker)[^.\n]*", md, re.I)
    check(not internal, "paper/README.md speaks of the work, not of sessions or issues%s" %
          ("" if not internal else ": '%s'" % internal[0].strip()[:80]))
    print("%s" % ("all passed" if not fails else "%d failed" % fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
