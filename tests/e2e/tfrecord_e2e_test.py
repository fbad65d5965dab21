#!/usr/bin/python3
"""input.source: tfrecord end to end (issue 17, acceptance 1): a dataset written
outside tpusim (tests/scripts/write_tfrecord_dataset.py: standard-library framing
with its own CRC-32C, PIL JPEGs) infeeds on a v4-8 under mpirun; the placement log
names every record exactly once per epoch (example id = file * 10^9 + record) and
the report counts the examples and the steps CSV times each stage; one flipped byte in one record's data is one line
naming that file and byte offset with exit 2; with skip_corrupt the run finishes
and counts one skipped record.

Usage: tfrecord_e2e_test.py TPUSIM SOURCE_ROOT"""
import json
import os
import subprocess
import sys
import tempfile

STRIDE = 10**9


def run(tpusim, config, tmp, *extra):
    cmd = ['timeout', '-k', '5', '120', 'mpirun', '-np', '5', '--oversubscribe', '--bind-to', 'none', tpusim, 'run',
           config, '--quiet', '--report', os.path.join(tmp, 'report.json'), '--placement-log',
           os.path.join(tmp, 'placement.jsonl'), *extra]
    return subprocess.run(cmd, capture_output=True, text=True)


def write_config(tmp, data, skip_corrupt):
    path = os.path.join(tmp, 'run.yaml')
    with open(path, 'w') as f:
        f.write(f'''topology: v4-8
input:
  source: tfrecord
  files: [{data}/part-*.tfrecord]
  tfrecord: {{compression: none, verify_crc: true, skip_corrupt: {str(skip_corrupt).lower()}}}
  global_batch: 4
  features:
    image: {{key: image/encoded, kind: bytes, decode: jpeg, resize: [48, 64], crop: none, dtype: uint8}}
    label: {{key: image/class/label, kind: int64}}
model:
  enabled: false
train:
  steps: 3
  iterations_per_loop: 3
''')
    return path


def main():
    tpusim, root = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, 'data')
        subprocess.run(['/usr/bin/python3', os.path.join(root, 'tests', 'scripts', 'write_tfrecord_dataset.py'), data,
                        '2', '6', '64x48'], check=True)
        # 3 steps x 4 examples = the 12 records once: file 0 and 1 interleaved (one reader).
        config = write_config(tmp, data, False)
        csv_path = os.path.join(tmp, 'steps.csv')
        r = run(tpusim, config, tmp, '--steps-csv', csv_path)
        assert r.returncode == 0, r.stdout + r.stderr
        with open(csv_path) as f:
            header = f.readline().strip().split(',')
            rows = [dict(zip(header, line.strip().split(','))) for line in f]
        assert len(rows) == 3 * 4, len(rows)  # 3 steps x 4 cores
        assert all(float(row['host_decode_cpu_s']) > 0 and float(row['host_read_s']) >= 0 for row in rows)
        ids = []
        with open(os.path.join(tmp, 'placement.jsonl')) as f:
            for line in f:
                entry = json.loads(line)
                tensors = entry['tensors']
                image_ids = tensors['image']['example_ids']
                assert tensors['label']['example_ids'] == image_ids
                assert tensors['image']['shape'][1:] == [48, 64, 3], tensors['image']['shape']
                ids += image_ids
        records = sorted((i // STRIDE, i % STRIDE) for i in ids)
        assert records == [(f, r) for f in range(2) for r in range(6)], records
        report = json.load(open(os.path.join(tmp, 'report.json')))
        host = report['hosts'][0]
        assert host['costs']['examples'] == 12, host['costs']
        assert host['tfrecord']['skipped_records'] == 0 and host['tfrecord']['files_total'] == 2
        assert host['tfrecord']['decode']['cpu_s'] > 0

        # One flipped byte inside record 2 of file 1's data: 6 records of equal
        # framing overhead; find record 2's offset from the file itself.
        path = os.path.join(data, 'part-00001.tfrecord')
        blob = bytearray(open(path, 'rb').read())
        at = 0
        for _ in range(2):
            length = int.from_bytes(blob[at:at + 8], 'little')
            at += 16 + length
        blob[at + 12 + 100] ^= 0x01
        open(path, 'wb').write(bytes(blob))
        r = run(tpusim, config, tmp)
        assert r.returncode == 2, (r.returncode, r.stdout + r.stderr)
        lines = [l for l in r.stderr.splitlines() if 'data CRC mismatch' in l]
        assert len(lines) >= 1, r.stderr
        assert f'{path}: record 2 at byte offset {at}: data CRC mismatch' in lines[0], lines[0]

        config = write_config(tmp, data, True)
        r = run(tpusim, config, tmp)
        assert r.returncode == 0, r.stdout + r.stderr
        host = json.load(open(os.path.join(tmp, 'report.json')))['hosts'][0]
        assert host['tfrecord']['skipped_records'] == 1, host['tfrecord']
        assert host['costs']['examples'] == 12
    print('ok')


if __name__ == '__main__':
    main()
