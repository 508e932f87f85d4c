"""The built-in objectives' builders: pure JAX, no downloads.

A builder receives the cell, a dict with keys ``dataset_class``, ``model_type``,
``instrument``, ``n_batch``, ``batch_size``, ``mixed_precision``, and returns
``(fn, x0)``: ``fn`` maps a 1-D parameter vector of length ``ndim`` to a scalar,
``x0`` is the starting point.

The built-ins build their data with numpy, not jax: an eager jax op in a builder is a
compile of its own, and with a cache dir configured it would land in the persistent
cache and muddy the per-transform evidence.

``mixed_precision`` is passed through to user builders and recorded on every row; the
built-ins ignore it (they run at JAX's default precision, float32 unless
``JAX_ENABLE_X64`` is set), so the flag never changes a built-in's program.

Importing this module does not import jax; the builders import it when called.
"""

from __future__ import annotations

import functools

import numpy as np

# ---------------------------------------------------------------------------
# shared pieces of the lens-shaped objectives

def _grid(n: int, half_width: float) -> tuple[np.ndarray, np.ndarray]:
    c = (np.arange(n) + 0.5) / n * 2 * half_width - half_width
    y, x = np.meshgrid(c, c, indexing="ij")
    return x.astype(np.float32), y.astype(np.float32)


def _psf_matrix(n: int, pix: float, sigma: float) -> np.ndarray:
    """Separable Gaussian PSF as an (n, n) banded matrix: blur(img) = P @ img @ P.T."""
    c = np.arange(n) * pix
    p = np.exp(-0.5 * ((c[:, None] - c[None, :]) / sigma) ** 2)
    p /= p.sum(axis=1, keepdims=True)
    return p.astype(np.float32)


def _mock_data(x: np.ndarray, y: np.ndarray, seed: int, noise: float) -> np.ndarray:
    """An Einstein-ring-like image plus a lens galaxy, with Gaussian noise."""
    r = np.hypot(x - 0.03, (y + 0.02) / 0.85)
    ring = np.exp(-0.5 * ((r - 1.1) / 0.12) ** 2) * (1.0 + 0.4 * np.cos(np.arctan2(y, x) - 0.7))
    lens = 2.0 * np.exp(-0.5 * (r / 0.35) ** 2)
    rng = np.random.default_rng(seed)
    return (ring + lens + rng.normal(0.0, noise, size=x.shape)).astype(np.float32)


def _deflect(jnp, p, x, y):
    """Pseudo-isothermal elliptical lens plus external shear: source-plane positions.

    p = (theta_E, e1, e2, cx, cy, g1, g2)."""
    theta_e, e1, e2, cx, cy, g1, g2 = (p[i] for i in range(7))
    dx, dy = x - cx, y - cy
    e = jnp.sqrt(e1 * e1 + e2 * e2 + 1e-8)
    q = (1.0 - e) / (1.0 + e)
    phi = 0.5 * jnp.arctan2(e2, e1 + 1e-8)
    c, s = jnp.cos(phi), jnp.sin(phi)
    xr, yr = c * dx + s * dy, -s * dx + c * dy
    psi = jnp.sqrt(q * xr * xr + yr * yr / q + 1e-4)
    axr, ayr = theta_e * q * xr / psi, theta_e * yr / (q * psi)
    ax, ay = c * axr - s * ayr, s * axr + c * ayr
    ax = ax + g1 * dx + g2 * dy
    ay = ay + g2 * dx - g1 * dy
    return x - ax, y - ay


_LENS_X0 = np.array([1.05, 0.05, -0.03, 0.02, -0.01, 0.01, 0.02], dtype=np.float32)


# ---------------------------------------------------------------------------
# toy

def build_toy(cell: dict):
    """A few elementwise ops and a reduction: compiles in well under a second."""
    import jax.numpy as jnp

    ndim = 8
    w = np.linspace(0.5, 1.5, ndim, dtype=np.float32)

    def fn(x):
        return jnp.sum(w * jnp.sin(x) ** 2) + 0.5 * jnp.sum(x * x)

    return fn, np.linspace(-1.0, 1.0, ndim, dtype=np.float32)


