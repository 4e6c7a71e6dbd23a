#!/usr/bin/env python3
"""A reader of TensorFlow event files, written from the format's specification
(no TensorFlow, TensorBoard or protobuf package).

A file is a sequence of TFRecords:

    uint64 length          little endian
    uint32 masked_crc32c(the 8 length bytes)
    byte   data[length]
    uint32 masked_crc32c(data)

masked_crc32c(x) = ((c >> 15) | (c << 17)) + 0xa282ead8 (mod 2^32), c the
CRC-32C (Castagnoli) of x. Each data is a protobuf-encoded tensorflow.Event
(tensorflow/core/util/event.proto): wall_time = 1 (double), step = 2
(int64), file_version = 3 (string), summary = 5 (tensorflow.Summary:
repeated Value value = 1; Value: tag = 1 (string), simple_value = 2
(float)). Protobuf's wire format: each field a varint key (number << 3 |
wire type), then a varint (type 0), 8 bytes (1), a varint length and that
many bytes (2) or 4 bytes (5).

    read_tfevents.py FILE...   prints each scalar as "tag step value"

Library use: events(path) yields dicts {wall_time, step, file_version,
scalars: [(tag, value)]}; it raises ValueError on a bad CRC, a truncated
record or malformed protobuf.
"""
import struct
import sys

_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ (0x82F63B78 if _c & 1 else 0)
    _TABLE.append(_c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc32c(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(buf, i):
    shift = value = 0
    while True:
        if i >= len(buf):
            raise ValueError("truncated varint")
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 64 bits")


def fields(buf):
    """(number, wire type, value) of each field of a protobuf message."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 2:
            n, i = _varint(buf, i)
            value, i = buf[i:i + n], i + n
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wire)
        if i > len(buf):
            raise ValueError("field %d runs past the message" % number)
        yield number, wire, value


def _event(data):
    ev = {"wall_time": None, "step": 0, "file_version": None, "scalars": []}
    for number, wire, value in fields(data):
        if number == 1 and wire == 1:
            ev["wall_time"] = struct.unpack("<d", value)[0]
        elif number == 2 and wire == 0:
            ev["step"] = value - (1 << 64) if value >= 1 << 63 else value
        elif number == 3 and wire == 2:
            ev["file_version"] = value.decode("utf-8")
        elif number == 5 and wire == 2:
            for n, w, v in fields(value):
                if n != 1 or w != 2:
                    continue
                tag, simple = None, None
                for vn, vw, vv in fields(v):
                    if vn == 1 and vw == 2:
                        tag = vv.decode("utf-8")
                    elif vn == 2 and vw == 5:
                        simple = struct.unpack("<f", vv)[0]
                ev["scalars"].append((tag, simple))
    return ev


def events(path):
    with open(path, "rb") as f:
        raw = f.read()
    i = 0
    while i < len(raw):
        if i + 12 > len(raw):
            raise ValueError("%s: truncated record header at byte %d" % (path, i))
        header = raw[i:i + 8]
        (length,) = struct.unpack("<Q", header)
        (crc,) = struct.unpack("<I", raw[i + 8:i + 12])
        if crc != masked_crc32c(header):
            raise ValueError("%s: bad length CRC at byte %d" % (path, i))
        data = raw[i + 12:i + 12 + length]
        if len(data) != length or i + 16 + length > len(raw):
            raise ValueError("%s: truncated record at byte %d" % (path, i))
        (crc,) = struct.unpack("<I", raw[i + 12 + length:i + 16 + length])
        if crc != masked_crc32c(data):
            raise ValueError("%s: bad data CRC at byte %d" % (path, i))
        yield _event(data)
        i += 16 + length


def main():
    for path in sys.argv[1:]:
        for ev in events(path):
            if ev["file_version"]:
                print("file_version %s" % ev["file_version"])
            for tag, value in ev["scalars"]:
                print("%s %d %r" % (tag, ev["step"], value))


if __name__ == "__main__":
    main()
