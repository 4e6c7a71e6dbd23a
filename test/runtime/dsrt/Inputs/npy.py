"""Writes .npy files without numpy (format 1.0, little endian, C order), so
the dsrt tests need no numpy.

  npy.py OUT.npy DTYPE D0xD1x... [M]   (DTYPE: f4 f8 i8 i4 u2; '' = 0-d)
Values are deterministic: element k is (k % M, default 2) for integers and
((k % 11) - 5) / 10 for floats.
"""
import struct
import sys

CODES = {"f4": ("<f4", "f"), "f8": ("<f8", "d"), "i8": ("<i8", "q"),
         "i4": ("<i4", "i"), "u2": ("<u2", "H")}


def main(out, dtype, dims, modulus="2"):
    shape = tuple(int(d) for d in dims.split("x")) if dims else ()
    descr, fmt = CODES[dtype]
    n = 1
    for d in shape:
        n *= d
    shape_text = "(%s)" % (", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else ""))
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_text)
    # Magic (6) + version (2) + header length (2) + header, padded to 64.
    pad = (64 - (10 + len(header) + 1) % 64) % 64
    header = header + " " * pad + "\n"
    if fmt in "fd":
        values = [((k % 11) - 5) / 10.0 for k in range(n)]
    else:
        values = [k % int(modulus) for k in range(n)]
    with open(out, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(struct.pack("<%d%s" % (n, fmt), *values))


if __name__ == "__main__":
    main(*sys.argv[1:])
