#!/usr/bin/env python3
"""Fits the time model of examples/common/training_work.cpp to bench_translation_cost's lines.

    OMP_NUM_THREADS=2 ./build/bench/bench_translation_cost 12000 > cost.txt
    OMP_NUM_THREADS=2 ./build/bench/bench_translation_cost 1300 >> cost.txt
    python3 bench/fit_translation_cost.py cost.txt

For each family, the seconds of a step = 3 x (products but the output layer's) / rate + 3 x (the output layer's) /
its rate + scores x seconds per score + steps x seconds per step + seconds per batch, by least squares on the
relative error (each step's time weighs alike, short or long), the constants kept non-negative. Prints the constants to paste into training_work.cpp and each line's error. Developer-only
(Python 3 and NumPy); the project never runs it.
"""
import sys

import numpy as np


FEATURES = ("products", "output", "score", "step", "batch")


def features(l):
    """A step's work as the time model reads it: (3 x products but the output layer's, 3 x the output
    layer's, attention scores, sequential steps, 1)."""
    macs, out, scores, steps = (float(x) for x in l[4:8])
    return [3 * (macs - out), 3 * out, scores, steps, 1.0]


def fit(X, y):
    # non-negative least squares on the relative error: drop a constant that comes out negative (or
    # whose feature is always 0) and fit again
    cols = [c for c in range(X.shape[1]) if X[:, c].any()]
    while True:
        A = X[:, cols] / y[:, None]
        coef, *_ = np.linalg.lstsq(A, np.ones(len(y)), rcond=None)
        if (coef >= 0).all():
            break
        worst = cols[int(np.argmin(coef))]
        cols = [c for c in cols if c != worst]
    full = np.zeros(X.shape[1])
    full[cols] = coef
    return full


def main():
    lines = [l.split() for l in open(sys.argv[1]) if l[0].isalpha() and not l.startswith("family")]
    for family in ("transformer", "rnn-attention"):
        rows = [l for l in lines if l[0] == family]
        X = np.array([features(l) for l in rows])
        y = np.array([float(l[8]) / 1000 for l in rows])
        c = fit(X, y)
        rate = lambda v: f"{1 / v:.4g}" if v > 0 else "inf"
        print(f"{family}: {{{rate(c[0])}, {rate(c[1])}, {c[2]:.4g}, {c[3]:.4g}, {c[4]:.4g}}}  "
              "(products/s, output products/s, s a score, s a step, s a batch)")
        predicted = X @ c
        for l, p, t in zip(rows, predicted, y):
            print(f"  B={l[1]:>3} S={l[2]:>2} T={l[3]:>2}  measured {t * 1000:8.2f} ms  estimated {p * 1000:8.2f} ms  ({(p / t - 1) * 100:+5.1f}%)")
        err = np.abs(predicted / y - 1)
        print(f"  worst {err.max() * 100:.1f}%, mean {err.mean() * 100:.1f}%")


if __name__ == "__main__":
    main()
