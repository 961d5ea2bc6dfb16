#!/usr/bin/env python3
"""Is a PNG a real picture? Decodes it with the standard library only and
prints its size, distinct colours, share of non-white pixels and count of
coloured ones (not grey: channels more than 40 apart); exits 1 when it looks
blank (too few colours, almost all white, or fewer coloured pixels than
asked: grey text alone is no chart).
Usage: png_check.py FILE.png [min_colours] [min_nonwhite_fraction] [min_coloured_pixels]"""
import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, w = 8, [], None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            if depth != 8 or ctype not in (2, 6):
                raise ValueError("only 8-bit RGB/RGBA PNGs are read")
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + n
    raw = zlib.decompress(b"".join(idat))
    stride = w * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif f == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif f == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif f == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pr = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pr) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def main():
    path = sys.argv[1]
    min_colours = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    min_ink = float(sys.argv[3]) if len(sys.argv) > 3 else 0.02
    min_coloured = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    w, h, bpp, rows = decode(path)
    colours, ink, coloured = set(), 0, 0
    for line in rows:
        for x in range(0, w * bpp, bpp):
            px = line[x:x + 3]
            colours.add(px)
            if px != b"\xff\xff\xff":
                ink += 1
                if max(px) - min(px) > 40:
                    coloured += 1
    frac = ink / float(w * h)
    print("%s: %dx%d, %d distinct colours, %.1f%% non-white, %d coloured pixels"
          % (path, w, h, len(colours), 100 * frac, coloured))
    if len(colours) < min_colours or frac < min_ink or coloured < min_coloured:
        print("looks blank (want >= %d colours, >= %.0f%% non-white and >= %d coloured pixels)"
              % (min_colours, 100 * min_ink, min_coloured))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
