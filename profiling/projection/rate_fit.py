"""Fitting a phase's cost to measured points: seconds = overhead + a·FLOPs + b·bytes.

Every subset of the three terms is fitted by least squares (normal equations,
columns scaled for conditioning, Gaussian elimination); among fits whose
coefficients are all non-negative and that leave at least one degree of
freedom (when there are two points or more), the smallest squared error wins.
Pure Python: the site's what-if uses it with no numpy in the request path.
"""

from __future__ import annotations

from itertools import combinations

# A measured point of one phase: (FLOPs, bytes, seconds).
Point = tuple[float, float, float]
# The terms a fit may use: per-pass overhead, FLOPs and bytes.
# Ties keep the earlier subset: one point is explained by a rate, not by overhead.
TERMS = ("flops", "bytes", "overhead")


def best_fit(points: list[Point]) -> dict[str, float] | None:
    """The coefficients (seconds per FLOP, per byte, per pass) of the best non-negative
    subset fit; None when no subset fits with non-negative coefficients."""
    best: tuple[float, dict[str, float]] | None = None
    for size in (1, 2, 3):
        if len(points) > 1 and size >= len(points):
            break
        for terms in combinations(TERMS, size):
            coefficients = least_squares(points, terms)
            if coefficients is None or min(coefficients.values()) < 0:
                continue
            error = squared_error(points, coefficients)
            if best is None or error < best[0] * (1 - 1e-9):
                best = (error, coefficients)
    return best[1] if best is not None else None


def _features(point: Point, terms: tuple[str, ...]) -> list[float]:
    values = {"overhead": 1.0, "flops": point[0], "bytes": point[1]}
    return [values[t] for t in terms]


def least_squares(points: list[Point], terms: tuple[str, ...]) -> dict[str, float] | None:
    """Coefficients of `terms` by the normal equations (columns scaled for conditioning)."""
    rows = [_features(p, terms) for p in points]
    scale = [max(abs(r[j]) for r in rows) or 1.0 for j in range(len(terms))]
    rows = [[v / scale[j] for j, v in enumerate(r)] for r in rows]
    n = len(terms)
    gram = [[sum(r[i] * r[j] for r in rows) for j in range(n)] for i in range(n)]
    rhs = [sum(r[i] * p[2] for r, p in zip(rows, points, strict=True)) for i in range(n)]
    solution = solve(gram, rhs)
    if solution is None:
        return None
    return {t: solution[j] / scale[j] for j, t in enumerate(terms)}


def solve(matrix: list[list[float]], rhs: list[float]) -> list[float] | None:
    """Gaussian elimination with partial pivoting; None when singular."""
    n = len(rhs)
    a = [row[:] + [rhs[i]] for i, row in enumerate(matrix)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) < 1e-12:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(n):
            if r != col:
                factor = a[r][col] / a[col][col]
                a[r] = [x - factor * y for x, y in zip(a[r], a[col], strict=True)]
    return [a[i][n] / a[i][i] for i in range(n)]


def predicted(point: Point, coefficients: dict[str, float]) -> float:
    """The fit's seconds for a point, computed as the fitted rates compute it (work
    divided by a rate), so that near-ties between subsets break as they always did."""
    flops, bytes_, _ = point
    total = coefficients.get("overhead", 0.0)
    for term, work in (("flops", flops), ("bytes", bytes_)):
        value = coefficients.get(term, 0.0)
        if value > 0:
            total += work / (1 / value)
    return total


def squared_error(points: list[Point], coefficients: dict[str, float]) -> float:
    return sum((predicted(p, coefficients) - p[2]) ** 2 for p in points)
