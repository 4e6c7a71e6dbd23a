"""Prints a .safetensors file as text, one tensor a line, sorted by name:
  NAME DTYPE [SHAPE] v0 v1 ...   (F32 values as %g)
after a '__metadata__ KEY=VALUE ...' line. Standard library only.
"""
import json
import struct
import sys

with open(sys.argv[1], "rb") as f:
    data = f.read()
(n,) = struct.unpack("<Q", data[:8])
header = json.loads(data[8:8 + n])
body = data[8 + n:]
meta = header.pop("__metadata__", {})
print("__metadata__", " ".join("%s=%s" % kv for kv in sorted(meta.items())))
for name in sorted(header):
    t = header[name]
    begin, end = t["data_offsets"]
    raw = body[begin:end]
    values = struct.unpack("<%df" % (len(raw) // 4), raw) if t["dtype"] == "F32" else ()
    print(name, t["dtype"], "[%s]" % ",".join(str(d) for d in t["shape"]),
          " ".join("%g" % v for v in values))
