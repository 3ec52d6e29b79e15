#!/usr/bin/env python3
"""Fits the polynomials of remat's f32 erf (erfF32 in runtime/MathF32.h)
and prints their coefficients as C++, constant term first.

  .venv/bin/python tools/math/fit_erf.py

  |x| <  SPLIT:  erf(x) = x + x * P(x^2)
  |x| >= SPLIT:  erf(x) = 1 - exp(-x^2) * Q(|x| - CENTER)   (1 beyond CUT)

P fits erf(x)/x - 1 (unweighted: its absolute error is what erf's sees) and
Q fits erfc(x) exp(x^2) (weighted for relative error), both by least
squares on Chebyshev nodes in double precision, then rounded to f32. The
accuracy of the f32 evaluation is measured in C++, where it runs:
tests/unit/VectorMathTest.cpp ("erfF32 is within 1.5 ulp of erf").
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
    ratio = np.array([math.erf(v) / v if v > 0 else 2 / math.sqrt(math.pi)
                      for v in xs])
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
