#!/usr/bin/python3
"""Writes a small TFRecord dataset of tf.train.Example JPEGs outside tpusim
(issue 17): the framing and Examples by tests/scripts/tfrecord_lib.py (standard
library only, its own CRC-32C), the JPEGs by PIL. Record r of file f has label
100 * f + r. Beside the files, expected/ holds each image as PIL decodes it
(F-R.rgb, raw RGB rows) and expected/labels.txt "F R LABEL" lines, for tests
that compare what tpusim read with an independent decode.

Usage: write_tfrecord_dataset.py OUT_DIR [FILES [RECORDS [WIDTHxHEIGHT]]]"""
import io
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tfrecord_lib  # noqa: E402
from PIL import Image, ImageDraw  # noqa: E402


def image_of(f, r, width, height):
    img = Image.new('RGB', (width, height))
    px = img.load()
    for y in range(height):
        for x in range(width):
            px[x, y] = ((x * 255) // width, (y * 255) // height, (40 * f + 13 * r) % 256)
    draw = ImageDraw.Draw(img)
    draw.ellipse((r % 7, f % 5, width // 2 + r, height // 2 + f), fill=((70 * r) % 256, 200, (90 * f) % 256))
    return img


def main():
    out = sys.argv[1]
    files = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    records = int(sys.argv[3]) if len(sys.argv) > 3 else 6
    width, height = (int(v) for v in (sys.argv[4] if len(sys.argv) > 4 else '64x48').split('x'))
    os.makedirs(os.path.join(out, 'expected'), exist_ok=True)
    labels = []
    for f in range(files):
        blob = b''
        for r in range(records):
            buf = io.BytesIO()
            image_of(f, r, width, height).save(buf, format='JPEG', quality=90)
            jpeg = buf.getvalue()
            label = 100 * f + r
            example = tfrecord_lib.encode_example([
                ('image/encoded', 'bytes', [jpeg]),
                ('image/format', 'bytes', [b'jpeg']),
                ('image/class/label', 'int64', [label]),
            ])
            blob += tfrecord_lib.frame(example)
            with open(os.path.join(out, 'expected', f'{f}-{r}.rgb'), 'wb') as e:
                e.write(Image.open(io.BytesIO(jpeg)).convert('RGB').tobytes())
            labels.append(f'{f} {r} {label}')
        with open(os.path.join(out, f'part-{f:05d}.tfrecord'), 'wb') as o:
            o.write(blob)
    with open(os.path.join(out, 'expected', 'labels.txt'), 'w') as o:
        o.write('\n'.join(labels) + '\n')


if __name__ == '__main__':
    main()