# ---------------------------------------------------------------------------
# mge

MGE_GRID = 40
MGE_COMPONENTS = 16  # Gaussians per light profile (lens light and source)


def build_mge(cell: dict):
    """Multi-Gaussian expansion lens model, amplitudes by a linear solve.

    Parameters: lens mass (7) + source centre and ellipticity (4) + lens-light
    ellipticity (2) = 13. Each Gaussian of the lens light and of the source is built
    as its own column (a Python loop, as MGE codes do), blurred by a separable PSF;
    the non-negative-free amplitudes come from a ridge-regularised normal-equations
    solve, and the objective is half the chi-squared of the best-fit image.
    """
    import jax.numpy as jnp

    n = MGE_GRID
    x, y = _grid(n, 2.0)
    psf = _psf_matrix(n, 4.0 / n, 0.08)
    noise = 0.05
    data = _mock_data(x, y, seed=1, noise=noise).reshape(-1)
    sigmas = np.geomspace(0.02, 1.5, MGE_COMPONENTS).astype(np.float32)

    def gaussian(px, py, e1, e2, sigma):
        e = jnp.sqrt(e1 * e1 + e2 * e2 + 1e-8)
        q = (1.0 - e) / (1.0 + e)
        phi = 0.5 * jnp.arctan2(e2, e1 + 1e-8)
        c, s = jnp.cos(phi), jnp.sin(phi)
        xr, yr = c * px + s * py, -s * px + c * py
        r2 = q * xr * xr + yr * yr / q
        return jnp.exp(-0.5 * r2 / (sigma * sigma)) / (2 * np.pi * sigma * sigma)

    def fn(p):
        bx, by = _deflect(jnp, p, x, y)
        sx, sy, se1, se2, le1, le2 = (p[i] for i in range(7, 13))
        cols = []
        for sig in sigmas:  # lens light, in the image plane
            cols.append(gaussian(x - p[3], y - p[4], le1, le2, sig))
        for sig in sigmas:  # source, in the source plane
            cols.append(gaussian(bx - sx, by - sy, se1, se2, sig))
        blurred = [psf @ img @ psf.T for img in cols]
        m = jnp.stack([b.reshape(-1) for b in blurred], axis=1)  # (npix, 2K)
        # Unit-norm columns and a ridge scaled to them keep float32 solves stable:
        # neighbouring Gaussians are nearly collinear.
        m = m / jnp.sqrt(jnp.sum(m * m, axis=0, keepdims=True) + 1e-12)
        a_mat = m.T @ m + 1e-3 * jnp.eye(m.shape[1], dtype=m.dtype)
        amps = jnp.linalg.solve(a_mat, m.T @ data)
        resid = data - m @ amps
        return 0.5 * jnp.sum(resid * resid) / (noise * noise)

    x0 = np.concatenate([_LENS_X0, np.array([0.03, -0.02, 0.1, 0.05, 0.05, -0.02], np.float32)])
    return fn, x0


# ---------------------------------------------------------------------------
# pixelization

PIX_GRID = 40
PIX_SOURCE = 16  # source pixels per side
PIX_OVERSAMPLE = 2  # sub-pixels per image pixel side


def _gradient_regularization(s: int) -> np.ndarray:
    """H = D_x^T D_x + D_y^T D_y on an s x s grid (first differences), plus a floor."""
    n = s * s
    rows = []
    for i in range(s):
        for j in range(s):
            k = i * s + j
            if j + 1 < s:
                rows.append((k, k + 1))
            if i + 1 < s:
                rows.append((k, k + s))
    d = np.zeros((len(rows), n), dtype=np.float64)
    for r, (a, b) in enumerate(rows):
        d[r, a], d[r, b] = -1.0, 1.0
    h = d.T @ d + 1e-4 * np.eye(n)
    return h.astype(np.float32)


