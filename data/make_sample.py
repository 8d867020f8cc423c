#!/usr/bin/python3
"""Draw the demo's built-in data set from the WordNet/MiniLM embeddings.

Reads ../shared/data/wordnet-minilm/ (16,000 WordNet 3.0 glosses embedded
with all-MiniLM-L6-v2: rows.tsv and vectors.f16.npy, 384-d, unit length,
float16) and writes data/wordnet-minilm-sample/rows.tsv.gz: a seeded,
label-stratified sample in PostgreSQL COPY text format with a header line,

    id  synset_id  category  lemmas  gloss  embedding

where embedding is a cvec / pgvector text literal '[...]' whose elements are
the float16 values written as the shortest decimal that reads back to the
same float32 (float16 values are exact in float32, so loading is lossless;
this script checks it).

Allocation: every one of the 45 categories gets round(TARGET * share) rows
(largest remainders, so the total is exactly TARGET), at least FLOOR and at
most what the category has; within a category the rows are a uniform draw
without replacement from numpy.random.default_rng(SEED).  Output rows keep
the source order (WordNet synset order); ids are 1..TARGET in that order.

    /usr/bin/python3 data/make_sample.py [SOURCE_DIR]

Needs only numpy (Debian's python3-numpy).  The output is byte for byte
the same on every run (gzip with mtime 0 and no file name).
"""
import gzip
import hashlib
import os
import sys

import numpy as np

SEED = 16          # issue 16
TARGET = 4000      # rows in the sample
FLOOR = 40         # rows at least per category (every source category has >= 40)

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SOURCE = os.path.join(HERE, "..", "..", "shared", "data", "wordnet-minilm")
OUT_DIR = os.path.join(HERE, "wordnet-minilm-sample")
OUT = os.path.join(OUT_DIR, "rows.tsv.gz")


def copy_escape(text):
    """PostgreSQL COPY text format escaping."""
    return (text.replace("\\", "\\\\").replace("\t", "\\t")
            .replace("\n", "\\n").replace("\r", "\\r"))


def allocate(counts):
    """Rows per category: proportional to size, >= FLOOR, <= size, sum TARGET."""
    labels = sorted(counts)
    total = sum(counts.values())
    alloc = {l: min(counts[l], FLOOR) for l in labels}
    # Distribute the rest proportionally (largest remainder) among the
    # categories that still have rows, repeating if a cap is hit.
    while sum(alloc.values()) < TARGET:
        left = TARGET - sum(alloc.values())
        open_ = [l for l in labels if alloc[l] < counts[l]]
        if not open_:
            break
        want = {l: max(TARGET * counts[l] / total - alloc[l], 0.0) for l in open_}
        wsum = sum(want.values())
        if wsum <= 0:
            want = {l: float(counts[l] - alloc[l]) for l in open_}
            wsum = sum(want.values())
        share = {l: left * want[l] / wsum for l in open_}
        add = {l: min(int(share[l]), counts[l] - alloc[l]) for l in open_}
        given = sum(add.values())
        order = sorted(open_, key=lambda l: (-(share[l] - int(share[l])), l))
        for l in order:
            if given >= left:
                break
            if alloc[l] + add[l] < counts[l]:
                add[l] += 1
                given += 1
        if given == 0:
            break
        for l in open_:
            alloc[l] += add[l]
    return alloc


def main():
    source = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_SOURCE
    with open(os.path.join(source, "rows.tsv"), encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        assert header == ["synset_id", "lexname", "lemmas", "gloss"], header
        rows = [line.rstrip("\n").split("\t") for line in f]
    vectors = np.load(os.path.join(source, "vectors.f16.npy"))
    assert vectors.dtype == np.float16 and vectors.shape == (len(rows), 384)
    assert all(len(r) == 4 for r in rows)

    labels = np.array([r[1] for r in rows])
    counts = {l: int((labels == l).sum()) for l in np.unique(labels)}
    alloc = allocate(counts)
    assert sum(alloc.values()) == TARGET and len(alloc) == 45

    rng = np.random.default_rng(SEED)
    chosen = []
    for l in sorted(alloc):             # fixed order of draws
        members = np.flatnonzero(labels == l)
        chosen.extend(rng.choice(members, size=alloc[l], replace=False).tolist())
    chosen.sort()

    out = ["id\tsynset_id\tcategory\tlemmas\tgloss\tembedding"]
    f32 = vectors.astype(np.float32)
    for new_id, i in enumerate(chosen, start=1):
        texts = [str(x) for x in f32[i]]          # numpy: shortest round trip
        back = np.array([np.float32(t) for t in texts], dtype=np.float32)
        assert np.array_equal(back, f32[i]), i  # lossless against float16
        synset, lexname, lemmas, gloss = rows[i]
        out.append("\t".join([str(new_id), synset, lexname, copy_escape(lemmas),
                              copy_escape(gloss), "[" + ",".join(texts) + "]"]))
    data = ("\n".join(out) + "\n").encode("utf-8")

    os.makedirs(OUT_DIR, exist_ok=True)
    blob = gzip.compress(data, compresslevel=9, mtime=0)
    with open(OUT, "wb") as f:
        f.write(blob)

    # Sanity figure: share of each row's 10 nearest neighbours (cosine) in
    # the sample that have its category.
    sub = f32[chosen].astype(np.float64)
    sub /= np.linalg.norm(sub, axis=1, keepdims=True)
    lab = labels[chosen]
    same = 0
    for s in range(0, len(chosen), 500):
        sims = sub[s:s + 500] @ sub.T
        for r in range(sims.shape[0]):
            sims[r, s + r] = -np.inf
        nn = np.argpartition(-sims, 10, axis=1)[:, :10]
        same += int((lab[nn] == lab[s:s + 500, None]).sum())
    print(f"{OUT}: {len(chosen)} rows, {len(alloc)} categories "
          f"(smallest {min(alloc.values())}, largest {max(alloc.values())}), "
          f"{len(data):,} bytes of text, {len(blob):,} bytes gzipped, "
          f"sha256 {hashlib.sha256(blob).hexdigest()}")
    print(f"10 nearest neighbours (cosine) sharing the row's category: "
          f"{100.0 * same / (10 * len(chosen)):.1f}%")
    for l in sorted(alloc, key=lambda l: (-alloc[l], l)):
        print(f"  {l:<22} {alloc[l]:5d} of {counts[l]:5d}")


if __name__ == "__main__":
    main()
