import numpy as np
from scipy import stats

from theory.coins import normals, pull_coins, uniforms


def test_uniforms_are_pure_functions_of_counters():
    a = uniforms(7, np.arange(100)[:, None], np.arange(4)[None, :], replica=3)
    b = np.stack([[uniforms(7, t, k, replica=3) for k in range(4)] for t in range(100)])
    np.testing.assert_array_equal(a, b)
    assert a.min() >= 0.0 and a.max() < 1.0


def test_uniforms_pass_a_ks_test_and_streams_differ():
    u = uniforms(1, np.arange(20000), 0)
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    v = uniforms(2, np.arange(20000), 0)
    assert abs(np.corrcoef(u, v)[0, 1]) < 0.05
    w = uniforms(1, np.arange(20000), 1)
    assert abs(np.corrcoef(u, w)[0, 1]) < 0.05


def test_pull_coin_frequency_and_shared_mode():
    t = np.arange(50000)[:, None]
    k = np.arange(3)[None, :]
    c = pull_coins(0, 0.2, t, k)
    freq = c.mean()
    assert abs(freq - 0.2) < 4 * np.sqrt(0.2 * 0.8 / c.size)
    assert not np.all(c[:, 0] == c[:, 1])
    s = pull_coins(0, 0.2, t, k, shared=True)
    assert np.all(s[:, 0] == s[:, 1]) and np.all(s[:, 1] == s[:, 2])


def test_normals_are_standard():
    z = normals(3, 0, 0, index=np.arange(40000))
    assert abs(z.mean()) < 0.03 and abs(z.var() - 1) < 0.04
    assert stats.kstest(z, "norm").pvalue > 1e-3
