#!/usr/bin/python3
"""Writes a one-file TFRecord dataset of 4 tf.train.Example JPEGs (32x24, PIL) in
which record 1 is hostile, for the bad-input corpus (issue 52, item 4):
  truncated     record 1's JPEG cut in the middle of its scan data (no EOI)
  short-scan    record 1's scan data cut to half, then the EOI marker: the
                entropy-coded data ends before the frame is filled
  cmyk          every JPEG is CMYK (Adobe APP14, as PIL and Photoshop write them)
  gzip-length   the file is gzip; record 1's length (with a valid length CRC)
                declares 2^40 data bytes
  nested        record 1 is 20,000 protobuf messages nested in one another
  hostile-key   record 1's image is under a 5,000-byte key holding a newline,
                a terminal escape and a forged 'tpusim: error:' line
  labels        record 1's label is 5 (the logistic loss takes 0 or 1)
The file is OUT_DIR/part-00000.tfrecord; labels are the record numbers.

Usage: write_bad_tfrecord.py OUT_DIR KIND"""
import gzip
import io
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tfrecord_lib  # noqa: E402
from write_tfrecord_dataset import image_of  # noqa: E402


def jpeg_of(r, cmyk):
    img = image_of(0, r, 32, 24)
    buf = io.BytesIO()
    (img.convert('CMYK') if cmyk else img).save(buf, format='JPEG', quality=90)
    return buf.getvalue()


def cut_scan(jpeg):
    """The JPEG up to the middle of its scan data."""
    sos = jpeg.index(b'\xff\xda')
    start = sos + 2 + struct.unpack('>H', jpeg[sos + 2:sos + 4])[0]
    end = jpeg.rindex(b'\xff\xd9')
    return jpeg[:start + (end - start) // 2]


def example(jpeg, label):
    return tfrecord_lib.encode_example([('image/encoded', 'bytes', [jpeg]), ('image/format', 'bytes', [b'jpeg']),
                                        ('image/class/label', 'int64', [label])])


def huge_length_record():
    """A record header declaring 2^40 data bytes with a valid length CRC, then a little data."""
    header = struct.pack('<Q', 1 << 40)
    return header + struct.pack('<I', tfrecord_lib.masked_crc(header)) + b'\0' * 64


def nested_record(depth):
    """`depth` length-delimited field-1 messages, each holding the next."""
    payload = b''
    for _ in range(depth):
        payload = tfrecord_lib._field(1, payload)
    return payload


def hostile_key_example(jpeg):
    key = '\n\x1b[31mtpusim: error: INJECTED' + 'k' * 5000
    return tfrecord_lib.encode_example([(key, 'bytes', [jpeg]), ('image/class/label', 'int64', [0])])


def main():
    out, kind = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    blob = b''
    for r in range(4):
        jpeg = jpeg_of(r, kind == 'cmyk')
        if r == 1 and kind == 'truncated':
            jpeg = cut_scan(jpeg)
        if r == 1 and kind == 'short-scan':
            jpeg = cut_scan(jpeg) + b'\xff\xd9'
        if r == 1 and kind == 'gzip-length':
            blob += huge_length_record()
            break
        label = r
        if kind == 'labels':
            label = 5 if r == 1 else r % 2
        record = example(jpeg, label)
        if r == 1 and kind == 'nested':
            record = nested_record(20000)
        if r == 1 and kind == 'hostile-key':
            record = hostile_key_example(jpeg)
        blob += tfrecord_lib.frame(record)
    if kind == 'gzip-length':
        blob = gzip.compress(blob, mtime=0)
    with open(os.path.join(out, 'part-00000.tfrecord'), 'wb') as f:
        f.write(blob)


if __name__ == '__main__':
    main()
