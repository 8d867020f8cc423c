#!/usr/bin/env python3
"""bench/gpu_data.py: writes clustered vectors as PostgreSQL binary COPY
files for a table (id int8, c int4, v cvec): `parts` files of rows/parts
rows each, so several sessions can load in parallel.

    python3 bench/gpu_data.py ROWS DIMS CLUSTERS PARTS OUTPREFIX [SEED]

Row i belongs to cluster i % CLUSTERS; cluster centres are uniform in
[-1, 1]^d and members are the centre plus gaussian noise whose width grows
with the cluster number (0.3 .. 0.6), so clusters differ in spread.  Also
writes OUTPREFIX.queries (1,000 fresh points near the centres, text, one
cvec literal per line)."""
import sys

import numpy as np


def main():
    rows, dims, clusters, parts = (int(x) for x in sys.argv[1:5])
    prefix = sys.argv[5]
    seed = int(sys.argv[6]) if len(sys.argv) > 6 else 7
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-1, 1, size=(clusters, dims)).astype(np.float32)
    width = 0.3 + 0.3 * np.arange(clusters) / max(clusters - 1, 1)
    record = np.dtype([('fields', '>i2'), ('l1', '>i4'), ('id', '>i8'), ('l2', '>i4'),
                       ('c', '>i4'), ('l3', '>i4'), ('dim', '>i2'), ('unused', '>i2'),
                       ('x', '>f4', (dims,))])
    per_part = (rows + parts - 1) // parts
    for p in range(parts):
        first, last = p * per_part, min(rows, (p + 1) * per_part)
        with open(f'{prefix}.{p}', 'wb') as out:
            out.write(b'PGCOPY\n\xff\r\n\x00' + b'\x00' * 8)
            for start in range(first, last, 100000):
                ids = np.arange(start, min(last, start + 100000))
                c = ids % clusters
                buf = np.zeros(len(ids), dtype=record)
                buf['fields'] = 3
                buf['l1'] = 8
                buf['id'] = ids + 1
                buf['l2'] = 4
                buf['c'] = c
                buf['l3'] = 4 + 4 * dims
                buf['dim'] = dims
                noise = rng.standard_normal((len(ids), dims), dtype=np.float32)
                buf['x'] = centres[c] + noise * width[c, None].astype(np.float32)
                out.write(buf.tobytes())
            out.write(b'\xff\xff')
    q = centres[rng.integers(0, clusters, 1000)] + \
        rng.standard_normal((1000, dims), dtype=np.float32) * 0.45
    with open(f'{prefix}.queries', 'w') as out:
        for row in q:
            out.write('[' + ','.join(f'{v:.6g}' for v in row) + ']\n')


if __name__ == '__main__':
    main()
