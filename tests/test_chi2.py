"""The chi-square threshold every distribution law uses is exact and needs no optional
package: harness/laws/chi2.py against scipy.stats.chi2.isf's values (computed once with scipy
1.17 and pinned here), and the law's own threshold equal to it whether or not scipy is
importable (the 2-H100 gate's false alarm once depended on which of the two ran)."""
from __future__ import annotations

import builtins
import math

import pytest

from harness.laws.chi2 import chi2_isf, chi2_sf
from harness.laws.distribution import chi2_critical

# (df, alpha) -> scipy.stats.chi2.isf(alpha, df)
SCIPY = {
    (1, 0.05): 3.8414588206941285,
    (2, 3.3e-05): 20.638005992995588,
    (10, 0.01): 23.20925115895436,
    (100, 1e-06): 182.12677711954765,
    (7, 0.001): 24.321886347856854,
}


@pytest.mark.parametrize("df, alpha", sorted(SCIPY))
def test_quantile_equals_scipy(df, alpha):
    assert math.isclose(chi2_isf(alpha, df), SCIPY[df, alpha], rel_tol=1e-12)
    assert math.isclose(chi2_sf(SCIPY[df, alpha], df), alpha, rel_tol=1e-9)


def test_threshold_does_not_depend_on_scipy(monkeypatch):
    """Control: with scipy made unimportable the law's threshold is the same number."""
    real_import = builtins.__import__

    def no_scipy(name, *args, **kwargs):
        if name.split(".")[0] == "scipy":
            raise ImportError("scipy hidden by the test")
        return real_import(name, *args, **kwargs)

    with_env = chi2_critical(2, 3.3e-05)
    monkeypatch.setattr(builtins, "__import__", no_scipy)
    assert chi2_critical(2, 3.3e-05) == with_env
    assert round(with_env, 1) == 20.6   # the value test_confirm's false alarm is pinned to


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="alpha=1.5"):
        chi2_isf(1.5, 3)
    with pytest.raises(ValueError, match="df=0"):
        chi2_isf(0.05, 0)
