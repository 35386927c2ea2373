"""The chi-square distribution's upper quantile, computed exactly in plain Python: a law's
threshold must not depend on whether an optional package (scipy) happens to be installed.

`chi2_isf(alpha, df)` is the x with P(X > x) = alpha for X ~ chi2(df): the upper regularized
incomplete gamma function Q(df/2, x/2) (series below a + 1, Lentz's continued fraction above;
Numerical Recipes 6.2), inverted by bisection to the last bits of a double."""
from __future__ import annotations

import math

_EPS = 1e-16
_TINY = 1e-300


def _gamma_p_series(a: float, x: float) -> float:
    """P(a, x) by its series, for x < a + 1."""
    term = total = 1.0 / a
    n = a
    for _ in range(10_000):
        n += 1.0
        term *= x / n
        total += term
        if abs(term) < abs(total) * _EPS:
            break
    return total * math.exp(-x + a * math.log(x) - math.lgamma(a))


def _gamma_q_fraction(a: float, x: float) -> float:
    """Q(a, x) by its continued fraction (modified Lentz), for x >= a + 1."""
    b = x + 1.0 - a
    c, d = 1.0 / _TINY, 1.0 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = _TINY if abs(d) < _TINY else d
        c = b + an / c
        c = _TINY if abs(c) < _TINY else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            break
    return math.exp(-x + a * math.log(x) - math.lgamma(a)) * h


def chi2_sf(x: float, df: int) -> float:
    """P(X > x) for X ~ chi2(df)."""
    if x <= 0:
        return 1.0
    a, y = df / 2.0, x / 2.0
    return 1.0 - _gamma_p_series(a, y) if y < a + 1.0 else _gamma_q_fraction(a, y)


def chi2_isf(alpha: float, df: int) -> float:
    """The upper-alpha quantile of chi2(df): P(X > x) = alpha."""
    if not 0.0 < alpha < 1.0 or df < 1:
        raise ValueError(f"chi2_isf: alpha={alpha} must be in (0, 1) and df={df} >= 1")
    lo, hi = 0.0, max(1.0, 2.0 * df)
    while chi2_sf(hi, df) > alpha:  # the survival function falls: widen until it is below
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if chi2_sf(mid, df) > alpha else (lo, mid)
    return 0.5 * (lo + hi)
