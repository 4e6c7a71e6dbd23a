"""Writes a flat token file (nanoGPT .bin: uint16 little endian, no header).

  tokens.py OUT.bin COUNT [M]   token k is (3 * k) % M (default M = 8)
"""
import struct
import sys

out, count = sys.argv[1], int(sys.argv[2])
modulus = int(sys.argv[3]) if len(sys.argv) > 3 else 8
with open(out, "wb") as f:
    f.write(struct.pack("<%dH" % count, *[(3 * k) % modulus for k in range(count)]))
