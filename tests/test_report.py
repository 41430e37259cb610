#!/usr/bin/python3
"""The report PDF renders: paper/report.pdf, as committed, drawn page by page (pdftoppm).

    /usr/bin/python3 tests/test_report.py [paper/report.pdf]

Checks that the PDF has between MIN_PAGES and MAX_PAGES pages, that no page is blank (ink on at
least 1% of it), that nothing is drawn in the page's right and bottom margins (a figure or table
wider than the text is cut off there), that every figure the report's source embeds is in it (as
many images as ![](...) in paper/README.md), and that the source speaks of the work, not of the
sessions that made it. Exit status 0 when all hold, 1 otherwise, a line per check.
"""

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
        n_images = sum(1 for line in images.splitlines()[2:] if line.split() and line.split()[2] == "image")
    md = open(os.path.join(SRC, "paper", "README.md"), encoding="utf-8").read()
    figures = len(re.findall(r"!\[[^\]]*\]\(figures/[^)]+\.png\)", md))
    check(figures > 0 and n_images >= figures, "%d images in the PDF for the %d figures of paper/README.md" % (n_images, figures))
    internal = re.findall(r"[^.\n]*\b(?:this session|sessions?\b|issue #?\d+|tracker)[^.\n]*", md, re.I)
    check(not internal, "paper/README.md speaks of the work, not of sessions or issues%s" %
          ("" if not internal else ": '%s'" % internal[0].strip()[:80]))
    print("%s" % ("all passed" if not fails else "%d failed" % fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
