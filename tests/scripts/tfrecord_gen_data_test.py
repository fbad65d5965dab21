#!/usr/bin/python3
"""gen-data --format tfrecord read back by an independent reader (issue 17,
acceptance 2): tests/scripts/tfrecord_lib.py (standard library only, its own
CRC-32C) checks the framing and both CRCs of every record and decodes each
tf.train.Example; PIL decodes every JPEG. Shard names, example counts per
shard, the Example fields and the labels' range are checked exactly.

Usage: tfrecord_gen_data_test.py TPUSIM SOURCE_ROOT"""
import io
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tfrecord_lib  # noqa: E402
from PIL import Image  # noqa: E402


def main():
    tpusim, root = sys.argv[1], sys.argv[2]
    config = os.path.join(root, 'configs', 'runs', 'v4-8-real-work.yaml')
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, 'data')
        for compression in ('none', 'gzip'):
            subprocess.run([tpusim, 'gen-data', config, '--format', 'tfrecord', '--out', out, '--examples', '14',
                            '--shards', '4', '--image-size', '80x60', '--jpeg-quality', '85', '--classes', '10',
                            '--name', 'tiny', '--compression', compression], check=True)
        names = sorted(os.listdir(out))
        # The shards and the hidden marker that lets gen-data replace the folder whole.
        assert '.tpusim-dataset' in names, names
        names.remove('.tpusim-dataset')
        expected = [f'tiny-train.tfrecord-{i:05d}-of-00004' for i in range(4)]
        assert names == expected, names
        # The last run wrote gzip; write uncompressed again for the framing check.
        subprocess.run([tpusim, 'gen-data', config, '--format', 'tfrecord', '--out', out, '--examples', '14',
                        '--shards', '4', '--image-size', '80x60', '--jpeg-quality', '85', '--classes', '10',
                        '--name', 'tiny'], check=True)
        labels = []
        for i, name in enumerate(names):
            with open(os.path.join(out, name), 'rb') as f:
                records = tfrecord_lib.read_records(f.read())
            assert len(records) == (4 if i < 2 else 3), (name, len(records))
            for _, data in records:
                ex = tfrecord_lib.decode_example(data)
                assert set(ex) == {'image/encoded', 'image/format', 'image/height', 'image/width',
                                   'image/class/label'}, sorted(ex)
                assert ex['image/format'] == ('bytes', [b'jpeg'])
                assert ex['image/height'] == ('int64', [60]) and ex['image/width'] == ('int64', [80])
                kind, (label,) = ex['image/class/label']
                assert kind == 'int64' and 0 <= label < 10, label
                labels.append(label)
                image = Image.open(io.BytesIO(ex['image/encoded'][1][0]))
                assert image.format == 'JPEG' and image.size == (80, 60) and image.mode == 'RGB'
                image.load()
                # Structured, not flat: many distinct colours.
                assert len(set(image.getdata())) > 200
        assert len(set(labels)) > 3, labels
    print(f'ok: 4 shards, 14 examples, labels {labels}')


if __name__ == '__main__':
    main()