def _bilinear_mapping(p, x, y, s: int, half: float):
    """(npix, s*s) weights of each ray-traced image position on an s x s source grid
    of half width ``half``: bilinear, four source pixels per position."""
    import jax
    import jax.numpy as jnp

    bx, by = _deflect(jnp, p, x, y)
    u = jnp.clip((bx.reshape(-1) + half) / (2 * half) * (s - 1), 0.0, s - 1.001)
    v = jnp.clip((by.reshape(-1) + half) / (2 * half) * (s - 1), 0.0, s - 1.001)
    i0, j0 = jnp.floor(v), jnp.floor(u)
    fv, fu = v - i0, u - j0
    i0, j0 = i0.astype(jnp.int32), j0.astype(jnp.int32)
    return (
        jax.nn.one_hot(i0 * s + j0, s * s) * ((1 - fv) * (1 - fu))[:, None]
        + jax.nn.one_hot(i0 * s + j0 + 1, s * s) * ((1 - fv) * fu)[:, None]
        + jax.nn.one_hot((i0 + 1) * s + j0, s * s) * (fv * (1 - fu))[:, None]
        + jax.nn.one_hot((i0 + 1) * s + j0 + 1, s * s) * (fv * fu)[:, None]
    )


def build_pixelization(cell: dict):
    """Pixelized source with a regularized linear inversion (a Bayesian evidence).

    Parameters: lens mass (7) + log10 regularization strength (1) = 8. Image sub-pixels
    (2x2 per pixel) are ray-traced to a rectangular source grid; bilinear weights give the mapping matrix,
    blurred by a separable PSF; the source comes from a Cholesky solve of
    (F^T C^-1 F + lambda H) s = F^T C^-1 d, and the objective is the negative log
    evidence (chi-squared, regularization term, and the two log-determinants).
    """
    import jax
    import jax.numpy as jnp

    n, s = PIX_GRID, PIX_SOURCE
    x, y = _grid(n, 2.0)
    psf = _psf_matrix(n, 4.0 / n, 0.08)
    noise = 0.05
    data = _mock_data(x, y, seed=2, noise=noise).reshape(-1)
    h = _gradient_regularization(s)
    logdet_h = _logdet_h(s)  # a constant of the program, computed outside any timed window
    half = 1.6  # source-plane half width

    pix = 4.0 / n
    offsets = [((a + 0.5) / PIX_OVERSAMPLE - 0.5) * pix for a in range(PIX_OVERSAMPLE)]

    def fn(p):
        lam = 10.0 ** p[7]
        # Sub-pixel oversampling, unrolled as pixelization codes do it.
        f = sum(_bilinear_mapping(p, x + ox, y + oy, s, half) for ox in offsets for oy in offsets) / len(offsets) ** 2
        cube = f.reshape(n, n, s * s)
        fb = jnp.einsum("ia,abk,jb->ijk", psf, cube, psf).reshape(n * n, s * s)
        inv_var = 1.0 / (noise * noise)
        curv = inv_var * (fb.T @ fb)
        a_mat = curv + lam * h
        chol = jnp.linalg.cholesky(a_mat)
        rhs = inv_var * (fb.T @ data)
        src = jax.scipy.linalg.cho_solve((chol, True), rhs)
        resid = data - fb @ src
        chi2 = inv_var * jnp.sum(resid * resid)
        reg = lam * src @ (h @ src)
        logdet_a = 2.0 * jnp.sum(jnp.log(jnp.diag(chol)))
        logdet_lh = (s * s) * jnp.log(lam) + logdet_h
        return 0.5 * (chi2 + reg + logdet_a - logdet_lh)

    x0 = np.concatenate([_LENS_X0, np.array([0.5], np.float32)])
    return fn, x0


@functools.cache
def _logdet_h(s: int) -> float:
    return float(np.linalg.slogdet(_gradient_regularization(s).astype(np.float64))[1])
