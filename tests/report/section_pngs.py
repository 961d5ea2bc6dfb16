#!/usr/bin/env python3
"""Cuts a `tinyfold report` page into one PNG per section (for docs/img/):
each section goes into a page of its own (the report's CSS, nothing else),
headless Chromium screenshots it, and the white margin below is cropped.
Usage: section_pngs.py CHROMIUM report.html OUTDIR PREFIX [id...]"""
import os
import re
import struct
import subprocess
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from png_check import decode  # noqa: E402


def write_png(path, w, rows, bpp):
    raw = b"".join(b"\x00" + r for r in rows)
    def chunk(kind, body):
        c = struct.pack(">I", len(body)) + kind + body
        return c + struct.pack(">I", zlib.crc32(kind + body) & 0xffffffff)
    ihdr = struct.pack(">IIBBBBB", w, len(rows), 8, 2 if bpp == 3 else 6, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) +
                chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def main():
    chrome, page, outdir, prefix = sys.argv[1:5]
    want = sys.argv[5:]
    html = open(page, encoding="utf-8").read()
    head = html[:html.index("<body>")]
    tmp = tempfile.mkdtemp()
    for m in re.finditer(r'<section id="(\w+)">.*?</section>', html, re.S):
        sid = m.group(1)
        if want and sid not in want:
            continue
        one = os.path.join(tmp, sid + ".html")
        with open(one, "w", encoding="utf-8") as f:
            f.write(head + '<body style="margin:8px 16px">' + m.group(0) + "</body></html>\n")
        png = os.path.join(tmp, sid + ".png")
        subprocess.run([chrome, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                        "--hide-scrollbars",
                        "--screenshot=" + png, "--window-size=1180,3000", "file://" + one],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        w, h, bpp, rows = decode(png)
        white = b"\xff" * (w * bpp) if bpp == 3 else None
        last = 0
        for y, r in enumerate(rows):
            if (r != white) if white else any(r[i:i + 3] != b"\xff\xff\xff" for i in range(0, len(r), bpp)):
                last = y
        rows = rows[:min(h, last + 12)]
        out = os.path.join(outdir, "%s-%s.png" % (prefix, sid))
        write_png(out, w, rows, bpp)
        print(out, w, len(rows))


if __name__ == "__main__":
    main()
